//! A session's recent output, for whoever attaches next: a ring of at most `--scrollback` bytes
//! (64 KiB by default), replayed from a clean point.
//!
//! Why 64 KiB (Coder's reconnecting-PTY figure): a few full redraws of a large terminal (a
//! 250×80 screen with colour codes is 20–40 KiB), or some hundreds of lines of plain output;
//! enough to see where one was, small enough that 16 sessions cost the holder 1 MiB and a replay
//! crosses a slow link in a second. A full-screen program is asked to redraw on attach anyway
//! (SIGWINCH), so its screen does not depend on the replay.

use std::collections::VecDeque;

/// The last bytes of output.
#[derive(Debug)]
pub struct Scrollback {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// Whether older output was dropped: the kept part may then start anywhere.
    cut: bool,
}

impl Scrollback {
    /// Keeps at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self { bytes: VecDeque::with_capacity(capacity.min(64 * 1024)), capacity, cut: false }
    }

    /// Add output, dropping the oldest beyond the capacity.
    pub fn push(&mut self, output: &[u8]) {
        let output = match output.len().checked_sub(self.capacity) {
            Some(skip) if skip > 0 || !self.bytes.is_empty() => {
                self.bytes.clear();
                self.cut = true;
                &output[skip..]
            }
            _ => output,
        };
        let over = (self.bytes.len() + output.len()).saturating_sub(self.capacity);
        if over > 0 {
            self.bytes.drain(..over);
            self.cut = true;
        }
        self.bytes.extend(output);
    }

    /// What a client attaching now is sent: the kept bytes from a clean point, without the
    /// terminal queries in them (`myownshell_session::queries`: answered again, they would be typed into the
    /// shell).
    pub fn replay(&mut self) -> Vec<u8> {
        let bytes = self.bytes.make_contiguous();
        let start = clean_start(bytes, self.cut);
        myownshell_session::queries::without_queries(&bytes[start..])
    }

    /// Bytes kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Where a replay of `bytes` may start. Uncut output starts where the session did. Cut output
/// could start inside a line, an escape sequence or a UTF-8 character: it starts after the first
/// line break if there is one (a line start: no escape sequence or character spans one); else at
/// the first ESC (which always begins a sequence); else at the first byte that begins a UTF-8
/// character.
pub fn clean_start(bytes: &[u8], cut: bool) -> usize {
    if !cut {
        return 0;
    }
    if let Some(newline) = bytes.iter().position(|&b| b == b'\n') {
        return newline + 1;
    }
    if let Some(escape) = bytes.iter().position(|&b| b == 0x1b) {
        return escape;
    }
    bytes.iter().position(|&b| !(0x80..=0xbf).contains(&b)).unwrap_or(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_points_avoid_cut_lines_sequences_and_characters() {
        // (what, bytes, cut, start)
        let cases: &[(&str, &[u8], bool, usize)] = &[
            ("uncut starts at the start", b"ab\ncd", false, 0),
            ("uncut keeps even a partial first byte", b"\x80ab", false, 0),
            ("cut: after the first line break", b"tail of a line\nnext\n", true, 15),
            ("cut: a break at the very end leaves nothing", b"partial\n", true, 8),
            ("cut inside an escape sequence: at the next ESC", b"31mred\x1b[0m plain", true, 6),
            (
                "cut inside a character: at the next one",
                "\u{e9}t\u{e9}".as_bytes().get(1..).unwrap_or_default(),
                true,
                1,
            ),
            ("cut inside a 4-byte character", &[0x9f, 0x98, 0x80, b'a'], true, 3),
            ("cut, nothing clean at all", &[0x80, 0x81], true, 2),
            ("cut, empty", b"", true, 0),
        ];
        for (what, bytes, cut, start) in cases {
            assert_eq!(clean_start(bytes, *cut), *start, "{what}");
        }
    }

    #[test]
    fn the_ring_keeps_the_last_bytes_within_its_capacity() {
        // (what, capacity, pushes, replay)
        type Case<'a> = (&'a str, usize, &'a [&'a [u8]], &'a [u8]);
        let cases: &[Case<'_>] = &[
            ("nothing", 8, &[], b""),
            ("fits, uncut", 16, &[b"ab\n", b"cd"], b"ab\ncd"),
            ("exactly full, uncut", 6, &[b"ab\ncd\n"], b"ab\ncd\n"),
            ("cut at the next line", 8, &[b"first\nsecond\n"], b"second\n"),
            ("cut over pushes", 7, &[b"xx\n", b"yy\n", b"zz\n"], b"yy\nzz\n"),
            ("one long push without a break", 4, &[b"abcdefgh"], b"efgh"),
            ("one push over a full ring", 4, &[b"ab", b"cdefgh"], b"efgh"),
        ];
        for (what, capacity, pushes, replay) in cases {
            let mut ring = Scrollback::new(*capacity);
            for push in *pushes {
                ring.push(push);
                assert!(ring.len() <= *capacity, "{what}: {} bytes kept", ring.len());
            }
            assert_eq!(String::from_utf8_lossy(&ring.replay()), String::from_utf8_lossy(replay), "{what}");
        }
    }

    #[test]
    fn a_megabyte_through_a_small_ring_keeps_exactly_its_capacity() {
        let mut ring = Scrollback::new(64 * 1024);
        for i in 0..20_000 {
            ring.push(format!("line {i:06} of output\n").as_bytes());
        }
        assert_eq!(ring.len(), 64 * 1024);
        let replay = ring.replay();
        assert!(replay.starts_with(b"line ") && replay.ends_with(b"line 019999 of output\n"));
        assert!(replay.len() > 64 * 1024 - 22);
    }
}
