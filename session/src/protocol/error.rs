//! Why bytes are not a message, or a message not bytes.

use std::fmt;

use super::frame::{FrameError, Kind};

/// A frame or message that cannot be read or written; each names what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// The framing itself: an unknown type, a payload over its bound.
    Frame(FrameError),
    /// A frame the other side sends (a holder's frame from a client, or the reverse).
    WrongDirection(Kind),
    /// A payload that is not the JSON its kind carries.
    Json { kind: Kind, error: String },
    /// A text payload that is not UTF-8.
    Text(Kind),
    /// A message that could not be encoded.
    Encode(String),
}

impl ProtocolError {
    pub(crate) fn json(kind: Kind, error: serde_json::Error) -> Self {
        ProtocolError::Json { kind, error: error.to_string() }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Frame(e) => e.fmt(f),
            ProtocolError::WrongDirection(kind) => {
                let sender = if kind.from_client() { "a client" } else { "the holder" };
                write!(f, "a {kind} frame, which only {sender} sends")
            }
            ProtocolError::Json { kind, error } => write!(f, "a {kind} frame whose JSON does not read: {error}"),
            ProtocolError::Text(kind) => write!(f, "a {kind} frame whose text is not UTF-8"),
            ProtocolError::Encode(error) => write!(f, "encoding a message: {error}"),
        }
    }
}

impl std::error::Error for ProtocolError {}

impl From<FrameError> for ProtocolError {
    fn from(e: FrameError) -> Self {
        ProtocolError::Frame(e)
    }
}

/// A value as JSON.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, ProtocolError> {
    serde_json::to_vec(value).map_err(|e| ProtocolError::Encode(e.to_string()))
}
