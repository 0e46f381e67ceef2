//! What the holder sends a client.
//!
//! Clients accept fields they do not know, and every field a later holder might leave out has a
//! default: an older gateway keeps working against a newer holder, whose binary comes from the
//! operator's image at the pod's start.

use serde::{Deserialize, Serialize};

use super::error::{ProtocolError, to_json};
use super::frame::{Frame, Kind, encode};

/// Someone attached to a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Attendee {
    pub user: String,
    pub read_only: bool,
    /// The client whose size the session has (the last one that typed or resized).
    pub driving: bool,
}

/// The session a client joined. The replay of its recent output follows as `Output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Attached {
    pub id: String,
    /// The protocol version of the holder.
    pub version: u32,
    /// Seconds since the Unix epoch.
    pub created: u64,
    /// Who created it.
    pub user: String,
    pub command: Vec<String>,
    /// Its main process (the session leader).
    pub pid: u32,
    pub cols: u16,
    pub rows: u16,
    pub read_only: bool,
    /// Whether it existed before this hello.
    pub resumed: bool,
    /// Whether others than its creator may type.
    pub allow_drive: bool,
    pub attached: Vec<Attendee>,
}

/// Who is attached, sent to everyone attached whenever it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Presence {
    pub attached: Vec<Attendee>,
    pub allow_drive: bool,
}

/// The session's command exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Exited {
    /// The exit code, 128 + the signal when a signal killed it (as a shell reports it).
    pub code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// Why the holder ended a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum EndReason {
    /// Nobody was attached for the holder's `--detached-ttl`.
    IdleTtl,
    /// `myownshell-session kill`, or a client's `End`.
    Killed,
    /// The shell's pod is stopping (SIGTERM), or its container's command exited.
    PodStopping,
    /// A reason this client does not know yet.
    #[default]
    #[serde(other)]
    Other,
}

/// The session was ended; `message` says why in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Ended {
    pub reason: EndReason,
    pub message: String,
}

/// One session, as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionInfo {
    pub id: String,
    /// Who created it.
    pub user: String,
    /// Seconds since the Unix epoch.
    pub created: u64,
    pub attached: Vec<Attendee>,
    /// When someone last typed, seconds since the Unix epoch.
    pub last_input: Option<u64>,
    /// When it last wrote output, seconds since the Unix epoch.
    pub last_output: Option<u64>,
    pub command: Vec<String>,
    pub pid: u32,
    pub allow_drive: bool,
}

/// A message from the holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HolderMessage {
    Attached(Attached),
    Output(Vec<u8>),
    Presence(Presence),
    Notice(String),
    Exited(Exited),
    Ended(Ended),
    Refused(String),
    Sessions(Vec<SessionInfo>),
}

impl HolderMessage {
    /// The frame, ready to write.
    pub fn encode(&self) -> Result<Vec<u8>, ProtocolError> {
        let (kind, payload) = match self {
            HolderMessage::Attached(attached) => (Kind::Attached, to_json(attached)?),
            HolderMessage::Output(bytes) => return Ok(encode(Kind::Output, bytes)?),
            HolderMessage::Presence(presence) => (Kind::Presence, to_json(presence)?),
            HolderMessage::Notice(text) => return Ok(encode(Kind::Notice, text.as_bytes())?),
            HolderMessage::Exited(exited) => (Kind::Exited, to_json(exited)?),
            HolderMessage::Ended(ended) => (Kind::Ended, to_json(ended)?),
            HolderMessage::Refused(text) => return Ok(encode(Kind::Refused, text.as_bytes())?),
            HolderMessage::Sessions(list) => (Kind::Sessions, to_json(list)?),
        };
        Ok(encode(kind, &payload)?)
    }

    /// The message a frame carries; a client's frame is an error.
    pub fn decode(frame: Frame) -> Result<Self, ProtocolError> {
        let Frame { kind, payload } = frame;
        let json = |what| ProtocolError::json(kind, what);
        let text = |payload: Vec<u8>| String::from_utf8(payload).map_err(|_| ProtocolError::Text(kind));
        Ok(match kind {
            Kind::Attached => HolderMessage::Attached(serde_json::from_slice(&payload).map_err(json)?),
            Kind::Output => HolderMessage::Output(payload),
            Kind::Presence => HolderMessage::Presence(serde_json::from_slice(&payload).map_err(json)?),
            Kind::Notice => HolderMessage::Notice(text(payload)?),
            Kind::Exited => HolderMessage::Exited(serde_json::from_slice(&payload).map_err(json)?),
            Kind::Ended => HolderMessage::Ended(serde_json::from_slice(&payload).map_err(json)?),
            Kind::Refused => HolderMessage::Refused(text(payload)?),
            Kind::Sessions => HolderMessage::Sessions(serde_json::from_slice(&payload).map_err(json)?),
            other => return Err(ProtocolError::WrongDirection(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::frame::Decoder;

    #[test]
    fn every_holder_message_round_trips() {
        let alice = Attendee { user: "alice".into(), read_only: false, driving: true };
        let attached = Attached {
            id: "ab12cd34".into(),
            command: vec!["sh".into()],
            attached: vec![alice.clone()],
            ..Default::default()
        };
        let info = SessionInfo { id: "ab12cd34".into(), last_input: Some(5), ..Default::default() };
        for message in [
            HolderMessage::Attached(attached),
            HolderMessage::Output(b"\x1b[1mhi\x1b[0m".to_vec()),
            HolderMessage::Presence(Presence { attached: vec![alice], allow_drive: true }),
            HolderMessage::Notice("read-only".into()),
            HolderMessage::Exited(Exited { code: 130, signal: Some(2) }),
            HolderMessage::Ended(Ended { reason: EndReason::IdleTtl, message: "idle".into() }),
            HolderMessage::Refused("no".into()),
            HolderMessage::Sessions(vec![info]),
        ] {
            let mut decoder = Decoder::new();
            decoder.feed(&message.encode().unwrap());
            assert_eq!(HolderMessage::decode(decoder.next_frame().unwrap().unwrap()).unwrap(), message);
        }
    }

    #[test]
    fn clients_read_what_a_newer_holder_sends() {
        // (what, kind, payload, expected)
        let cases: &[(&str, Kind, &str, HolderMessage)] = &[
            (
                "an unknown field",
                Kind::Exited,
                r#"{"code":3,"coreDumped":false}"#,
                HolderMessage::Exited(Exited { code: 3, signal: None }),
            ),
            (
                "an unknown reason",
                Kind::Ended,
                r#"{"reason":"evicted","message":"m"}"#,
                HolderMessage::Ended(Ended { reason: EndReason::Other, message: "m".into() }),
            ),
            ("fields left out", Kind::Presence, "{}", HolderMessage::Presence(Presence::default())),
        ];
        for (what, kind, payload, expected) in cases {
            let frame = Frame { kind: *kind, payload: payload.as_bytes().to_vec() };
            assert_eq!(&HolderMessage::decode(frame).unwrap(), expected, "{what}");
        }
    }

    #[test]
    fn bad_payloads_are_named_errors() {
        let cases = [
            (Frame { kind: Kind::Notice, payload: vec![0xff, 0xfe] }, "not UTF-8"),
            (Frame { kind: Kind::Attached, payload: b"[1]".to_vec() }, "Attached frame whose JSON"),
            (Frame { kind: Kind::Hello, payload: b"{}".to_vec() }, "only a client sends"),
        ];
        for (frame, words) in cases {
            let error = HolderMessage::decode(frame).unwrap_err().to_string();
            assert!(error.contains(words), "{error}");
        }
    }
}
