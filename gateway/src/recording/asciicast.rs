//! asciicast v2 (<https://docs.asciinema.org/manual/asciicast/v2/>), the format `asciinema play`
//! and its web player read: a header line, then one JSON array per event, `[seconds, "o",
//! output]` for what the terminal printed and `[seconds, "r", "COLSxROWS"]` for a resize. Only
//! output is ever written, never input: what a user types and the terminal does not echo (a
//! password) is not in a recording.

use serde_json::json;

/// The header line.
pub fn header(cols: u16, rows: u16, unix_seconds: i64, title: &str) -> String {
    let header = json!({
        "version": 2,
        "width": cols,
        "height": rows,
        "timestamp": unix_seconds,
        "title": title,
        "env": { "TERM": "xterm-256color" },
    });
    format!("{header}\n")
}

/// An output event.
pub fn output(seconds: f64, text: &str) -> String {
    format!("{}\n", json!([round(seconds), "o", text]))
}

/// A resize event.
pub fn resize(seconds: f64, cols: u16, rows: u16) -> String {
    format!("{}\n", json!([round(seconds), "r", format!("{cols}x{rows}")]))
}

/// Seconds to the microsecond, as asciinema writes them.
fn round(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

/// Output bytes as text, a UTF-8 character cut between two chunks kept for the next one.
#[derive(Debug, Default)]
pub struct Utf8Carry(Vec<u8>);

impl Utf8Carry {
    /// The text of `bytes` after what was carried; an incomplete character at the end is kept,
    /// anything invalid becomes U+FFFD.
    pub fn text(&mut self, bytes: &[u8]) -> String {
        self.0.extend_from_slice(bytes);
        let complete = match std::str::from_utf8(&self.0) {
            Ok(_) => self.0.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.0.len(),
        };
        let rest = self.0.split_off(complete);
        let text = String::from_utf8_lossy(&self.0).into_owned();
        self.0 = rest;
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_asciinema_reads_them() {
        assert_eq!(
            header(80, 24, 1_800_000_000, "team/web by alice"),
            "{\"env\":{\"TERM\":\"xterm-256color\"},\"height\":24,\"timestamp\":1800000000,\"title\":\"team/web by alice\",\"version\":2,\"width\":80}\n"
        );
        assert_eq!(output(1.2345678, "ls\r\n\u{1b}[0m"), "[1.234568,\"o\",\"ls\\r\\n\\u001b[0m\"]\n");
        assert_eq!(resize(3.0, 120, 40), "[3.0,\"r\",\"120x40\"]\n");
    }

    #[test]
    fn characters_cut_between_chunks_are_kept_whole() {
        let euro = "€".as_bytes(); // three bytes
        // (what, the chunks, the text of each)
        type Case<'a> = (&'a str, &'a [&'a [u8]], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            ("whole", &[b"abc"], &["abc"]),
            ("cut after one byte", &[&[b'a', euro[0]], &euro[1..]], &["a", "€"]),
            ("cut after two bytes", &[&euro[..2], &[euro[2], b'b']], &["", "€b"]),
            ("invalid", &[&[0xff, b'x']], &["\u{fffd}x"]),
        ];
        for (name, chunks, want) in cases {
            let mut carry = Utf8Carry::default();
            let got: Vec<String> = chunks.iter().map(|c| carry.text(c)).collect();
            assert_eq!(got, *want, "{name}");
        }
    }
}
