//! The keyboard's side: keystrokes watched for the detach keys (at a terminal), and what waits
//! to be sent, in order, while the link has no room or there is no link (a reattach). Input is
//! never dropped: past [`HOLD`] bytes waiting, no more is read until some is sent.

use std::collections::VecDeque;

use myownshell_session::keys::Detector;

use super::transport::Up;

/// The most input bytes waiting before no more is read.
pub const HOLD: usize = 64 * 1024;

/// Keystrokes on their way.
#[derive(Debug)]
pub struct Keys {
    detector: Detector,
    screen: bool,
    waiting: VecDeque<Up>,
    bytes: usize,
    /// Whether input may still come (it has not ended).
    pub open: bool,
}

impl Keys {
    /// Watching for `detach_keys` at a terminal (`screen`); through a pipe, every byte is input.
    pub fn new(detach_keys: Vec<u8>, screen: bool) -> Self {
        let keys = if screen { detach_keys } else { Vec::new() };
        Keys { detector: Detector::new(keys), screen, waiting: VecDeque::new(), bytes: 0, open: true }
    }

    /// A chunk of input (`None`: its end) is queued, the detach keys and what follows them
    /// taken out; whether the detach keys came. Through a pipe, the end of input is queued as
    /// the session's end-of-file.
    pub fn take(&mut self, chunk: Option<Vec<u8>>) -> bool {
        let Some(chunk) = chunk else {
            self.open = false;
            if !self.screen {
                self.push(Up::Eof);
            }
            return false;
        };
        let (passed, detach) = self.detector.feed(&chunk);
        if !passed.is_empty() {
            self.push(Up::Input(passed));
        }
        detach
    }

    /// Queue `up`; a new size replaces one not sent yet.
    pub fn push(&mut self, up: Up) {
        if matches!(up, Up::Resize(_)) {
            self.waiting.retain(|u| !matches!(u, Up::Resize(_)));
        }
        if let Up::Input(bytes) = &up {
            self.bytes += bytes.len();
        }
        self.waiting.push_back(up);
    }

    /// Put back what could not be sent, to go first.
    pub fn push_front(&mut self, up: Up) {
        if let Up::Input(bytes) = &up {
            self.bytes += bytes.len();
        }
        self.waiting.push_front(up);
    }

    /// The next to send.
    pub fn pop(&mut self) -> Option<Up> {
        let up = self.waiting.pop_front()?;
        if let Up::Input(bytes) = &up {
            self.bytes -= bytes.len();
        }
        Some(up)
    }

    /// Whether anything waits to be sent.
    pub fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Whether more input may be read now.
    pub fn may_read(&self) -> bool {
        self.open && self.bytes < HOLD
    }
}

#[cfg(test)]
mod tests {
    use myownshell_session::protocol::Size;

    use super::*;

    fn drain(keys: &mut Keys) -> Vec<Up> {
        std::iter::from_fn(|| keys.pop()).collect()
    }

    /// The detach keys found across reads, held keys passed on when the sequence breaks off.
    #[test]
    fn the_detach_keys_across_split_reads() {
        // (what, chunks, what is sent, detached)
        type Case<'a> = (&'a str, &'a [&'a [u8]], &'a [&'a [u8]], bool);
        let cases: &[Case<'_>] = &[
            ("typing", &[b"ls\r"], &[b"ls\r"], false),
            ("in one read", &[b"ab\x10\x11cd"], &[b"ab"], true),
            ("split between the keys", &[b"ab\x10", b"\x11"], &[b"ab"], true),
            ("each key a read", &[b"\x10", b"\x11"], &[], true),
            ("broken off: ctrl-p goes on", &[b"\x10", b"x"], &[b"\x10x"], false),
            ("ctrl-p ctrl-p ctrl-q", &[b"\x10", b"\x10", b"\x11"], &[b"\x10"], true),
            ("ctrl-q alone", &[b"\x11"], &[b"\x11"], false),
        ];
        for (what, chunks, sent, detached) in cases {
            let mut keys = Keys::new(vec![0x10, 0x11], true);
            let mut detach = false;
            for chunk in *chunks {
                detach |= keys.take(Some(chunk.to_vec()));
            }
            let got: Vec<Up> = drain(&mut keys);
            let wanted: Vec<Up> = sent.iter().map(|b| Up::Input(b.to_vec())).collect();
            assert_eq!((got, detach), (wanted, *detached), "{what}");
        }
    }

    #[test]
    fn through_a_pipe_every_byte_is_input_and_its_end_is_eof() {
        let mut keys = Keys::new(vec![0x10, 0x11], false);
        assert!(!keys.take(Some(b"\x10\x11".to_vec())));
        assert!(!keys.take(None));
        assert_eq!(drain(&mut keys), [Up::Input(b"\x10\x11".to_vec()), Up::Eof]);
        assert!(!keys.may_read());
        let mut screen = Keys::new(vec![0x10, 0x11], true);
        screen.take(None);
        assert_eq!(drain(&mut screen), [], "at a terminal, the end of input is not the session's");
    }

    #[test]
    fn input_waits_in_order_within_its_bound_and_sizes_coalesce() {
        let mut keys = Keys::new(Vec::new(), true);
        let size = |cols| Up::Resize(Size { cols, rows: 24 });
        keys.push(size(80));
        keys.take(Some(vec![b'a'; HOLD - 1]));
        assert!(keys.may_read());
        keys.push(size(100));
        keys.take(Some(b"b".to_vec()));
        assert!(!keys.may_read(), "full: no more is read");
        assert_eq!(keys.pop(), Some(Up::Input(vec![b'a'; HOLD - 1])));
        assert!(keys.may_read());
        assert_eq!(drain(&mut keys), [size(100), Up::Input(b"b".to_vec())]);
        assert!(!keys.waiting());
    }
}
