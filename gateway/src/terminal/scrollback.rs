//! The recent screen of a terminal, kept while nobody watches so that a reconnecting page can
//! draw it again: the last `capacity` bytes of output.
//!
//! When old bytes are dropped, the kept part starts after the next line break, so a replay never
//! begins inside an escape sequence or a UTF-8 character cut in half (the first line shown may be
//! a later one than strictly fits).

use std::collections::VecDeque;

/// The last bytes of a terminal's output.
#[derive(Debug)]
pub struct Scrollback {
    bytes: VecDeque<u8>,
    capacity: usize,
}

impl Scrollback {
    /// Keeps at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self { bytes: VecDeque::new(), capacity }
    }

    /// Add output.
    pub fn push(&mut self, output: &[u8]) {
        let cut = if output.len() >= self.capacity {
            let cut = !self.bytes.is_empty() || output.len() > self.capacity;
            self.bytes.clear();
            self.bytes.extend(&output[output.len() - self.capacity..]);
            cut
        } else {
            let over = (self.bytes.len() + output.len()).saturating_sub(self.capacity);
            self.bytes.drain(..over);
            self.bytes.extend(output);
            over > 0
        };
        if cut {
            self.trim_to_line();
        }
    }

    /// Drop the partial first line of a buffer that has been cut.
    fn trim_to_line(&mut self) {
        if let Some(newline) = self.bytes.iter().position(|&b| b == b'\n') {
            self.bytes.drain(..=newline);
        }
    }

    /// What to draw on reattach.
    pub fn contents(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }

    /// Bytes kept.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_from_a_line_start() {
        // (what, capacity, pushes, kept)
        type Case<'a> = (&'a str, usize, &'a [&'a [u8]], &'a [u8]);
        let cases: &[Case<'_>] = &[
            ("nothing", 8, &[], b""),
            ("fits", 16, &[b"ab\n", b"cd"], b"ab\ncd"),
            ("cut at the next line", 8, &[b"first\nsecond\n"], b"second\n"),
            ("cut keeps whole lines", 10, &[b"aaaa\nbb\ncc\n"], b"bb\ncc\n"),
            ("cut over pushes", 6, &[b"xx\n", b"yy\n", b"zz\n"], b"zz\n"),
            ("one long push without a line break", 4, &[b"abcdefgh"], b"efgh"),
            ("exactly full, uncut", 6, &[b"ab\ncd\n"], b"ab\ncd\n"),
        ];
        for (name, capacity, pushes, want) in cases {
            let mut s = Scrollback::new(*capacity);
            for p in *pushes {
                s.push(p);
            }
            assert_eq!(s.contents(), want.to_vec(), "{name}");
            assert!(s.len() <= *capacity, "{name}");
        }
    }
}
