//! Durations on the command line, as Go tools write them (`500ms`, `30s`, `2m`, `1h`, `1m30s`),
//! plus days (`30d`) for certificate lifetimes. The one parser every binary's flags use.

use std::time::Duration;

/// Parse a Go-style duration (units `ms`, `s`, `m`, `h`, and `d`; at least one; no sign).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("invalid duration {text:?}: {why} (examples: 500ms, 30s, 2m, 1m30s, 30d)");
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

/// `d` as Kubernetes writes a duration, to the second: `1h30m`, `40s`, `0s` (what
/// [`parse_duration`] reads back).
pub fn format_duration(d: Duration) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_durations_parse() {
        let cases = [
            ("500ms", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            ("1h1m1s", Duration::from_secs(3661)),
            ("30d", Duration::from_secs(2_592_000)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            (" 5s ", Duration::from_secs(5)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_durations_say_why() {
        let cases = [
            ("", "empty"),
            ("5", "missing unit"),
            ("5y", "unknown unit"),
            ("1.5h", "unknown unit"),
            ("10 s", "unknown unit"),
            ("-5s", "expected a number"),
            ("s", "expected a number"),
            ("99999999999999999999s", "too large"),
        ];
        for (text, want) in cases {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn durations_are_written_back_as_they_are_read() {
        for (d, text) in [(0, "0s"), (40, "40s"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m"), (604_800, "168h")] {
            assert_eq!(format_duration(Duration::from_secs(d)), text);
            assert_eq!(parse_duration(text), Ok(Duration::from_secs(d)));
        }
    }
}
