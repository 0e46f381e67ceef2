//! Frames on the wire: 1 byte of type, 4 bytes of big-endian payload length, the payload.
//!
//! Every type has its own bound on the payload ([`Kind::max_payload`]); a header announcing
//! more is an error naming the limit, found from the five header bytes alone, so a peer can
//! never make the other side allocate what it announced. The [`Decoder`] is fed whatever
//! chunks the transport yields (a socket read, an exec channel message) and hands back whole
//! frames.

use std::fmt;

/// Bytes before a payload: the type and the length.
pub const HEADER: usize = 5;

/// Terminal bytes in one frame (`Input`, `Output`). Far above what one frame carries in
/// practice (the holder gathers output into frames of at most 32 KiB), small enough that a
/// decoder's buffer stays under 128 KiB.
pub const MAX_DATA: usize = 64 * 1024;

/// JSON a client sends (`Hello`, `Resize`, `AllowDrive`, `Kill`) and short texts (`Notice`,
/// `Refused`, `Ended`, `Exited`): a hello with a user of 256 bytes and a command of 2 KiB fits.
pub const MAX_JSON: usize = 4 * 1024;

/// `Attached` and `Presence`: the session's command (2 KiB at most) and up to 8 attached users
/// of 256 bytes each, JSON-escaped, with room to spare.
pub const MAX_ATTACHED: usize = 16 * 1024;

/// `Sessions`, the answer to `List`: 64 sessions (the most the operator gives a pod,
/// `--max-sessions-per-pod`) of at most 8 KiB each. A holder given more (`serve --max-sessions`
/// takes up to 1024) lists them while they fit: a session without a long command takes a few
/// hundred bytes.
pub const MAX_LISTING: usize = 512 * 1024;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    // Client to holder.
    /// JSON [`super::Hello`]: who, which session, read-only, size. A connection's first frame.
    Hello,
    /// Keystrokes.
    Input,
    /// JSON [`super::Size`].
    Resize,
    /// Leave the session running.
    Detach,
    /// The client's input ended: the holder writes the PTY's end-of-file character.
    Eof,
    /// JSON [`super::AllowDrive`]: the creator lets others type, or stops them.
    AllowDrive,
    /// End the session.
    End,
    /// Instead of a hello: list the sessions (answered by `Sessions`, then closed).
    List,
    /// Instead of a hello: JSON [`super::KillRequest`] (answered by `Notice` or `Refused`).
    Kill,
    // Holder to client.
    /// JSON [`super::Attached`]: the session joined; the replay follows as `Output`.
    Attached,
    /// Terminal output.
    Output,
    /// JSON [`super::Presence`]: who is attached, whenever it changes.
    Presence,
    /// Text for the person at the terminal.
    Notice,
    /// JSON [`super::Exited`]: the session's command exited; the holder closes.
    Exited,
    /// JSON [`super::Ended`]: the session was ended (idle, killed, pod stopping); the holder closes.
    Ended,
    /// Text: why the hello was refused; the holder closes.
    Refused,
    /// JSON list of [`super::SessionInfo`].
    Sessions,
}

/// Every kind, in type-byte order.
pub const KINDS: [Kind; 17] = [
    Kind::Hello,
    Kind::Input,
    Kind::Resize,
    Kind::Detach,
    Kind::Eof,
    Kind::AllowDrive,
    Kind::End,
    Kind::List,
    Kind::Kill,
    Kind::Attached,
    Kind::Output,
    Kind::Presence,
    Kind::Notice,
    Kind::Exited,
    Kind::Ended,
    Kind::Refused,
    Kind::Sessions,
];

impl Kind {
    /// The type byte: `0x01..` from a client, `0x81..` from the holder.
    pub const fn byte(self) -> u8 {
        match self {
            Kind::Hello => 0x01,
            Kind::Input => 0x02,
            Kind::Resize => 0x03,
            Kind::Detach => 0x04,
            Kind::Eof => 0x05,
            Kind::AllowDrive => 0x06,
            Kind::End => 0x07,
            Kind::List => 0x08,
            Kind::Kill => 0x09,
            Kind::Attached => 0x81,
            Kind::Output => 0x82,
            Kind::Presence => 0x83,
            Kind::Notice => 0x84,
            Kind::Exited => 0x85,
            Kind::Ended => 0x86,
            Kind::Refused => 0x87,
            Kind::Sessions => 0x88,
        }
    }

