//! What a client sends the holder: a hello (or a `List` or `Kill` instead), then keystrokes and
//! requests.
//!
//! The holder's inputs deny unknown fields: a holder must not silently drop a request it does
//! not understand (a future field could narrow what a client may do), and a newer client talks
//! to an older holder by sending only what [`super::VERSION`] of the hello it gets back knows.

use serde::{Deserialize, Serialize};

use super::error::{ProtocolError, to_json};
use super::frame::{Frame, Kind, encode};

/// The holder's limit on a user name, in bytes.
pub const MAX_USER: usize = 256;

/// The holder's limit on a session's command, as JSON (`["sh","-c","…"]`).
pub const MAX_COMMAND_JSON: usize = 2 * 1024;

/// The range of a terminal's columns and rows.
pub const SIZE_RANGE: std::ops::RangeInclusive<u16> = 1..=1000;

/// A connection's first frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hello {
    /// The protocol version the client speaks ([`super::VERSION`]).
    pub version: u32,
    /// Who is at the terminal. The holder trusts it: whoever reaches the socket is the shell's
    /// user already (the gateway authenticated them, or `kubectl exec` did); the name decides
    /// who created a session and who may type in it, not who may reach it.
    pub user: String,
    /// Which session.
    #[serde(default)]
    pub session: Which,
    /// Watch only: no input, resize, end-of-file or end.
    #[serde(default)]
    pub read_only: bool,
    /// The client's terminal size, for a new session and for the one it drives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
}

/// Which session a hello asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Which {
    /// A new session running `command` (the holder's `--shell` when absent).
    New {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<Vec<String>>,
    },
    /// The session with this id.
    Attach { id: String },
    /// The newest session of this user that nobody is attached to, else a new one running
    /// `command`.
    #[serde(rename_all = "camelCase")]
    AttachOrNew {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<Vec<String>>,
    },
}

/// A terminal's size, each in [`SIZE_RANGE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Size {
    pub cols: u16,
    pub rows: u16,
}

/// The creator's word on whether others may type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowDrive {
    pub allow: bool,
}

/// Which session `Kill` ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillRequest {
    pub id: String,
}

/// A message from a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMessage {
    Hello(Hello),
    Input(Vec<u8>),
    Resize(Size),
    Detach,
    Eof,
    AllowDrive(AllowDrive),
    End,
    List,
    Kill(KillRequest),
}

impl Default for Which {
    fn default() -> Self {
        Which::AttachOrNew { command: None }
    }
}

impl Size {
    /// Whether both are in [`SIZE_RANGE`].
    pub fn is_valid(self) -> bool {
        SIZE_RANGE.contains(&self.cols) && SIZE_RANGE.contains(&self.rows)
    }
}

impl ClientMessage {
    /// The frame, ready to write.
    pub fn encode(&self) -> Result<Vec<u8>, ProtocolError> {
        let (kind, payload) = match self {
            ClientMessage::Hello(hello) => (Kind::Hello, to_json(hello)?),
            ClientMessage::Input(bytes) => return Ok(encode(Kind::Input, bytes)?),
            ClientMessage::Resize(size) => (Kind::Resize, to_json(size)?),
            ClientMessage::Detach => (Kind::Detach, Vec::new()),
            ClientMessage::Eof => (Kind::Eof, Vec::new()),
            ClientMessage::AllowDrive(allow) => (Kind::AllowDrive, to_json(allow)?),
            ClientMessage::End => (Kind::End, Vec::new()),
            ClientMessage::List => (Kind::List, Vec::new()),
            ClientMessage::Kill(kill) => (Kind::Kill, to_json(kill)?),
        };
        Ok(encode(kind, &payload)?)
    }

