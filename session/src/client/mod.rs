//! The holder's clients, run through `kubectl exec` in the shell's container: `attach` with a
//! person at a TTY (`interactive`: raw mode, window size, the library's detach keys, the terminal
//! itself in `terminal`) or a pipe, or for a program (`framed`: the protocol relayed on stdin and
//! stdout); `list` and `kill` (`admin`). All reach the socket through `connect`.
//!
//! Exit codes: the session's command's code once it exits; 0 after a detach; 1 when the holder
//! refuses, ends the session, or cannot be reached.
//!
//! Must not: decide anything the holder decides (who may type, which session a hello gets).

pub mod admin;
pub mod connect;
pub mod framed;
pub mod interactive;
pub mod pipes;
pub mod stdin;
pub mod terminal;
