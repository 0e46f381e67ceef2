use super::*;

/// (written, what kube-apiserver v1.35.4 stores in a Deployment's container resources). Every
/// pair was read back from the real apiserver (tests/tests/controller_quantities.rs asks it
/// again on each run, for these and generated texts).
const STORED: &[(&str, &str)] = &[
    // Canonical already.
    ("0", "0"),
    ("1", "1"),
    ("10m", "10m"),
    ("200m", "200m"),
    ("16Mi", "16Mi"),
    ("64Mi", "64Mi"),
    ("1k", "1k"),
    ("12Ki", "12Ki"),
    ("1Ei", "1Ei"),
    ("2e18", "2e18"),
    // Rewritten to the largest suffix that loses nothing.
    ("1.5Mi", "1536Ki"),
    ("1.5Gi", "1536Mi"),
    ("1.5Pi", "1536Ti"),
    ("1024Ki", "1Mi"),
    ("0.5Ki", "512"),
    (".5", "500m"),
    ("0.5", "500m"),
    ("1.5", "1500m"),
    ("1.0", "1"),
    ("1000", "1k"),
    ("1000m", "1"),
    ("1.5e3", "1500"),
    ("1.0e3", "1e3"),
    // Rounded up to 10⁻³ (container resources are).
    ("1e-40", "1e-3"),
    ("1n", "1m"),
    ("1u", "1m"),
    ("0.1m", "1m"),
    ("1500u", "2m"),
    ("1.0001", "1001m"),
    ("0.000000001", "1m"),
    ("1.5e-3", "2e-3"),
    ("2.000m", "2m"),
    // Binary values are capped at 2⁶³−1 (and written in decimal when not whole); decimal ones are
    // not capped (and past `E` lose their suffix).
    ("8Ei", "9223372036854775807"),
    ("7.999Ei", "9222219115350168961024m"),
    ("8192Pi", "9223372036854775807"),
    ("10E", "10E"),
    ("9223372036854775808", "9223372036854775808"),
    ("1000E", "1"),
    ("1e30", "1e30"),
    // Text the parser takes for canonical is kept as written.
    ("1.500", "1.500"),
    ("+1", "+1"),
    ("01", "01"),
    ("5.", "5."),
    ("1E3", "1E3"),
    ("1e03", "1e03"),
    ("1.Ki", "1.Ki"),
    ("+1Ki", "+1Ki"),
    ("0000001", "0000001"),
    ("100e-3", "100e-3"),
    // Zero, however written; digit-less texts read as zero too.
    ("00", "0"),
    ("0m", "0"),
    ("0Ki", "0"),
    ("0e3", "0"),
    ("0.0", "0"),
    (".", "0"),
    ("Ki", "0"),
    // The apiserver trims.
    (" 1 ", "1"),
];

#[test]
fn canonical_is_what_the_apiserver_stores() {
    for (written, stored) in STORED {
        assert_eq!(canonical(written), *stored, "{written:?}");
        // Storing the stored text again changes nothing.
        assert_eq!(canonical(stored), *stored, "{stored:?} again");
    }
}

#[test]
fn unreadable_text_is_left_as_written() {
    for text in ["", "lots", "1K", "1.2.3", "1e99999999999", "1e", "--1"] {
        assert_eq!(canonical(text), text, "{text:?}");
    }
}

#[test]
fn canonical_lists_map_every_value() {
    let list = ResourceList::from([
        ("cpu".to_owned(), KubeQuantity(".5".to_owned())),
        ("memory".to_owned(), KubeQuantity("1.5Mi".to_owned())),
        ("example.com/gpu".to_owned(), KubeQuantity("1".to_owned())),
    ]);
    let list = canonical_list(&list);
    let canonical: Vec<(&str, &str)> = list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())).collect();
    assert_eq!(canonical, [("cpu", "500m"), ("example.com/gpu", "1"), ("memory", "1536Ki")]);
}

