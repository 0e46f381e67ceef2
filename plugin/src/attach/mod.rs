//! `connect` through the shell's session holder: the client logic, the same whichever way the
//! holder is reached. A [`Transport`] (the plugin's own exec of `myownshell-session attach
//! --framed`, `crate::direct`; the gateway's WebSocket and its page protocol v2,
//! `crate::gateway`) opens a [`Link`]; [`run`] relays keystrokes, window sizes and output over it,
//! watches for the detach keys, reattaches a dropped connection within the grace, and ends with
//! an [`Ending`] whose [`farewell`] is the line to say and the exit code.
//!
//! - `transport`: the seam (`Request`, `Joined`, `Up`, `Down`, `Link`, `Transport`);
//! - `framed`: the holder's frames over byte streams, and what its messages are to the client;
//! - `page`: the gateway's page protocol v2, pure;
//! - `step`: what the client does with each message, and says on joining, pure;
//! - `input`: the detach keys and the input waiting to be sent;
//! - `run` and `reconnect`: the relay, and a dropped connection taken up again;
//! - `ending` and `options`: how it ends and what is said, and what the person asked for;
//! - `terminal` and `local`: the person's end, and the real one (raw mode, SIGWINCH, stdin).
//!
//! Must not: decide what the holder decides (which session a plain connect gets, who may type),
//! or lose input (it waits while no link has room).

pub mod ending;
pub mod framed;
pub mod input;
pub mod local;
pub mod options;
pub mod page;
pub mod reconnect;
pub mod run;
pub mod step;
pub mod terminal;
pub mod transport;

pub use ending::{Ending, NO_HOLDER, farewell};
pub use options::Options;
pub use run::{open, run};
pub use terminal::Terminal;
pub use transport::{Down, Joined, Link, OpenError, Request, Transport, Up};
