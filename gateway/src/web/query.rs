//! The query a page opens a terminal socket with, and what of it is checked before anything
//! is opened. Its own module because both the socket ([`super::socket`]) and the opening of a
//! terminal ([`super::opening`]) read it.

use serde::Deserialize;

use super::control;

/// The query of the terminal socket.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TerminalQuery {
    /// A plain terminal of this replica to reattach.
    #[serde(default)]
    pub terminal: Option<String>,
    /// A held session to reattach.
    #[serde(default)]
    pub session: Option<String>,
    /// A new held session, whatever is detached.
    #[serde(default)]
    pub new: Option<String>,
    /// Watch without typing.
    #[serde(default)]
    pub read_only: Option<String>,
    /// The page's terminal's size.
    #[serde(default)]
    pub cols: Option<u16>,
    /// The page's terminal's size.
    #[serde(default)]
    pub rows: Option<u16>,
}

/// The terminal size a page may ask for when it opens one.
pub fn size_ok(cols: u16, rows: u16) -> bool {
    (1..=control::MAX_SIZE).contains(&cols) && (1..=control::MAX_SIZE).contains(&rows)
}