#[test]
fn values_in_thousandths() {
    let cases: &[(&str, i128)] = &[
        ("1", 1000),
        ("250m", 250),
        ("1Ki", 1024 * 1000),
        ("1.5Gi", 1536 * 1024 * 1024 * 1000),
        ("1G", 1_000_000_000_000),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("1n", 1),
        ("1e-40", 1),
        ("-1.5", -1500),
        ("-1n", -1),
        ("1Ei", (1i128 << 60) * 1000),
        ("8Ei", i128::from(i64::MAX) * 1000),
        ("12345678901234567890", 12_345_678_901_234_567_890_000),
        ("0.0000000000000000000000000000000000000000001", 1),
        ("1.0000000001Ki", 1_024_001),
    ];
    for (text, millis) in cases {
        assert_eq!(parse(text).map(|q| q.millis()), Ok(*millis), "{text:?}");
    }
}

#[test]
fn the_ceiling_is_two_to_the_63_minus_one() {
    let exceeds = |text: &str| parse(text).unwrap().exceeds_max();
    assert!(!exceeds("9223372036854775807"));
    assert!(exceeds("9223372036854775807.001"));
    assert!(exceeds("9223372036854775808"));
    assert!(!exceeds("7Ei"));
    assert!(exceeds("8Ei"), "capped by the apiserver");
    assert!(parse("8Ei").unwrap().is_capped());
    assert!(!parse("10E").unwrap().is_capped(), "decimal values are not capped");
    assert!(exceeds("10E"));
    assert!(!exceeds("9E"));
}

#[test]
fn whole_units_round_away_from_zero() {
    for (text, units, whole) in [
        ("1", 1, true),
        ("1.5", 2, false),
        ("1m", 1, false),
        ("0", 0, true),
        ("-1.5", -2, false),
        ("2Mi", 2097152, true),
    ] {
        let q = parse(text).unwrap();
        assert_eq!((q.whole_units(), q.is_whole()), (units, whole), "{text:?}");
    }
}

#[test]
fn formats_and_signs() {
    assert_eq!(parse("1Ki").unwrap().format(), Format::BinarySi);
    assert_eq!(parse("1e3").unwrap().format(), Format::DecimalExponent);
    assert_eq!(parse("1k").unwrap().format(), Format::DecimalSi);
    assert!(parse("-1").unwrap().is_negative());
    assert!(!parse("-0").unwrap().is_negative());
    assert_eq!(canonical("-1.5Mi"), "-1536Ki");
    assert_eq!(canonical("-1000"), "-1k");
}

#[test]
fn strict_parsing_says_why() {
    let cases: &[(&str, ParseError)] = &[
        ("", ParseError::Empty),
        (" 1", ParseError::Whitespace),
        ("1 ", ParseError::Whitespace),
        ("abc", ParseError::NotANumber),
        ("lots", ParseError::NotANumber),
        (".", ParseError::NotANumber),
        ("-", ParseError::NotANumber),
        ("Ki", ParseError::NotANumber),
        ("e3", ParseError::NotANumber),
        ("1x", ParseError::UnknownSuffix("x".into())),
        ("1K", ParseError::UnknownSuffix("K".into())),
        ("1mi", ParseError::UnknownSuffix("mi".into())),
        ("1e", ParseError::UnknownSuffix("e".into())),
        ("1Mi1", ParseError::UnknownSuffix("Mi1".into())),
        ("1.2.3", ParseError::UnknownSuffix(".3".into())),
        ("--1", ParseError::NotANumber),
        ("1e+", ParseError::UnknownSuffix("e+".into())),
        ("1e3.5", ParseError::UnknownSuffix("e3.5".into())),
        ("1e99999999999", ParseError::ExponentOutOfRange),
        ("1e99", ParseError::TooLarge),
        ("1e40", ParseError::TooLarge),
        ("99999999999999999999999999999999999999999", ParseError::TooLarge),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text).err().as_ref(), Some(want), "{text:?}");
    }
    assert!(parse("1e-99").is_ok(), "tiny values round up to 10⁻³");
    assert!(parse("9E").is_ok());
    assert_eq!(ParseError::UnknownSuffix("x".into()).to_string(), "unknown suffix \"x\"");
}
