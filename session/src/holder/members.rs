//! The clients attached to one session, and the bounded queues their frames wait in.
//!
//! Each client's queue holds [`QUEUE_FRAMES`] output frames plus [`CONTROL_SLACK`] control frames
//! (presence, notices): output is only queued while the slack is untouched, so a notice always
//! finds room behind a full queue of output, and a client that is so far behind that even the
//! slack is gone is detached. A full queue stops the session from reading its PTY (see
//! `session.rs`): that is how a client that does not read slows the shell down, not the holder's
//! memory up (at most 4 × 32 KiB of output per client).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use myownshell_session::protocol::{Attendee, HolderMessage, Size};

/// Output frames a client may have waiting. With 32 KiB frames, 128 KiB: some screens' worth,
/// more than a socket's own buffer adds; 8 clients of 16 sessions stay under 16 MiB in all.
pub const QUEUE_FRAMES: usize = 4;

/// Room kept in each queue for frames that are not output.
pub const CONTROL_SLACK: usize = 8;

/// The most clients on one session: a shell shared for pairing or teaching, not broadcasting.
pub const MAX_CLIENTS: usize = 8;

/// A frame, shared between the queues of every client it goes to.
pub type Shared = Arc<[u8]>;

/// What a connection gives the session to reach its client: the queue, and the last word (a
/// frame written after what is queued, before the connection is closed).
#[derive(Debug)]
pub struct Outlet {
    pub frames: mpsc::Sender<Shared>,
    pub last_word: oneshot::Sender<Shared>,
}

/// A queue and its outlet's receiving ends, for the connection's writer.
pub fn outlet() -> (Outlet, mpsc::Receiver<Shared>, oneshot::Receiver<Shared>) {
    let (frames, frames_rx) = mpsc::channel(QUEUE_FRAMES + CONTROL_SLACK);
    let (last_word, last_rx) = oneshot::channel();
    (Outlet { frames, last_word }, frames_rx, last_rx)
}

/// One attached client.
#[derive(Debug)]
pub struct Member {
    pub id: u64,
    pub user: String,
    pub creator: bool,
    pub read_only: bool,
    pub size: Option<Size>,
    outlet: Outlet,
    /// Told once that it may not do something; not told again.
    pub warned: bool,
    /// Since when its full queue holds output back.
    pub stalled_since: Option<Instant>,
}

/// The clients of a session.
#[derive(Debug, Default)]
pub struct Members {
    list: Vec<Member>,
    /// The one whose size the terminal has: the last to type or resize.
    pub driver: Option<u64>,
    /// Someone was dropped for being too far behind (or gone): the others must hear of it.
    lost: bool,
}

/// A frame for a client, or `None` if it cannot be encoded (never for what the holder builds).
pub fn frame(message: &HolderMessage) -> Option<Shared> {
    message.encode().ok().map(Shared::from)
}

impl Members {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn add(&mut self, id: u64, user: String, creator: bool, read_only: bool, size: Option<Size>, outlet: Outlet) {
        let member = Member { id, user, creator, read_only, size, outlet, warned: false, stalled_since: None };
        self.list.push(member);
    }

    pub fn get(&self, id: u64) -> Option<&Member> {
        self.list.iter().find(|m| m.id == id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Member> {
        self.list.iter_mut().find(|m| m.id == id)
    }

    /// Who is attached, as `Presence` and `Attached` tell it.
    pub fn attendees(&self) -> Vec<Attendee> {
        let driving = |m: &Member| self.driver == Some(m.id);
        self.list
            .iter()
            .map(|m| Attendee { user: m.user.clone(), read_only: m.read_only, driving: driving(m) })
            .collect()
    }

    /// Queue a control frame for one client; one too far behind for even that is detached
    /// (returns false).
    pub fn send(&mut self, id: u64, frame: &Shared) -> bool {
        let sent =
            self.list.iter().find(|m| m.id == id).is_some_and(|m| m.outlet.frames.try_send(frame.clone()).is_ok());
        if !sent {
            self.lost |= self.close(id, None);
        }
        sent
    }

    /// Whether someone was dropped since the last call.
    pub fn take_lost(&mut self) -> bool {
        std::mem::take(&mut self.lost)
    }

    /// Queue a control frame for everyone.
    pub fn broadcast(&mut self, frame: &Shared) {
        let ids: Vec<u64> = self.list.iter().map(|m| m.id).collect();
        for id in ids {
            self.send(id, frame);
        }
    }

    /// Queue output for everyone whose queue has room for output; the ids of those whose has not.
    pub fn offer(&mut self, frame: &Shared, to: &[u64]) -> Vec<u64> {
        let mut full = Vec::new();
        for member in self.list.iter_mut().filter(|m| to.contains(&m.id)) {
            if member.outlet.frames.capacity() > CONTROL_SLACK && member.outlet.frames.try_send(frame.clone()).is_ok() {
                member.stalled_since = None;
            } else if !member.outlet.frames.is_closed() {
                member.stalled_since.get_or_insert_with(Instant::now);
                full.push(member.id);
            }
        }
        full
    }

    /// Every member's id.
    pub fn ids(&self) -> Vec<u64> {
        self.list.iter().map(|m| m.id).collect()
    }

    /// A clone of the queue of `id`, to wait for room in it.
    pub fn queue(&self, id: u64) -> Option<mpsc::Sender<Shared>> {
        self.list.iter().find(|m| m.id == id).map(|m| m.outlet.frames.clone())
    }

    /// Detach `id`, with `word` as its last frame; whether it was attached.
    pub fn close(&mut self, id: u64, word: Option<Shared>) -> bool {
        if self.driver == Some(id) {
            self.driver = None;
        }
        let Some(at) = self.list.iter().position(|m| m.id == id) else { return false };
        let member = self.list.remove(at);
        if let Some(word) = word {
            let _ = member.outlet.last_word.send(word);
        }
        true
    }

    /// Detach everyone, with `word` as each one's last frame.
    pub fn close_all(&mut self, word: Option<Shared>) {
        for id in self.ids() {
            let _ = self.close(id, word.clone());
        }
    }
}
