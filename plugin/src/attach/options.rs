//! What the person asked of `connect` that the session logic needs.

use std::time::Duration;

/// How the client behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The shell, for what is said (`kubectl myownshell extend NAME`).
    pub shell: String,
    /// The command that comes back to a session, but for `--session ID`:
    /// `kubectl myownshell connect NAME`, with the namespace when one was given.
    pub come_back: String,
    /// The detach keys' bytes (none through a pipe).
    pub detach_keys: Vec<u8>,
    /// How long a dropped connection is retried.
    pub grace: Duration,
    /// A person at a terminal: detach keys, the screen cleared for a replay, and the end of
    /// input is not the end of the session's input (through a pipe, it is: `Eof`).
    pub screen: bool,
}

impl Options {
    /// The command that comes back to session `id`.
    pub fn come_back_to(&self, id: &str) -> String {
        format!("{} --session {id}", self.come_back)
    }
}
