//! The detach keys (`--detach-keys ctrl-p,ctrl-q`, docker's default and format): parsing, and a
//! detector fed the keystrokes that passes on everything that is not the sequence. Keys that
//! begin the sequence are held until the next one shows whether it is; a sequence that breaks
//! off passes the held keys on, so Ctrl-P alone still reaches the shell (one key later).

/// The bytes of a key list such as `ctrl-p,ctrl-q` or `ctrl-a,d` (empty: no detach keys).
pub fn parse(text: &str) -> Result<Vec<u8>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',').map(|key| key_byte(key.trim())).collect()
}

fn key_byte(key: &str) -> Result<u8, String> {
    let bad = || format!("detach key {key:?} is not a single character or ctrl-<a-z, @, [, \\, ], ^, _>");
    match key.strip_prefix("ctrl-") {
        Some(rest) => match rest.as_bytes() {
            [c @ b'a'..=b'z'] => Ok(c - b'a' + 1),
            [c @ (b'@' | b'[' | b'\\' | b']' | b'^' | b'_')] => Ok(c - b'@'),
            _ => Err(bad()),
        },
        None => match key.as_bytes() {
            [c] if c.is_ascii() => Ok(*c),
            _ => Err(bad()),
        },
    }
}

/// Watches keystrokes for the detach sequence.
#[derive(Debug)]
pub struct Detector {
    keys: Vec<u8>,
    matched: usize,
}

impl Detector {
    pub fn new(keys: Vec<u8>) -> Self {
        Detector { keys, matched: 0 }
    }

    /// What of `input` goes to the session, and whether the sequence was completed (what
    /// follows it in `input` is dropped).
    pub fn feed(&mut self, input: &[u8]) -> (Vec<u8>, bool) {
        if self.keys.is_empty() {
            return (input.to_vec(), false);
        }
        let mut out = Vec::with_capacity(input.len());
        for &byte in input {
            if byte == self.keys[self.matched] {
                self.matched += 1;
                if self.matched == self.keys.len() {
                    self.matched = 0;
                    return (out, true);
                }
                continue;
            }
            out.extend_from_slice(&self.keys[..self.matched]);
            self.matched = 0;
            if byte == self.keys[0] {
                self.matched = 1;
                if self.keys.len() == 1 {
                    self.matched = 0;
                    return (out, true);
                }
            } else {
                out.push(byte);
            }
        }
        (out, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lists_parse_as_docker_writes_them() {
        let cases: &[(&str, Result<&[u8], &str>)] = &[
            ("ctrl-p,ctrl-q", Ok(&[0x10, 0x11])),
            ("ctrl-a,d", Ok(&[0x01, b'd'])),
            ("ctrl-@", Ok(&[0x00])),
            ("ctrl-[", Ok(&[0x1b])),
            (" ctrl-\\ ", Ok(&[0x1c])),
            ("", Ok(&[])),
            ("ctrl-", Err("ctrl-")),
            ("ctrl-P", Err("ctrl-P")),
            ("ab", Err("\"ab\"")),
            ("é", Err("é")),
        ];
        for (text, expected) in cases {
            match (parse(text), expected) {
                (Ok(bytes), Ok(expected)) => assert_eq!(&bytes, expected, "{text}"),
                (Err(error), Err(words)) => assert!(error.contains(words), "{text}: {error}"),
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
    }

    #[test]
    fn the_detector_passes_everything_but_the_sequence() {
        // (what, keys, chunks fed, what goes on, detached)
        type Case<'a> = (&'a str, &'a [u8], &'a [&'a [u8]], &'a [u8], bool);
        let cases: &[Case<'_>] = &[
            ("plain typing", b"\x10\x11", &[b"ls\r"], b"ls\r", false),
            ("the sequence", b"\x10\x11", &[b"ab\x10\x11cd"], b"ab", true),
            ("split over chunks", b"\x10\x11", &[b"x\x10", b"\x11"], b"x", true),
            ("broken off: the held key goes on", b"\x10\x11", &[b"\x10a"], b"\x10a", false),
            ("held at the end of a chunk", b"\x10\x11", &[b"a\x10"], b"a", false),
            ("a repeated first key", b"\x10\x11", &[b"\x10\x10\x11"], b"\x10", true),
            ("one key", b"\x1d", &[b"ab\x1dc"], b"ab", true),
            ("no keys", b"", &[b"\x10\x11"], b"\x10\x11", false),
        ];
        for (what, keys, chunks, forwarded, detached) in cases {
            let mut detector = Detector::new(keys.to_vec());
            let (mut out, mut done) = (Vec::new(), false);
            for chunk in *chunks {
                let (passed, now) = detector.feed(chunk);
                out.extend(passed);
                done |= now;
            }
            assert_eq!((out.as_slice(), done), (*forwarded, *detached), "{what}");
        }
    }
}
