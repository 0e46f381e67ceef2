//! A session's output path: PTY reads gathered into frames (`coalesce`), kept in the scrollback,
//! and offered to every client; a frame that some queue has no room for is held, and the PTY is
//! not read until it is delivered. The driving client holds the shell as long as it needs (a
//! terminal whose reader pauses pauses its writer); anyone else holds it at most
//! [`STALL`] and is then detached with a notice.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::coalesce::{self, FRAME_MAX, Gathered, Next};
use super::members::{CONTROL_SLACK, Members, Shared, frame};
use super::pty::{Pty, Read};
use myownshell_session::protocol::HolderMessage;

/// How long a client that is not driving may hold the shell's output back. A page in a
/// background tab or a link that drops for a moment catches up within seconds; past this, the
/// watcher is detached (and may attach again, with the replay) rather than pausing the shell
/// for the person typing in it.
pub const STALL: Duration = Duration::from_secs(5);

/// The most bytes one PTY read takes.
const READ_BUF: usize = 16 * 1024;

/// Output read but not yet sent.
#[derive(Debug, Default)]
pub struct Gather {
    bytes: Vec<u8>,
    reads: usize,
    first: Option<Instant>,
    /// Whether the last frame went out less than a window before `first`.
    flowing: bool,
    /// When the last frame went out.
    last_frame: Option<Instant>,
    /// When to send what was gathered even if nothing more comes.
    pub deadline: Option<Instant>,
}

impl Gather {
    fn add(&mut self, bytes: &[u8]) {
        if self.first.is_none() {
            let now = Instant::now();
            self.first = Some(now);
            self.flowing = self.last_frame.is_some_and(|t| now.duration_since(t) < coalesce::WINDOW);
        }
        self.bytes.extend_from_slice(bytes);
        self.reads += 1;
    }

    fn next(&self, more_ready: bool) -> Next {
        let age = self.first.map_or(Duration::ZERO, |f| f.elapsed());
        let (bytes, reads, flowing) = (self.bytes.len(), self.reads, self.flowing);
        coalesce::next(Gathered { bytes, reads, age, more_ready, flowing })
    }

    fn take(&mut self) -> Vec<u8> {
        self.reads = 0;
        self.first = None;
        self.deadline = None;
        if !self.bytes.is_empty() {
            self.last_frame = Some(Instant::now());
        }
        std::mem::take(&mut self.bytes)
    }
}

/// A frame some clients have no room for yet.
#[derive(Debug)]
pub struct Held {
    frame: Shared,
    waiting: Vec<u64>,
}

/// What one readiness of the PTY gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Output is gathered, waiting to be sent (or was sent).
    Open,
    /// The terminal is closed: no more output will come.
    Closed,
}

/// Read what the PTY has now into `gather`: stop at a full frame or when nothing more is there.
/// Returns whether to send, and whether the terminal closed.
pub fn read_now(pty: &Pty, gather: &mut Gather) -> (bool, Outcome) {
    let mut buf = [0u8; READ_BUF];
    loop {
        let room = (FRAME_MAX - gather.bytes.len().min(FRAME_MAX)).clamp(1, READ_BUF);
        match pty.read(&mut buf[..room]) {
            Ok(Read::Bytes(n)) => {
                gather.add(&buf[..n]);
                if gather.next(true) == Next::Flush {
                    return (true, Outcome::Open);
                }
            }
            Ok(Read::WouldBlock) => {
                return match gather.next(false) {
                    Next::Flush => (true, Outcome::Open),
                    Next::Wait(left) => {
                        gather.deadline = Some(Instant::now() + left);
                        (false, Outcome::Open)
                    }
                    Next::Idle | Next::ReadMore => (false, Outcome::Open),
                };
            }
            Ok(Read::Closed) | Err(_) => return (true, Outcome::Closed),
        }
    }
}

/// Send what was gathered: into the scrollback and to every client. Returns the frame's bytes
/// count, and what is held back, if any.
pub fn flush(
    gather: &mut Gather,
    scrollback: &mut super::scrollback::Scrollback,
    members: &mut Members,
) -> (usize, Option<Held>) {
    let bytes = gather.take();
    if bytes.is_empty() {
        return (0, None);
    }
    scrollback.push(&bytes);
    let Some(frame) = frame(&HolderMessage::Output(bytes)) else { return (0, None) };
    let waiting = members.offer(&frame, &members.ids());
    let len = frame.len();
    (len, (!waiting.is_empty()).then_some(Held { frame, waiting }))
}

impl Held {
    /// Offer the frame again to those still waiting; `None` once all took it.
    pub fn retry(mut self, members: &mut Members) -> Option<Held> {
        self.waiting = members.offer(&self.frame, &self.waiting);
        (!self.waiting.is_empty()).then_some(self)
    }

    /// Forget a client that left.
    pub fn forget(mut self, id: u64) -> Option<Held> {
        self.waiting.retain(|&w| w != id);
        (!self.waiting.is_empty()).then_some(self)
    }

    /// Resolves when the first waiting client's queue has room for output again, or at once if
    /// it is gone (a retry then drops it).
    pub fn room(&self, members: &Members) -> impl Future<Output = ()> + use<> {
        let queue = self.waiting.first().and_then(|&id| members.queue(id));
        async move {
            if let Some(queue) = queue {
                drop(queue.reserve_many(CONTROL_SLACK + 1).await);
            }
        }
    }

    /// When the first waiting client that is not `driver` has held the output for [`STALL`].
    pub fn stall_deadline(&self, members: &Members) -> Option<Instant> {
        let driver = members.driver;
        self.waiting
            .iter()
            .filter(|&&id| Some(id) != driver)
            .filter_map(|&id| members.get(id).and_then(|m| m.stalled_since))
            .min()
            .map(|since| since + STALL)
    }

    /// The clients, not the driver, that have held the output for [`STALL`] or more.
    pub fn stalled(&self, members: &Members) -> Vec<u64> {
        let driver = members.driver;
        let now = Instant::now();
        self.waiting
            .iter()
            .copied()
            .filter(|&id| Some(id) != driver)
            .filter(|&id| members.get(id).and_then(|m| m.stalled_since).is_some_and(|s| now >= s + STALL))
            .collect()
    }
}