    /// The message a frame carries; a holder's frame is an error.
    pub fn decode(frame: Frame) -> Result<Self, ProtocolError> {
        let Frame { kind, payload } = frame;
        let json = |what| ProtocolError::json(kind, what);
        Ok(match kind {
            Kind::Hello => ClientMessage::Hello(serde_json::from_slice(&payload).map_err(json)?),
            Kind::Input => ClientMessage::Input(payload),
            Kind::Resize => ClientMessage::Resize(serde_json::from_slice(&payload).map_err(json)?),
            Kind::Detach => ClientMessage::Detach,
            Kind::Eof => ClientMessage::Eof,
            Kind::AllowDrive => ClientMessage::AllowDrive(serde_json::from_slice(&payload).map_err(json)?),
            Kind::End => ClientMessage::End,
            Kind::List => ClientMessage::List,
            Kind::Kill => ClientMessage::Kill(serde_json::from_slice(&payload).map_err(json)?),
            other => return Err(ProtocolError::WrongDirection(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::frame::Decoder;

    fn round_trip(message: ClientMessage) {
        let bytes = message.encode().unwrap();
        let mut decoder = Decoder::new();
        decoder.feed(&bytes);
        let frame = decoder.next_frame().unwrap().unwrap();
        assert_eq!(ClientMessage::decode(frame).unwrap(), message);
    }

    #[test]
    fn every_client_message_round_trips() {
        let hello = Hello {
            version: 1,
            user: "alice".into(),
            session: Which::New { command: Some(vec!["top".into()]) },
            read_only: true,
            size: Some(Size { cols: 80, rows: 24 }),
        };
        for message in [
            ClientMessage::Hello(hello),
            ClientMessage::Input(b"ls\r".to_vec()),
            ClientMessage::Resize(Size { cols: 100, rows: 30 }),
            ClientMessage::Detach,
            ClientMessage::Eof,
            ClientMessage::AllowDrive(AllowDrive { allow: true }),
            ClientMessage::End,
            ClientMessage::List,
            ClientMessage::Kill(KillRequest { id: "ab12cd34".into() }),
        ] {
            round_trip(message);
        }
    }

    #[test]
    fn hellos_read_as_written_and_unknown_fields_are_refused() {
        // (what, JSON, what it reads as, or the words of the error)
        let minimal = Hello { version: 1, user: "bob".into(), session: Which::default(), read_only: false, size: None };
        let cases: &[(&str, &str, Result<Hello, &str>)] = &[
            ("minimal: attach or new", r#"{"version":1,"user":"bob"}"#, Ok(minimal.clone())),
            (
                "attach by id",
                r#"{"version":1,"user":"bob","session":{"kind":"attach","id":"x1"}}"#,
                Ok(Hello { session: Which::Attach { id: "x1".into() }, ..minimal.clone() }),
            ),
            (
                "new with a size",
                r#"{"version":1,"user":"bob","session":{"kind":"new"},"size":{"cols":90,"rows":20}}"#,
                Ok(Hello { session: Which::New { command: None }, size: Some(Size { cols: 90, rows: 20 }), ..minimal }),
            ),
            ("unknown field", r#"{"version":1,"user":"bob","admin":true}"#, Err("unknown field `admin`")),
            ("unknown session kind", r#"{"version":1,"user":"bob","session":{"kind":"steal"}}"#, Err("steal")),
            (
                "unknown field in a session",
                r#"{"version":1,"user":"bob","session":{"kind":"attach","id":"x","force":1}}"#,
                Err("force"),
            ),
            ("no user", r#"{"version":1}"#, Err("missing field `user`")),
            ("not JSON", "hello", Err("expected value")),
            ("size out of u16", r#"{"version":1,"user":"b","size":{"cols":70000,"rows":1}}"#, Err("70000")),
        ];
        for (what, json, expected) in cases {
            let read: Result<Hello, String> = serde_json::from_str(json).map_err(|e| e.to_string());
            match (read, expected) {
                (Ok(read), Ok(expected)) => assert_eq!(&read, expected, "{what}"),
                (Err(error), Err(words)) => assert!(error.contains(words), "{what}: {error}"),
                (read, expected) => panic!("{what}: read {read:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn bad_json_and_holder_frames_are_named_errors() {
        let bad = Frame { kind: Kind::Resize, payload: b"{\"cols\":1}".to_vec() };
        let error = ClientMessage::decode(bad).unwrap_err().to_string();
        assert!(error.contains("Resize") && error.contains("rows"), "{error}");
        let wrong = Frame { kind: Kind::Output, payload: vec![] };
        assert_eq!(ClientMessage::decode(wrong), Err(ProtocolError::WrongDirection(Kind::Output)));
    }

    #[test]
    fn sizes_are_checked_against_their_range() {
        let cases = [((80, 24), true), ((1, 1), true), ((1000, 1000), true), ((0, 24), false), ((80, 1001), false)];
        for ((cols, rows), valid) in cases {
            assert_eq!(Size { cols, rows }.is_valid(), valid, "{cols}x{rows}");
        }
    }
}
