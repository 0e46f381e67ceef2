//! A validating pull reader over JSON text, for the one document shape read on every admission
//! request ([`super::request::decode`]).
//!
//! Why not serde alone: an AdmissionReview is mostly fields the webhook never reads (userInfo,
//! managedFields, the last-applied annotation), and serde_json's generic path through them was
//! most of the CPU of an answer. This reader checks the same grammar serde_json does (RFC 8259:
//! strings without raw control characters and with valid escapes, numbers, literals, nesting)
//! but skips a value in one tight loop, and reads a string without escapes as a borrowed slice.
//!
//! It is deliberately partial: anything it does not handle itself (an escaped string it would
//! have to decode, nesting as deep as serde_json's [`SERDE_RECURSION_LIMIT`]) is a [`Refused`],
//! and the caller then decodes the body with serde_json, which stays the reference for what a
//! body means and for every error message. Tests hold the two to the same answers.

use std::borrow::Cow;

/// This reader does not answer for the input; serde_json decides (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused;

pub type Result<T> = std::result::Result<T, Refused>;

/// serde_json's recursion limit: it reads 127 nested containers and fails on the 128th (where
/// it counts depth: a generic `Value`, maps and structs; its skipping of ignored fields and raw
/// values counts none). The cursor counts from the document's root the same way and refuses
/// there, so it only answers for documents every serde_json reading of them accepts.
pub const SERDE_RECURSION_LIMIT: usize = 128;

/// Store a field's value, refusing a second one (serde rejects a repeated field).
pub fn once<T>(slot: &mut Option<T>, value: T) -> Result<()> {
    match slot {
        Some(_) => Err(Refused),
        None => {
            *slot = Some(value);
            Ok(())
        }
    }
}

/// A whole text that is one value `read` reads (whitespace around it aside).
pub fn whole<'a, T>(text: &'a str, read: impl FnOnce(&mut Cursor<'a>) -> Result<T>) -> Result<T> {
    let mut c = Cursor::new(text);
    let value = read(&mut c)?;
    if c.at_end() { Ok(value) } else { Err(Refused) }
}

/// A position in a JSON text that is valid UTF-8 (it comes from a `&str`).
pub struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    /// Containers open around `pos` (read with `object` or `array`).
    depth: usize,
}

