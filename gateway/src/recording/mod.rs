//! Session recording (off unless a shell asks for it, `spec.recordSessions`, or the gateway
//! records every session, `--record-all-sessions`): what a gateway terminal shows and its window
//! size, never what is typed, as asciicast v2 (`asciicast`), written by one task per terminal
//! within a size limit and the quotas of a shell and of all recordings (`quota`), kept under
//! `--recordings-dir` for `--recording-retention` (`store`), and read back only by those RBAC lets `get` `myownshells/recordings` in the shell's
//! namespace (`access`, a SubjectAccessReview as the caller).
//!
//! Must not: record input, hand a recording to anyone the cluster did not authorize, or let a
//! request name a path outside the folder.

pub mod access;
pub mod asciicast;
pub mod quota;
pub mod store;
pub mod writer;
