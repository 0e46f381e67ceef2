//! A terminal held in its pod by `myownshell-session` (issue 39: the terminal belongs to the
//! shell, not to the gateway): what the gateway writes to the holder for the page's keys and
//! controls, and what the holder's frames mean for the page. Pure: bytes in, frames and events
//! out; the exec that carries them is `attach --framed` without a TTY, so output comes through
//! pipes in the holder's coalesced frames, not one line per PTY read.

use myownshell_session::protocol::{
    AllowDrive, Attached, ClientMessage, Decoder, EndReason, HolderMessage, MAX_DATA, Presence, Size,
};

/// What the holder told, for the terminal and its page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// The session the exec is attached to.
    Attached(Attached),
    /// Output (the first after `Attached` is the session's recent screen).
    Output(Vec<u8>),
    /// Who is attached now.
    Presence(Presence),
    /// A line from the holder.
    Notice(String),
    /// The session's program exited with this code (128 + the signal, for a signal).
    Exited(i32),
    /// The session ended: the reason as the page protocol names it, and why in words.
    Ended(&'static str, String),
    /// The holder refused the attach (an unknown id, the pod's cap): why.
    Refused(String),
}

/// The page protocol's name of a reason the holder ended a session.
pub fn reason(reason: EndReason) -> &'static str {
    match reason {
        EndReason::IdleTtl => "idleTtl",
        EndReason::Killed => "killed",
        EndReason::PodStopping => "podStopping",
        EndReason::Other => "ended",
    }
}

/// Reads the holder's frames out of the exec's stdout, whatever its chunks.
#[derive(Default)]
pub struct Reader {
    decoder: Decoder,
}

impl Reader {
    /// Everything `bytes` completes; an error ends the terminal (the holder's answer could not
    /// be read, which no holder of this protocol sends).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Told>, String> {
        self.decoder.feed(bytes);
        let mut told = Vec::new();
        while let Some(frame) = self.decoder.next_frame().map_err(|e| format!("the session holder's answer: {e}"))? {
            let message = HolderMessage::decode(frame).map_err(|e| format!("the session holder's answer: {e}"))?;
            told.push(match message {
                HolderMessage::Attached(a) => Told::Attached(a),
                HolderMessage::Output(bytes) => Told::Output(bytes),
                HolderMessage::Presence(p) => Told::Presence(p),
                HolderMessage::Notice(text) => Told::Notice(text),
                HolderMessage::Exited(e) => Told::Exited(e.signal.map_or(e.code, |s| 128 + s)),
                HolderMessage::Ended(e) => Told::Ended(reason(e.reason), e.message),
                HolderMessage::Refused(text) => Told::Refused(text),
                HolderMessage::Sessions(_) => continue,
            });
        }
        Ok(told)
    }
}

fn frame(message: &ClientMessage) -> Vec<u8> {
    // Every message below is within its bounds by construction (input is split, sizes are
    // checked by the page's control reader): an encoding error is none of the page's doing,
    // and an empty frame, which the holder would refuse by name, says so.
    message.encode().unwrap_or_default()
}

/// The frames that type `bytes` (split at the holder's bound for data).
pub fn input(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.chunks(MAX_DATA).map(|chunk| frame(&ClientMessage::Input(chunk.to_vec()))).collect()
}

/// The frame that sets the terminal's size.
pub fn resize(cols: u16, rows: u16) -> Vec<u8> {
    frame(&ClientMessage::Resize(Size { cols, rows }))
}

/// The frame that ends the program's input (the PTY's end of file).
pub fn eof() -> Vec<u8> {
    frame(&ClientMessage::Eof)
}

/// The frame that leaves the session running, and this attach.
pub fn detach() -> Vec<u8> {
    frame(&ClientMessage::Detach)
}

/// The frame that ends the session, its processes with it.
pub fn end() -> Vec<u8> {
    frame(&ClientMessage::End)
}

/// The frame that lets others type in the session (its creator's to send).
pub fn allow_drive(allow: bool) -> Vec<u8> {
    frame(&ClientMessage::AllowDrive(AllowDrive { allow }))
}

/// Whether a session created by `creator` is one `user` may attach to through the gateway: their
/// own, or the shell's owner's (when it is shared with them; the gate decided that at the exec).
pub fn may_attach(creator: &str, user: &str, owner: Option<&str>) -> bool {
    creator == user || owner == Some(creator)
}

#[cfg(test)]
mod tests {
    use myownshell_session::protocol::{Ended, Exited};

    use super::*;

    fn attached() -> Attached {
        Attached {
            id: "0a1b2c3d".into(),
            version: 1,
            created: 1,
            user: "alice".into(),
            command: vec!["/bin/sh".into()],
            pid: 7,
            cols: 80,
            rows: 24,
            read_only: false,
            resumed: true,
            allow_drive: false,
            attached: Vec::new(),
        }
    }

    #[test]
    fn the_holders_frames_read_whatever_their_chunks() {
        let mut bytes = Vec::new();
        for message in [
            HolderMessage::Attached(attached()),
            HolderMessage::Output(b"$ ".to_vec()),
            HolderMessage::Notice("hello".into()),
            HolderMessage::Exited(Exited { code: 0, signal: Some(9) }),
            HolderMessage::Ended(Ended { reason: EndReason::IdleTtl, message: "idle".into() }),
            HolderMessage::Refused("no".into()),
        ] {
            bytes.extend(message.encode().expect("encodes"));
        }
        let want = vec![
            Told::Attached(attached()),
            Told::Output(b"$ ".to_vec()),
            Told::Notice("hello".into()),
            Told::Exited(137),
            Told::Ended("idleTtl", "idle".into()),
            Told::Refused("no".into()),
        ];
        for split in [1, 3, 7, bytes.len()] {
            let mut reader = Reader::default();
            let mut got = Vec::new();
            for chunk in bytes.chunks(split) {
                got.extend(reader.feed(chunk).expect("reads"));
            }
            assert_eq!(got, want, "in chunks of {split}");
        }
        let mut reader = Reader::default();
        assert!(reader.feed(&[0x42, 0, 0, 0, 0]).is_err(), "an unknown frame ends the terminal");
    }

    #[test]
    fn input_is_split_at_the_holders_bound() {
        let frames = input(&vec![b'x'; MAX_DATA * 2 + 1]);
        assert_eq!(frames.len(), 3);
        assert!(frames.iter().all(|f| !f.is_empty() && f.len() <= MAX_DATA + 5));
    }

    #[test]
    fn who_may_attach_to_whose_session() {
        let cases = [
            ("one's own", "bob", "bob", Some("alice"), true),
            ("the owner's, shared", "alice", "bob", Some("alice"), true),
            ("another sharee's", "carol", "bob", Some("alice"), false),
            ("a shell with no owner: one's own only", "carol", "bob", None, false),
        ];
        for (what, creator, user, owner, want) in cases {
            assert_eq!(may_attach(creator, user, owner), want, "{what}");
        }
    }
}