/// Bytes of a JSON string that end a plain run: `"`, `\` and control characters.
fn string_stop_mask(chunk: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let quote = chunk ^ (ONES * u64::from(b'"'));
    let backslash = chunk ^ (ONES * u64::from(b'\\'));
    // A byte is zero in `quote` (`backslash`) where the chunk holds `"` (`\`); a byte below
    // 0x20 borrows when 0x20 is subtracted. `& !x` drops bytes with the high bit set, so the
    // lowest flagged byte is always a real one (higher ones may be borrow artefacts).
    let is_quote = quote.wrapping_sub(ONES) & !quote;
    let is_backslash = backslash.wrapping_sub(ONES) & !backslash;
    let is_control = chunk.wrapping_sub(ONES * 0x20) & !chunk;
    (is_quote | is_backslash | is_control) & HIGHS
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Self { text, pos: 0, depth: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    pub fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    pub fn peek_token(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.peek()
    }

    /// Consume `byte` (after whitespace).
    pub fn expect(&mut self, byte: u8) -> Result<()> {
        if self.peek_token() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Refused)
        }
    }

    /// Whether only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.skip_whitespace();
        self.pos == self.bytes().len()
    }

    /// Consume `null` if it comes next.
    pub fn null(&mut self) -> Result<bool> {
        if self.peek_token() != Some(b'n') {
            return Ok(false);
        }
        self.literal(b"null")?;
        Ok(true)
    }

    /// `null` as `None`, or the value `read` reads.
    pub fn nullable<T>(&mut self, read: impl FnOnce(&mut Self) -> Result<T>) -> Result<Option<T>> {
        if self.null()? { Ok(None) } else { read(self).map(Some) }
    }

    /// Whether the next value is set (not `null`); the value is skipped.
    pub fn is_set(&mut self) -> Result<bool> {
        if self.null()? {
            return Ok(false);
        }
        self.skip_value()?;
        Ok(true)
    }

    /// An array of strings.
    pub fn strings(&mut self) -> Result<Vec<Cow<'a, str>>> {
        let mut strings = Vec::new();
        self.array(|c| {
            strings.push(c.string()?);
            Ok(())
        })?;
        Ok(strings)
    }

    fn literal(&mut self, word: &[u8]) -> Result<()> {
        let end = self.pos + word.len();
        if self.bytes().get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(())
        } else {
            Err(Refused)
        }
    }

    /// Move past the string whose opening quote is at `pos`; returns where its content ends
    /// and whether it holds an escape. Checks what serde_json checks of a skipped string.
    fn pass_string(&mut self) -> Result<(usize, bool)> {
        self.pos += 1;
        let mut escaped = false;
        loop {
            // Eight bytes at a time while they are plain.
            while let Some(chunk) = self.bytes().get(self.pos..self.pos + 8) {
                let word = u64::from_le_bytes(chunk.try_into().map_err(|_| Refused)?);
                let stops = string_stop_mask(word);
                if stops != 0 {
                    self.pos += (stops.trailing_zeros() / 8) as usize;
                    break;
                }
                self.pos += 8;
            }
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok((self.pos - 1, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.pos += 1,
                        Some(b'u') => {
                            let hex = self.bytes().get(self.pos + 1..self.pos + 5).ok_or(Refused)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(Refused);
                            }
                            self.pos += 5;
                        }
                        _ => return Err(Refused),
                    }
                }
                Some(0..0x20) | None => return Err(Refused),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// A string value (after whitespace), borrowed from the text. An escaped string is
    /// refused: decoding escapes (surrogate pairs and all) is left to serde_json.
    pub fn string(&mut self) -> Result<Cow<'a, str>> {
        self.plain_string().map(Cow::Borrowed)
    }

    /// A string value without escapes (after whitespace), borrowed from the text.
    pub fn plain_string(&mut self) -> Result<&'a str> {
        if self.peek_token() != Some(b'"') {
            return Err(Refused);
        }
        let start = self.pos + 1;
        let (end, escaped) = self.pass_string()?;
        if escaped {
            return Err(Refused);
        }
        // `start` and `end` sit next to ASCII quotes, so they are char boundaries.
        self.text.get(start..end).ok_or(Refused)
    }

    /// Skip one value (after whitespace), checking its grammar; returns its text.
    pub fn skip_value(&mut self) -> Result<&'a str> {
        self.skip_whitespace();
        let start = self.pos;
        // One bit per container opened here: 1 for an object, 0 for an array.
        let mut stack = [0u64; SERDE_RECURSION_LIMIT.div_ceil(64)];
        let mut depth = 0usize;
        loop {
            // A value.
            match self.peek_token().ok_or(Refused)? {
                b'"' => {
                    self.pass_string()?;
                }
                b'{' | b'[' => {
                    let object = self.peek() == Some(b'{');
                    self.pos += 1;
                    self.enter(self.depth + depth)?;
                    let (word, bit) = (depth / 64, depth % 64);
                    let slot = stack.get_mut(word).ok_or(Refused)?;
                    *slot = (*slot & !(1 << bit)) | (u64::from(object) << bit);
                    depth += 1;
                    let close = if object { b'}' } else { b']' };
                    if self.peek_token() == Some(close) {
                        self.pos += 1;
                        depth -= 1;
                    } else {
                        if object {
                            self.key_and_colon()?;
                        }
                        continue;
                    }
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return Err(Refused),
            }
            // After a value: the end, a comma, or closing brackets.
            loop {
                if depth == 0 {
                    return self.text.get(start..self.pos).ok_or(Refused);
                }
                let (word, bit) = ((depth - 1) / 64, (depth - 1) % 64);
                let object = stack.get(word).is_some_and(|w| w >> bit & 1 == 1);
                match self.peek_token() {
                    Some(b',') => {
                        self.pos += 1;
                        if object {
                            self.key_and_colon()?;
                        }
                        break;
                    }
                    Some(b'}') if object => {
                        self.pos += 1;
                        depth -= 1;
                    }
                    Some(b']') if !object => {
                        self.pos += 1;
                        depth -= 1;
                    }
                    _ => return Err(Refused),
                }
            }
        }
    }

    /// A key of a skipped object and its colon.
    fn key_and_colon(&mut self) -> Result<()> {
        if self.peek_token() != Some(b'"') {
            return Err(Refused);
        }
        self.pass_string()?;
        self.expect(b':')
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<()> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Refused),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.some_digits()?;
        }
        Ok(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn some_digits(&mut self) -> Result<()> {
        let start = self.pos;
        self.digits();
        if self.pos == start { Err(Refused) } else { Ok(()) }
    }

    /// A JSON integer (after whitespace) that fits an `i32`. Fractions, exponents, `-0` and
    /// larger integers are refused (serde says what is wrong with them).
    pub fn int32(&mut self) -> Result<i32> {
        self.skip_whitespace();
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let digits_start = self.pos;
        match self.peek() {
            // serde_json reads `-0` as the float -0.0.
            Some(b'0') if !negative => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Refused),
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) || self.pos - digits_start > 10 {
            return Err(Refused);
        }
        let text = self.text.get(start..self.pos).ok_or(Refused)?;
        text.parse::<i32>().map_err(|_| Refused)
    }

    /// Read an object (after whitespace) member by member: `member` gets each key and reads
    /// (or skips) its value.
    pub fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Result<()>) -> Result<()> {
        self.delimited(b'{', b'}', |c| {
            let key = c.plain_string()?;
            c.expect(b':')?;
            member(c, key)
        })
    }

    /// Read an array (after whitespace) element by element.
    pub fn array(&mut self, element: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.delimited(b'[', b']', element)
    }

    /// `open`, then items separated by commas, then `close`.
    fn delimited(&mut self, open: u8, close: u8, mut item: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.expect(open)?;
        self.enter(self.depth)?;
        self.depth += 1;
        if self.peek_token() == Some(close) {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            item(self)?;
            match self.peek_token() {
                Some(b',') => self.pos += 1,
                Some(b) if b == close => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(Refused),
            }
        }
    }

    /// Whether one more container may open inside `open` ones (see [`SERDE_RECURSION_LIMIT`]).
    fn enter(&self, open: usize) -> Result<()> {
        if open + 1 < SERDE_RECURSION_LIMIT { Ok(()) } else { Err(Refused) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skips(text: &str) -> Result<&str> {
        let mut c = Cursor::new(text);
        let v = c.skip_value()?;
        if c.at_end() { Ok(v) } else { Err(Refused) }
    }

    #[test]
    fn skip_agrees_with_serde_json() {
        let cases = [
            "null",
            "true",
            "false",
            "0",
            "-0",
            "12",
            "-12.5e+3",
            "1E9",
            "\"\"",
            "\"a\\\"b\\u00e9\\n\"",
            "[]",
            "{}",
            "[1,[2,[3]],{\"a\":{}}]",
            "{\"a\":1,\"b\":[true,null],\"c\":{\"d\":\"e\"}}",
            " { \"a\" : [ 1 , 2 ] } ",
            "\"long string with no escapes at all, more than eight bytes\"",
            "\"é ünïcode ✓\"", // valid
            "",
            "nul",
            "tru",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{1:2}",
            "[1 2]",
            "{\"a\":1 \"b\":2}",
            "\"\\x\"",
            "\"\\u12g4\"",
            "\"a\tb\"",
            "\"unterminated",
            "[",
            "{",
            "]",
            "[}",
            "{]",
            "\"\\u00\"",
            "1 2",
            "[1]]",
        ];
        for case in cases {
            let serde = serde_json::from_str::<serde::de::IgnoredAny>(case).is_ok();
            assert_eq!(skips(case).is_ok(), serde, "{case:?}");
            if serde {
                assert_eq!(skips(case).unwrap(), case.trim(), "{case:?}");
            }
        }
    }

    /// `depth` containers, each holding the next: `[[…]]`, or objects keyed "a" when `objects`.
    fn nested(depth: usize, objects: bool) -> String {
        let (open, close) = if objects { ("{\"a\":", "}") } else { ("[", "]") };
        format!("{}1{}", open.repeat(depth), close.repeat(depth))
    }

    #[test]
    fn nesting_is_refused_where_serde_json_stops() {
        // serde_json's recursion limit is 128: it reads 127 nested containers, not 128.
        for depth in [1, 126, 127, 128, 129, 300] {
            for objects in [false, true] {
                let text = nested(depth, objects);
                let serde = serde_json::from_str::<serde_json::Value>(&text).is_ok();
                assert_eq!(serde, depth < SERDE_RECURSION_LIMIT, "serde_json's own limit at {depth}");
                // Skipped whole, and read through `object` with the rest skipped: the depth
                // counts from the document's root either way.
                assert_eq!(skips(&text).is_ok(), serde, "skipped, {depth} deep");
                if objects {
                    let read = whole(&text, |c| c.object(|c, _| c.skip_value().map(drop)));
                    assert_eq!(read.is_ok(), serde, "read, {depth} deep");
                }
            }
        }
    }

    #[test]
    fn int32_reads_what_serde_reads_as_i32() {
        for text in [
            "0",
            "-0",
            "7",
            "-7",
            "2147483647",
            "-2147483648",
            "2147483648",
            "-2147483649",
            "12345678901",
            "1.0",
            "1e2",
            "01",
            "-",
            "",
            "x",
            "99999999999999999999",
        ] {
            let mut c = Cursor::new(text);
            let fast = c.int32().ok().filter(|_| c.at_end());
            let serde = serde_json::from_str::<i32>(text).ok();
            if fast.is_some() {
                assert_eq!(fast, serde, "{text:?}");
            }
            assert_eq!(fast.is_some(), serde.is_some(), "{text:?}");
        }
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        assert_eq!(Cursor::new(" \"abc\"").string(), Ok(Cow::Borrowed("abc")));
        assert_eq!(Cursor::new("\"a\\nb\"").string(), Err(Refused));
        assert_eq!(Cursor::new("1").string(), Err(Refused));
    }

    #[test]
    fn stop_mask_finds_the_first_stop() {
        for (text, want) in [
            (*b"abcdefgh", None),
            (*b"abc\"efgh", Some(3)),
            (*b"\\bcdefgh", Some(0)),
            (*b"abcdefg\x1f", Some(7)),
            (*b"\xc3\xa9cdefgh", None),
            (*b"\x00\"\\\x01\xff\x7f\x20!", Some(0)),
        ] {
            let mask = string_stop_mask(u64::from_le_bytes(text));
            let first = (mask != 0).then(|| mask.trailing_zeros() / 8);
            assert_eq!(first, want, "{text:?}");
        }
    }
}