    /// The kind of a type byte, if it is one.
    pub fn from_byte(byte: u8) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.byte() == byte)
    }

    /// Whether clients send it (else the holder does).
    pub const fn from_client(self) -> bool {
        self.byte() < 0x80
    }

    /// The largest payload it may carry.
    pub const fn max_payload(self) -> usize {
        match self {
            Kind::Input | Kind::Output => MAX_DATA,
            Kind::Detach | Kind::Eof | Kind::End | Kind::List => 0,
            Kind::Attached | Kind::Presence => MAX_ATTACHED,
            Kind::Sessions => MAX_LISTING,
            Kind::Hello
            | Kind::Resize
            | Kind::AllowDrive
            | Kind::Kill
            | Kind::Notice
            | Kind::Exited
            | Kind::Ended
            | Kind::Refused => MAX_JSON,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub payload: Vec<u8>,
}

/// A frame that cannot be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The type byte is none of [`KINDS`].
    UnknownType(u8),
    /// The payload (announced or given) is above the kind's bound.
    TooLarge { kind: Kind, len: usize, max: usize },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UnknownType(byte) => write!(f, "unknown frame type 0x{byte:02x}"),
            FrameError::TooLarge { kind, len, max } => {
                write!(f, "a {kind} frame of {len} bytes is over its limit of {max} bytes")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Append one frame to `out`, or say why it cannot be sent.
pub fn encode_into(kind: Kind, payload: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
    let max = kind.max_payload();
    let len = u32::try_from(payload.len()).ok().filter(|&len| len as usize <= max);
    let Some(len) = len else {
        return Err(FrameError::TooLarge { kind, len: payload.len(), max });
    };
    out.reserve(HEADER + payload.len());
    out.push(kind.byte());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// One frame as bytes.
pub fn encode(kind: Kind, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    encode_into(kind, payload, &mut out)?;
    Ok(out)
}

/// Frames from a stream of chunks. Holds at most one frame's header and payload plus the chunk
/// last fed: call [`Decoder::next_frame`] until it yields `None` after each [`Decoder::feed`].
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Where unread bytes start in `buf` (consumed bytes are dropped on the next feed).
    start: usize,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add bytes as they came.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, `None` until one is complete, or the error that makes the stream
    /// unreadable (the decoder should then be dropped with its connection).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        let unread = &self.buf[self.start..];
        let Some(header) = unread.get(..HEADER) else { return Ok(None) };
        let kind = Kind::from_byte(header[0]).ok_or(FrameError::UnknownType(header[0]))?;
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if len > kind.max_payload() {
            return Err(FrameError::TooLarge { kind, len, max: kind.max_payload() });
        }
        let Some(payload) = unread.get(HEADER..HEADER + len) else { return Ok(None) };
        let frame = Frame { kind, payload: payload.to_vec() };
        self.start += HEADER + len;
        Ok(Some(frame))
    }

    /// Bytes held that are not yet a whole frame.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Result<Vec<Frame>, FrameError> {
        let mut decoder = Decoder::new();
        let mut frames = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk);
            while let Some(frame) = decoder.next_frame()? {
                frames.push(frame);
            }
        }
        Ok(frames)
    }

    #[test]
    fn type_bytes_round_trip_and_are_unique() {
        for kind in KINDS {
            assert_eq!(Kind::from_byte(kind.byte()), Some(kind));
        }
        let mut bytes: Vec<u8> = KINDS.iter().map(|k| k.byte()).collect();
        bytes.dedup();
        assert_eq!(bytes.len(), KINDS.len());
        assert!(Kind::Hello.from_client() && !Kind::Output.from_client());
    }

    #[test]
    fn frames_split_anywhere_decode_the_same() {
        let mut stream = encode(Kind::Input, b"hello").unwrap();
        stream.extend(encode(Kind::Detach, b"").unwrap());
        stream.extend(encode(Kind::Output, &[7u8; 1000]).unwrap());
        let whole = decode_all(&[&stream]).unwrap();
        assert_eq!(whole.len(), 3);
        for at in 0..stream.len() {
            let (a, b) = stream.split_at(at);
            assert_eq!(decode_all(&[a, b]).unwrap(), whole, "split at {at}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode_all(&bytes).unwrap(), whole, "byte by byte");
    }

    #[test]
    fn bad_headers_are_errors_before_any_payload() {
        // (what, bytes, error)
        let cases: &[(&str, &[u8], FrameError)] = &[
            ("unknown type", &[0x42, 0, 0, 0, 0], FrameError::UnknownType(0x42)),
            ("type zero", &[0x00, 0, 0, 0, 1, 1], FrameError::UnknownType(0)),
            (
                "output over 64 KiB, announced only",
                &[0x82, 0, 1, 0, 1],
                FrameError::TooLarge { kind: Kind::Output, len: 65537, max: MAX_DATA },
            ),
            (
                "hello over 4 KiB",
                &[0x01, 0, 0, 0x10, 0x01],
                FrameError::TooLarge { kind: Kind::Hello, len: 4097, max: MAX_JSON },
            ),
            ("detach with a payload", &[0x04, 0, 0, 0, 1], FrameError::TooLarge { kind: Kind::Detach, len: 1, max: 0 }),
            (
                "4 GiB announced",
                &[0x88, 0xff, 0xff, 0xff, 0xff],
                FrameError::TooLarge { kind: Kind::Sessions, len: u32::MAX as usize, max: MAX_LISTING },
            ),
        ];
        for (what, bytes, error) in cases {
            assert_eq!(decode_all(&[bytes]).as_ref(), Err(error), "{what}");
        }
        let message = FrameError::TooLarge { kind: Kind::Output, len: 65537, max: MAX_DATA }.to_string();
        assert!(message.contains("65536"), "{message}");
    }

    #[test]
    fn bounds_hold_on_the_way_out_and_exactly_at_the_limit() {
        assert!(encode(Kind::Input, &vec![0; MAX_DATA]).is_ok());
        assert_eq!(
            encode(Kind::Input, &vec![0; MAX_DATA + 1]),
            Err(FrameError::TooLarge { kind: Kind::Input, len: MAX_DATA + 1, max: MAX_DATA })
        );
        let at_limit = encode(Kind::Output, &vec![1; MAX_DATA]).unwrap();
        assert_eq!(decode_all(&[&at_limit]).unwrap()[0].payload.len(), MAX_DATA);
    }

    #[test]
    fn a_partial_frame_waits_and_holds_only_what_came() {
        let mut decoder = Decoder::new();
        decoder.feed(&[0x82, 0, 0, 0x10, 0]);
        assert_eq!(decoder.next_frame(), Ok(None));
        decoder.feed(&[1; 100]);
        assert_eq!(decoder.next_frame(), Ok(None));
        assert_eq!(decoder.buffered(), 105);
    }
}
