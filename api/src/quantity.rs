//! Kubernetes resource quantities (`250m`, `64Mi`, `1.5`, `2e3`), read as kube-apiserver reads
//! a container's resources and written back as it writes them. The webhook validates with this
//! reading and the controller builds Deployments with [`canonical`] text: one implementation,
//! so what is admitted and what is applied agree.
//!
//! Why the controller needs the apiserver's text: the apiserver rewrites quantities in a
//! Deployment (`1.5Mi` → `1536Ki`, `.5` → `500m`, `1000` → `1k`, `1e-40` → `1e-3`, `8Ei` →
//! capped), so a Deployment built from the text a user typed would differ from the stored one on
//! every reconcile, and be applied again each time. The `MyOwnShell` keeps the user's text.
//!
//! The model, from apimachinery's `resource.ParseQuantity` and `Quantity.String`
//! (`CanonicalizeBytes`), and core/v1's `SetDefaults_ResourceList`:
//! - the value is the exact number rounded away from zero to 10⁻⁹; binary values (`Ki` … `Ei`)
//!   above 2⁶³−1 are capped there; then the container's resource defaulting rounds it away from
//!   zero to 10⁻³;
//! - the format it was written in (decimal SI, binary SI, `e` exponent) is kept;
//! - text the parser finds already canonical is kept byte for byte, quirks included (`+1`,
//!   `1.500`, `5.`, `1E3` come back as written), unless the rounding to 10⁻³ changed it;
//! - any other value is written as the largest suffix that loses nothing: the mantissa without
//!   fraction, the exponent a multiple of 3 (decimal) or of 1024 (binary, for whole values of at
//!   least 1024; other binary values are written in decimal SI).
//!
//! Values are held in i128 thousandths: exact for anything up to about 1.7·10²⁹, far beyond the
//! 2⁶³−1 the webhook admits. Longer texts the apiserver would still read (binary fractions of
//! more than about 20 digits, exponents beyond i32) are reported as errors instead.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;

use crate::ResourceList;

/// The largest value the apiserver holds without capping (binary) or overflowing its 64-bit
/// resource arithmetic (decimal).
pub const MAX_UNITS: i64 = i64::MAX;

const NANOS_PER_MILLI: i128 = 1_000_000;
const MILLIS_PER_UNIT: i128 = 1_000;
const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// `MAX_UNITS` in nano-units: where binary values are capped.
const CAP_NANOS: i128 = MAX_UNITS as i128 * NANOS_PER_UNIT;

/// How a quantity was written, which decides how it is written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `n u m "" k M G T P E`
    DecimalSi,
    /// `Ki Mi Gi Ti Pi Ei`
    BinarySi,
    /// `e<int>` or `E<int>`
    DecimalExponent,
}

/// A quantity as the apiserver holds it in a container's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    /// The value in thousandths, after both roundings and the cap.
    millis: i128,
    format: Format,
    /// The written value was above [`MAX_UNITS`] and binary, so the apiserver capped it.
    capped: bool,
    /// The apiserver stores the text as written (see the module docs).
    kept_as_written: bool,
}

/// Why a text is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The empty string (the apiserver rejects it too).
    Empty,
    /// Leading or trailing whitespace (the apiserver would trim it; a spec should not carry it).
    Whitespace,
    /// No digit at all (`.`, `-`, `Ki`: the apiserver reads these as 0, which no one means).
    NotANumber,
    /// What follows the number is not a suffix.
    UnknownSuffix(String),
    /// An `e` exponent beyond 32 bits.
    ExponentOutOfRange,
    /// Beyond what this reading holds exactly (see the module docs).
    TooLarge,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => f.write_str("empty"),
            ParseError::Whitespace => f.write_str("surrounded by whitespace"),
            ParseError::NotANumber => f.write_str("not a number"),
            ParseError::UnknownSuffix(suffix) => write!(f, "unknown suffix {suffix:?}"),
            ParseError::ExponentOutOfRange => f.write_str("exponent out of range"),
            ParseError::TooLarge => f.write_str("too large"),
        }
    }
}

