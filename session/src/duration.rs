//! Durations and times as this binary reads and shows them: Go-style durations for
//! `--detached-ttl` (`30s`, `1h`, `1h30m`, the grammar of `runtime/src/time.rs`), kubectl-style
//! ages for `list`, and now in seconds since the Unix epoch for the protocol.
//!
//! A copy of a few lines of `myownshell_runtime::time` rather than a use of it: this binary is
//! built static for every shell pod, and `runtime` brings kube, rustls and hyper.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parse a Go-style duration (units `ms`, `s`, `m`, `h`, `d`; at least one; no sign).
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("invalid duration {text:?}: {why} (examples: 500ms, 30s, 2m, 1h30m)");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad("empty"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let value: u64 = rest[..digits].parse().map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value.saturating_mul(60)),
            "h" => Duration::from_secs(value.saturating_mul(3600)),
            "d" => Duration::from_secs(value.saturating_mul(86_400)),
            "" => return Err(bad("missing unit")),
            _ => return Err(bad("unknown unit")),
        };
        total = total.saturating_add(part);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// A duration as Kubernetes writes one: `1h30m`, `40s`, `250ms` under a second.
pub fn format(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, s % 3600 / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// `seconds` as kubectl writes ages: `45s`, `4m59s`, `3h12m`, `2d5h`.
pub fn age(seconds: u64) -> String {
    let s = seconds;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Nanoseconds since the Unix epoch (wrapping), for ids that should not repeat.
pub fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_print_as_kubernetes_writes_them() {
        // (text, parsed or None, printed back)
        let cases = [
            ("1h", Some(3_600_000), "1h"),
            ("90s", Some(90_000), "1m30s"),
            ("1h30m", Some(5_400_000), "1h30m"),
            ("250ms", Some(250), "250ms"),
            ("0", Some(0), "0ms"),
            ("2d", Some(172_800_000), "48h"),
            ("", None, ""),
            ("10", None, ""),
            ("1x", None, ""),
            ("-1s", None, ""),
        ];
        for (text, millis, printed) in cases {
            let parsed = parse(text).ok().map(|d| d.as_millis() as u64);
            assert_eq!(parsed, millis, "{text}");
            if let Some(ms) = millis {
                assert_eq!(format(Duration::from_millis(ms)), printed, "{text}");
            }
        }
        assert_eq!([age(5), age(299), age(3 * 3600 + 720), age(2 * 86400 + 3600)], ["5s", "4m59s", "3h12m", "2d1h"]);
    }
}
