//! Kubernetes resource quantities (`250m`, `64Mi`, `1.5`, `2e3`), parsed exactly enough to
//! compare requests with limits: values are held in nano-units as `i128`, the precision the
//! apiserver keeps (finer fractions round up, as it does).

use std::cmp::Ordering;

/// A parsed quantity in units of 10⁻⁹.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }
}

fn pow10(exp: u32) -> Option<i128> {
    10i128.checked_pow(exp)
}

/// Parse `text` as the apiserver does (`<signed decimal><suffix>`, suffixes `n u m k M G T P E`,
/// `Ki Mi Gi Ti Pi Ei`, or an exponent `e<int>`/`E<int>`). The error is a short reason.
pub fn parse(text: &str) -> Result<Quantity, String> {
    let bytes = text.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else { return Err("not a quantity".into()) };
    if first.is_ascii_whitespace() || last.is_ascii_whitespace() {
        return Err("not a quantity".into());
    }
    let (negative, body) = match first {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    // One pass over the number: digits with at most one '.' (byte positions, not string
    // searches: this runs for every quantity of every admission request).
    let mut number_len = 0;
    let mut dot = None;
    for (i, b) in body.bytes().enumerate() {
        match b {
            b'0'..=b'9' => {}
            b'.' if dot.is_none() => dot = Some(i),
            b'.' => return Err("not a number".into()),
            _ => break,
        }
        number_len = i + 1;
    }
    let (number, suffix) = body.split_at(number_len);
    let (int_part, frac_part) = match dot {
        Some(i) => (&number[..i], &number[i + 1..]),
        None => (number, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err("not a number".into());
    }
    let (exp10, exp2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => match other.strip_prefix(['e', 'E']).map(str::parse::<i32>) {
            Some(Ok(e)) if (-40..=40).contains(&e) => (e, 0),
            Some(Ok(_)) => return Err("exponent out of range".into()),
            _ => return Err(format!("unknown suffix {other:?}")),
        },
    };
    // The digits of int and fraction together, without leading zeros (no allocation: this runs
    // for every quantity of every request).
    let mut mantissa: i128 = 0;
    let mut significant = 0usize;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        if significant == 0 && b == b'0' {
            continue;
        }
        significant += 1;
        if significant > 36 {
            return Err("too many digits".into());
        }
        mantissa = mantissa * 10 + i128::from(b - b'0');
    }
    // value = mantissa × 10^(exp10 − frac digits) × 2^exp2, in nano-units: × 10^9.
    let scale = exp10 - i32::try_from(frac_part.len()).map_err(|_| "too many digits".to_owned())? + 9;
    let too_big = || "too large".to_owned();
    let scaled = if scale >= 0 {
        mantissa.checked_mul(pow10(scale.unsigned_abs()).ok_or_else(too_big)?).ok_or_else(too_big)?
    } else {
        // Below a nano-unit: round up, like the apiserver.
        let div = pow10(scale.unsigned_abs()).unwrap_or(i128::MAX);
        mantissa / div + i128::from(mantissa % div != 0)
    };
    let nanos = scaled.checked_mul(1i128 << exp2).ok_or_else(too_big)?;
    Ok(Quantity { nanos: if negative { -nanos } else { nanos } })
}

/// Compare two quantity strings (`None` if either does not parse).
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(parse(a).ok()?.cmp(&parse(b).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_in_different_notations() {
        let same = [
            ("1", "1000m"),
            ("0.5", "500m"),
            ("1Ki", "1024"),
            ("1Mi", "1048576"),
            ("1Gi", "1073741824"),
            ("1k", "1000"),
            ("1e3", "1k"),
            ("1E3", "1000"),
            ("1.5Gi", "1536Mi"),
            ("100n", "0.0000001"),
            ("+2", "2"),
            ("0", "0m"),
            ("5.", "5"),
            (".5", "500m"),
            ("1Ei", "1152921504606846976"),
        ];
        for (a, b) in same {
            assert_eq!(compare(a, b), Some(Ordering::Equal), "{a} vs {b}");
        }
    }

    #[test]
    fn ordering() {
        assert_eq!(compare("10m", "200m"), Some(Ordering::Less));
        assert_eq!(compare("16Mi", "64Mi"), Some(Ordering::Less));
        assert_eq!(compare("1G", "1Gi"), Some(Ordering::Less));
        assert_eq!(compare("2", "1500m"), Some(Ordering::Greater));
        assert!(parse("-1").unwrap().is_negative());
        assert!(!parse("0").unwrap().is_negative());
        // Below a nano-unit rounds up, so it is not zero.
        assert_eq!(compare("1e-12", "1n"), Some(Ordering::Equal));
    }

    #[test]
    fn invalid_quantities() {
        for bad in [
            "",
            " 1",
            "1 ",
            "abc",
            "1x",
            "1K",
            "1mi",
            "1.2.3",
            ".",
            "-",
            "1e",
            "1e99",
            "--1",
            "1Mi1",
            "99999999999999999999999999999999999999999",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse("9E").is_ok());
        assert!(parse("1e40").is_err(), "too large in nano-units");
    }
}