impl std::error::Error for ParseError {}

impl Quantity {
    /// The value in thousandths (what the apiserver compares).
    pub fn millis(&self) -> i128 {
        self.millis
    }

    /// How the value was written (SI, binary SI or exponent), which decides the suffix of the
    /// text the apiserver writes back for it.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Below zero. The apiserver parses negative quantities, but no container resource may be
    /// negative (the webhook rejects them).
    pub fn is_negative(&self) -> bool {
        self.millis < 0
    }

    /// Above [`MAX_UNITS`]: capped by the apiserver (binary), or beyond its 64-bit arithmetic.
    pub fn exceeds_max(&self) -> bool {
        self.capped || self.millis > i128::from(MAX_UNITS) * MILLIS_PER_UNIT
    }

    /// Whether the apiserver capped the written value at [`MAX_UNITS`].
    pub fn is_capped(&self) -> bool {
        self.capped
    }

    /// A whole number of units.
    pub fn is_whole(&self) -> bool {
        self.millis % MILLIS_PER_UNIT == 0
    }

    /// The value rounded away from zero to whole units (apimachinery's `Quantity.Value`).
    pub fn whole_units(&self) -> i128 {
        let units = self.millis / MILLIS_PER_UNIT;
        match self.millis % MILLIS_PER_UNIT {
            0 => units,
            r if r > 0 => units + 1,
            _ => units - 1,
        }
    }

    /// The text the apiserver writes for this value when it does not keep the written text.
    fn canonical_text(&self) -> String {
        if self.millis == 0 {
            return "0".to_owned();
        }
        let sign = if self.millis < 0 { "-" } else { "" };
        let magnitude = self.millis.unsigned_abs();
        let per_unit = MILLIS_PER_UNIT.unsigned_abs();
        let binary =
            self.format == Format::BinarySi && magnitude >= 1024 * per_unit && magnitude.is_multiple_of(per_unit);
        if binary {
            let mut units = magnitude / per_unit;
            let mut power = 0;
            while units >= 1024 && units.is_multiple_of(1024) {
                units /= 1024;
                power += 1;
            }
            // Capped values are below 1024⁷; past `Ei` apimachinery writes no suffix either.
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].get(power).copied().unwrap_or_default();
            return format!("{sign}{units}{suffix}");
        }
        // Decimal: all factors of ten into the exponent, then the exponent down to a multiple of 3.
        let mut mantissa = magnitude;
        let mut exponent: i32 = -3;
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exponent += 1;
        }
        let down = exponent.rem_euclid(3);
        // Never overflows: it only puts back factors of ten just taken out.
        mantissa *= 10u128.pow(down.unsigned_abs());
        exponent -= down;
        let suffix: Cow<'_, str> = match self.format {
            Format::DecimalExponent if exponent == 0 => "".into(),
            Format::DecimalExponent => format!("e{exponent}").into(),
            // apimachinery has no decimal SI suffix past `E` and then writes none (so `1000E`
            // comes back as `1`); its quirk is copied, the webhook never admits such values.
            _ => match exponent {
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                _ => "",
            }
            .into(),
        };
        format!("{sign}{mantissa}{suffix}")
    }
}

/// Parse `text` strictly: a number with a suffix, nothing around it. The value is the one the
/// apiserver would hold in a container's resources.
pub fn parse(text: &str) -> Result<Quantity, ParseError> {
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    if text.trim() != text {
        return Err(ParseError::Whitespace);
    }
    let (quantity, has_digits) = read(text)?;
    if !has_digits {
        return Err(ParseError::NotANumber);
    }
    Ok(quantity)
}

/// The text kube-apiserver stores for `text` in a container's resources. Text this reading
/// refuses (not a quantity, or beyond what it holds: see the module docs) is returned unchanged,
/// for the apiserver to judge.
pub fn canonical(text: &str) -> Cow<'_, str> {
    // The apiserver trims quantities before parsing; digit-less ones read as 0 there too.
    let trimmed = text.trim();
    match read(trimmed) {
        Ok((q, _)) if q.kept_as_written => Cow::Borrowed(trimmed),
        Ok((q, _)) => Cow::Owned(q.canonical_text()),
        Err(_) => Cow::Borrowed(text),
    }
}

