//! The holder's protocol, pure: bytes in, messages out, no I/O. The gateway and the plugin
//! speak it through `myownshell-session attach --framed` (an exec without a TTY whose stdin and
//! stdout carry these frames); the holder speaks it on its Unix socket.
//!
//! A frame is 1 byte of type, 4 bytes of big-endian length and the payload (`frame`); every type
//! has a bound on its payload, checked from the header before anything is allocated. Payloads
//! are bytes (`Input`, `Output`), UTF-8 text (`Notice`, `Refused`), JSON (the rest) or empty.
//!
//! A client's first frame is a `Hello` (or `List` or `Kill` instead). The holder answers a hello
//! with `Attached` and the session's recent output as `Output`, or with `Refused` and closes.
//! Then the client sends `Input`, `Resize`, `Eof`, `AllowDrive`, `End` or `Detach`; the holder
//! sends `Output`, `Presence` and `Notice` until `Exited` or `Ended`, and closes. A client whose
//! connection ends is detached; the session goes on.
//!
//! ```
//! use myownshell_session::protocol::{ClientMessage, Decoder, Hello, HolderMessage, VERSION, Which};
//!
//! let hello = Hello { version: VERSION, user: "alice".into(), session: Which::default(), read_only: false, size: None };
//! let bytes = ClientMessage::Hello(hello.clone()).encode()?;
//! let mut decoder = Decoder::new();
//! decoder.feed(&bytes);
//! while let Some(frame) = decoder.next_frame()? {
//!     assert_eq!(ClientMessage::decode(frame)?, ClientMessage::Hello(hello.clone()));
//! }
//! # let _: Option<HolderMessage> = None;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod client;
pub mod error;
pub mod frame;
pub mod holder;

pub use client::{AllowDrive, ClientMessage, Hello, KillRequest, MAX_COMMAND_JSON, MAX_USER, SIZE_RANGE, Size, Which};
pub use error::ProtocolError;
pub use frame::{Decoder, Frame, FrameError, Kind, MAX_ATTACHED, MAX_DATA, MAX_JSON, MAX_LISTING};
pub use holder::{Attached, Attendee, EndReason, Ended, Exited, HolderMessage, Presence, SessionInfo};

/// The protocol version this crate speaks. A holder refuses a hello of a later version, naming
/// both.
pub const VERSION: u32 = 1;
