//! The one seam between the session logic and how it reaches the holder: a [`Transport`] opens
//! a [`Link`] to a session (the plugin's own exec of `myownshell-session attach --framed`, the
//! gateway's WebSocket, or in tests a local `attach --framed`), and a link carries [`Up`] and
//! [`Down`], the few things the client says and hears, whatever the wire.

use myownshell_session::protocol::{Attendee, Size, Which};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Which session to join, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub which: Which,
    /// Watch without typing.
    pub read_only: bool,
    /// The local terminal's size, for a new session and for the one this client drives.
    pub size: Option<Size>,
}

/// The session joined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Joined {
    /// Its id; empty only through a gateway that names none (one older than its page protocol
    /// v2), where a connection that drops cannot be taken up again.
    pub id: String,
    /// Whether it existed before this attach (a replay of its screen follows).
    pub resumed: bool,
    pub read_only: bool,
    /// When it started, seconds since the Unix epoch, if the transport says.
    pub created: Option<u64>,
    /// Its main process, if the transport says.
    pub pid: Option<u32>,
    /// Who is attached, this client included.
    pub attached: Vec<Attendee>,
    pub allow_drive: bool,
}

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Up {
    /// Keystrokes.
    Input(Vec<u8>),
    /// The local window's new size.
    Resize(Size),
    /// The local input ended (a pipe): the session's terminal gets its end-of-file.
    Eof,
    /// Leave the session running.
    Detach,
}

/// What the client hears, mapped from the holder's frames or the gateway's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Down {
    /// The session joined: the first message of a link.
    Joined(Joined),
    /// Terminal output (the replay of the recent screen first, after a join).
    Output(Vec<u8>),
    /// Who is attached now.
    Presence { attached: Vec<Attendee>, allow_drive: bool },
    /// Words for the person at the terminal.
    Notice(String),
    /// The shell is about to stop (the gateway's warning).
    Stopping { message: String, can_extend: bool },
    /// The session's command exited with this code.
    Exited(i32),
    /// The session was ended (idle, killed, the pod stopping, access lost), in words.
    Ended(String),
    /// The holder or gateway refused what was asked, in words.
    Refused(String),
    /// The detach was done (the gateway says so; the holder just closes).
    Detached,
    /// The connection ended without any of the above, and why: the session goes on, and the
    /// client reattaches.
    Dropped(String),
    /// The link ended before any frame because the pod has no session holder.
    NoHolder(String),
    /// Nothing the client acts on (a message of a later protocol, a ping).
    Nothing,
}

/// Why a link could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// The holder or the gateway said no (no such session, the cap, no access): trying again
    /// would not help.
    Refused(String),
    /// The shell's pod has no session holder (it started before the holder was added).
    NoHolder(String),
    /// Anything else (the network, a timeout): worth another try.
    Failed(String),
}

/// A way to a shell's session holder.
// One thread runs the client (a current-thread runtime): no `Send` bound is asked of the future.
#[allow(async_fn_in_trait)]
pub trait Transport {
    /// Join a session: the link, once the holder (or the gateway) said which session it is.
    async fn open(&mut self, request: &Request) -> Result<(Link, Joined), OpenError>;
}

/// One open connection to a session: a task writing what is sent, in order, and one reading
/// what comes, each on its own, so that the client never stops reading output while input
/// waits for room (a large paste echoed back would otherwise stall both ways). Dropping the link
/// ends both tasks and the connection.
pub struct Link {
    /// To the writing task; closed once it can write no more.
    pub up: mpsc::Sender<Up>,
    /// From the reading task, which ends with a last word or [`Down::Dropped`].
    pub down: mpsc::Receiver<Down>,
    tasks: Vec<JoinHandle<()>>,
}

/// How many messages wait in each direction: input waits in the client's own queue beyond
/// this, and output in the transport's buffers (the holder then holds the rest).
pub const QUEUE: usize = 16;

impl Link {
    /// A link of the two channels and the tasks behind them.
    pub fn new(up: mpsc::Sender<Up>, down: mpsc::Receiver<Down>, tasks: Vec<JoinHandle<()>>) -> Self {
        Link { up, down, tasks }
    }

    /// The next message; [`Down::Dropped`] once the reading task is gone. Cancel-safe.
    pub async fn recv(&mut self) -> Down {
        self.down.recv().await.unwrap_or_else(|| Down::Dropped("the connection ended".into()))
    }

    /// The first message: the session joined, or why not (a last word before it is a refusal).
    pub async fn joined(mut self) -> Result<(Link, Joined), OpenError> {
        match self.recv().await {
            Down::Joined(joined) => Ok((self, joined)),
            Down::Refused(why) | Down::Ended(why) => Err(OpenError::Refused(why)),
            Down::NoHolder(why) => Err(OpenError::NoHolder(why)),
            Down::Dropped(why) => Err(OpenError::Failed(why)),
            other => Err(OpenError::Failed(format!("the session was not joined, but said {other:?} first"))),
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