/// A resource list with every quantity in the apiserver's [`canonical`] form.
pub fn canonical_list(list: &ResourceList) -> ResourceList {
    list.iter().map(|(name, q)| (name.clone(), KubeQuantity(canonical(&q.0).into_owned()))).collect()
}

/// The pieces of a quantity text, split as apimachinery's `parseQuantityString` does.
struct Parts<'t> {
    negative: bool,
    /// Integer digits without leading zeros (empty for zero).
    int: &'t str,
    /// Fraction digits as written (trailing zeros included).
    fraction: &'t str,
    suffix: &'t str,
    /// Whether any digit was written.
    digits: bool,
}

fn split(text: &str) -> Parts<'_> {
    let bytes = text.as_bytes();
    let (negative, mut pos) = match bytes.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let number_start = pos;
    while bytes.get(pos) == Some(&b'0') {
        pos += 1;
    }
    let int_start = pos;
    while bytes.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    let int = &text[int_start..pos];
    let mut digits = pos > number_start;
    let mut fraction = "";
    if bytes.get(pos) == Some(&b'.') {
        pos += 1;
        let start = pos;
        while bytes.get(pos).is_some_and(u8::is_ascii_digit) {
            pos += 1;
        }
        fraction = &text[start..pos];
        digits |= !fraction.is_empty();
    }
    // Every position so far follows an ASCII byte, so it is a char boundary.
    Parts { negative, int, fraction, suffix: &text[pos..], digits }
}

/// The suffix's format, power of ten and power of two, if it is one.
fn interpret(suffix: &str) -> Result<(Format, i32, u32), ParseError> {
    let decimal = |exp| Ok((Format::DecimalSi, exp, 0));
    let binary = |exp| Ok((Format::BinarySi, 0, exp));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        other => {
            let unknown = || ParseError::UnknownSuffix(other.to_owned());
            let exponent = other.strip_prefix(['e', 'E']).filter(|e| !e.is_empty()).ok_or_else(unknown)?;
            // The grammar: an optional sign, then digits only (`i64::from_str` agrees with Go's
            // ParseInt on that, which then truncates to 32 bits; this refuses instead).
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(unknown());
            }
            let exponent = exponent.parse::<i64>().map_err(|_| ParseError::ExponentOutOfRange)?;
            let exponent = i32::try_from(exponent).map_err(|_| ParseError::ExponentOutOfRange)?;
            Ok((Format::DecimalExponent, exponent, 0))
        }
    }
}

/// The digits of `int` then `fraction`, as numbers.
fn all_digits<'t>(parts: &Parts<'t>) -> impl Iterator<Item = i128> + 't {
    parts.int.bytes().chain(parts.fraction.bytes()).map(|b| i128::from(b - b'0'))
}

fn too_large() -> ParseError {
    ParseError::TooLarge
}

