//! Time, in one place for every binary: durations as Go tools and Kubernetes write them
//! (`500ms`, `30s`, `1h30m`, and days, `30d`, for certificate lifetimes: [`parse_duration`],
//! [`format_duration`]), ages as kubectl prints them ([`format_age`]), and instants as the
//! apiserver keeps a `metav1.Time`: to the second ([`now`], [`to_second`], [`at_second`]), with
//! arithmetic that saturates instead of failing ([`plus`], [`minus`]).
//!
//! Why to the second: the apiserver stores `metav1.Time` to the second, so a finer time written
//! into a status or a patch reads back different, and the echo of one's own write looks like
//! someone else's change.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

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

/// `seconds` as kubectl writes ages: `45s`, `4m59s`, `3h12m`, `2d5h` (a negative age is `0s`).
pub fn format_age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// The clock now, to the second, as a `metav1.Time`.
pub fn now() -> Time {
    to_second(Timestamp::now())
}

/// `t` cut to the second, as a `metav1.Time`.
pub fn to_second(t: Timestamp) -> Time {
    Time(second_of(t))
}

/// `t` cut to the second.
pub fn second_of(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// `seconds` after the Unix epoch as a `metav1.Time` (the epoch itself when out of range).
pub fn at_second(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// `t + d`, or the latest time there is when that is past it (a deadline that far away never
/// comes, which is what such a duration means).
pub fn plus(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d).ok().and_then(|d| t.checked_add(d).ok()).unwrap_or(Timestamp::MAX)
}

/// `t - d`, or the earliest time there is when that is before it.
pub fn minus(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d).ok().and_then(|d| t.checked_sub(d).ok()).unwrap_or(Timestamp::MIN)
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

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let cases =
            [(-5, "0s"), (0, "0s"), (59, "59s"), (61, "1m1s"), (3600 * 5 + 120, "5h2m"), (86400 * 2 + 3600, "2d1h")];
        for (seconds, want) in cases {
            assert_eq!(format_age(seconds), want, "{seconds}s");
        }
    }

    #[test]
    fn instants_are_kept_to_the_second_and_saturate() {
        let t = Timestamp::from_nanosecond(1_700_000_000_987_654_321).unwrap();
        assert_eq!(to_second(t).0.as_second(), 1_700_000_000);
        assert_eq!(to_second(t).0.subsec_nanosecond(), 0);
        assert_eq!(at_second(1_700_000_000), to_second(t));
        assert_eq!(at_second(i64::MAX).0, Timestamp::UNIX_EPOCH);
        assert_eq!(plus(t, Duration::from_secs(1)).as_second(), 1_700_000_001);
        assert_eq!(plus(t, Duration::MAX), Timestamp::MAX);
        assert_eq!(minus(t, Duration::MAX), Timestamp::MIN);
        assert_eq!(now().0.subsec_nanosecond(), 0);
    }
}