/// The magnitude in nano-units, rounded up: the digits × 10^`exp10` × 2^`exp2`.
fn magnitude_nanos(parts: &Parts<'_>, exp10: i32, exp2: u32) -> Result<i128, ParseError> {
    let fraction_len = i64::try_from(parts.fraction.len()).map_err(|_| too_large())?;
    let digit_count = i64::try_from(parts.int.len()).map_err(|_| too_large())? + fraction_len;
    let push = |acc: i128, d: i128| acc.checked_mul(10).and_then(|a| a.checked_add(d)).ok_or_else(too_large);
    if exp2 == 0 {
        // Digits at or above 10⁻⁹ make the integer; any non-zero digit below rounds it up.
        let shift = i64::from(exp10) - fraction_len + 9;
        let integer_digits = usize::try_from((digit_count + shift.min(0)).max(0)).map_err(|_| too_large())?;
        let mut acc = 0i128;
        let mut below = false;
        for (i, d) in all_digits(parts).enumerate() {
            if i < integer_digits {
                acc = push(acc, d)?;
            } else {
                below |= d != 0;
            }
        }
        if shift > 0 && acc != 0 {
            let scale = u32::try_from(shift).ok().and_then(|s| 10i128.checked_pow(s)).ok_or_else(too_large)?;
            acc = acc.checked_mul(scale).ok_or_else(too_large)?;
        }
        return Ok(acc + i128::from(below));
    }
    // Binary suffixes come without an exponent: digits × 2^exp2 / 10^fraction_len.
    let mantissa = all_digits(parts).try_fold(0i128, push)?;
    let scaled = mantissa.checked_mul(1i128 << exp2).ok_or_else(too_large)?;
    let shift = 9 - fraction_len;
    if shift >= 0 {
        let scale = 10i128.pow(u32::try_from(shift).map_err(|_| too_large())?);
        return scaled.checked_mul(scale).ok_or_else(too_large);
    }
    Ok(match u32::try_from(-shift).ok().and_then(|s| 10i128.checked_pow(s)) {
        Some(divisor) => scaled / divisor + i128::from(scaled % divisor != 0),
        // A divisor beyond i128: the value is a sliver above zero, if anything.
        None => i128::from(scaled != 0),
    })
}

/// Whether apimachinery's parser keeps the text as written: its fast path, for text it considers
/// canonical already, and then the rounding to 10⁻³ did not change the value.
fn kept_as_written(parts: &Parts<'_>, format: Format, exp10: i32, exp2: u32) -> bool {
    // apimachinery writes an empty integer part as "0".
    let int_len = parts.int.len().max(1);
    let int_is_zero = parts.int.is_empty();
    match format {
        Format::BinarySi => {
            // Only whole numbers of few enough digits, and only when the number is not a
            // multiple of 8 (a cheap "not a multiple of 1024" test in apimachinery).
            let precision = 15 - i64::try_from(int_len).unwrap_or(i64::MAX) - i64::from(exp2) * 3 / 10 - 1;
            parts.fraction.is_empty()
                && precision >= 0
                && !int_is_zero
                && parts.int.parse::<i64>().is_ok_and(|v| v & 7 != 0)
        }
        Format::DecimalSi | Format::DecimalExponent => {
            let Ok(digit_count) = i64::try_from(int_len + parts.fraction.len()) else { return false };
            let scale = i64::from(exp10) - i64::try_from(parts.fraction.len()).unwrap_or(i64::MAX);
            digit_count <= 18
                && scale >= -3
                && scale % 3 == 0
                && !int_is_zero
                && !ends_in_three_zeros(parts.int, parts.fraction)
        }
    }
}

/// Whether `int` followed by `fraction` ends in "000".
fn ends_in_three_zeros(int: &str, fraction: &str) -> bool {
    let zeros = |s: &str| s.bytes().rev().take_while(|&b| b == b'0').count();
    let in_fraction = zeros(fraction);
    let total = if in_fraction == fraction.len() { in_fraction + zeros(int) } else { in_fraction };
    total >= 3
}

/// Read `text` as the apiserver does; also says whether it had any digit.
fn read(text: &str) -> Result<(Quantity, bool), ParseError> {
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    if text == "0" {
        return Ok((Quantity { millis: 0, format: Format::DecimalSi, capped: false, kept_as_written: true }, true));
    }
    let parts = split(text);
    let (format, exp10, exp2) = interpret(parts.suffix).map_err(|e| match e {
        ParseError::UnknownSuffix(_) if !parts.digits => ParseError::NotANumber,
        e => e,
    })?;
    let mut nanos = magnitude_nanos(&parts, exp10, exp2)?;
    let capped = format == Format::BinarySi && nanos > CAP_NANOS;
    if capped {
        nanos = CAP_NANOS;
    }
    let mut millis = nanos / NANOS_PER_MILLI + i128::from(nanos % NANOS_PER_MILLI != 0);
    if parts.negative {
        millis = -millis;
    }
    let kept_as_written = kept_as_written(&parts, format, exp10, exp2);
    Ok((Quantity { millis, format, capped, kept_as_written }, parts.digits))
}

#[cfg(test)]
mod tests;
