//! The sessions of this shell: which one a hello gets (new, by id, or the user's newest
//! detached one), the per-pod cap, `list` and `kill`, and ending them all when the pod stops.
//! Held under one lock taken only for moments (never across an await), so the cap cannot be
//! passed by hellos arriving together.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::mpsc;

use super::pty;
use super::session::{Config, Control, Inbox, Session, Typed};
use crate::procs::reaper::Reaper;
use myownshell_session::protocol::{Ended, Hello, SessionInfo, Size, Which};

/// How to reach a session.
#[derive(Debug, Clone)]
pub struct Handle {
    /// The how-manieth session this holder started: which is newer, within the same second.
    pub order: u64,
    pub info: Arc<Mutex<SessionInfo>>,
    pub control: mpsc::Sender<Control>,
    pub typed: mpsc::Sender<Typed>,
}

/// The terminal size of a session started without one.
const DEFAULT_SIZE: Size = Size { cols: 80, rows: 24 };

/// Requests a session's channel holds before a client's reader waits.
const CONTROL_QUEUE: usize = 32;

/// Inputs a session's channel holds before a client's reader waits (each up to 64 KiB).
const TYPED_QUEUE: usize = 4;

#[derive(Debug, Default)]
struct Inner {
    sessions: BTreeMap<String, Handle>,
    /// Why no session starts or attaches any more (the pod is stopping).
    closing: Option<String>,
    /// Sessions started so far.
    started: u64,
}

/// Every session of the holder.
#[derive(Debug)]
pub struct Registry {
    inner: Mutex<Inner>,
    config: Arc<Config>,
    reaper: Arc<Reaper>,
}

impl Registry {
    pub fn new(config: Config, reaper: Arc<Reaper>) -> Arc<Self> {
        Arc::new(Registry { inner: Mutex::default(), config: Arc::new(config), reaper })
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session `hello` asks for, and whether it existed before; or the refusal.
    pub fn open(self: &Arc<Self>, hello: &Hello) -> Result<(Handle, bool), String> {
        let mut inner = self.inner();
        if let Some(why) = &inner.closing {
            return Err(format!("no session can start or attach: {why}"));
        }
        let command = match &hello.session {
            Which::Attach { id } => {
                return inner.sessions.get(id).map(|h| (h.clone(), true)).ok_or_else(|| {
                    format!("there is no session {id:?} in this shell; `myownshell-session list` shows those there are")
                });
            }
            Which::AttachOrNew { command } => match newest_detached(&inner, &hello.user) {
                Some(handle) => return Ok((handle, true)),
                None => command,
            },
            Which::New { command } => command,
        };
        let command = command.clone().unwrap_or_else(|| vec![self.config.shell.clone()]);
        let handle = self.start(&mut inner, &hello.user, command, hello.size.unwrap_or(DEFAULT_SIZE))?;
        Ok((handle, false))
    }

    /// Start a session of `user` running `command`, within the cap.
    fn start(
        self: &Arc<Self>,
        inner: &mut Inner,
        user: &str,
        command: Vec<String>,
        size: Size,
    ) -> Result<Handle, String> {
        let cap = self.config.max_sessions;
        if inner.sessions.len() >= cap {
            return Err(format!(
                "this shell already has {} sessions, the most it keeps (--max-sessions {cap}): end one with \
                 `myownshell-session kill ID` (`myownshell-session list` shows them) or by exiting its shell",
                inner.sessions.len()
            ));
        }
        let id = new_id(inner)?;
        let spawned = pty::spawn(&command, size, &self.reaper)?;
        let info = SessionInfo {
            id: id.clone(),
            user: user.to_owned(),
            created: crate::duration::now(),
            command,
            pid: spawned.pid.unsigned_abs(),
            ..SessionInfo::default()
        };
        let info = Arc::new(Mutex::new(info));
        let (control, control_rx) = mpsc::channel(CONTROL_QUEUE);
        let (typed, typed_rx) = mpsc::channel(TYPED_QUEUE);
        inner.started += 1;
        let handle = Handle { order: inner.started, info: info.clone(), control, typed };
        inner.sessions.insert(id.clone(), handle.clone());
        let session = Session::new(id.clone(), user.to_owned(), spawned.pid, spawned.pty, info, self.config.clone());
        let inbox = Inbox { control: control_rx, typed: typed_rx, exit: spawned.exit };
        let registry = self.clone();
        tokio::spawn(async move {
            session.run(inbox).await;
            registry.remove(&id);
        });
        Ok(handle)
    }

    /// The session `id`, for `kill`.
    pub fn get(&self, id: &str) -> Option<Handle> {
        self.inner().sessions.get(id).cloned()
    }

    /// Every session, oldest first.
    pub fn list(&self) -> Vec<SessionInfo> {
        let mut handles: Vec<Handle> = self.inner().sessions.values().cloned().collect();
        handles.sort_by_key(|h| h.order);
        handles.iter().map(|h| h.info.lock().unwrap_or_else(PoisonError::into_inner).clone()).collect()
    }

    /// A session's task is over.
    pub fn remove(&self, id: &str) {
        self.inner().sessions.remove(id);
    }

    pub fn is_empty(&self) -> bool {
        self.inner().sessions.is_empty()
    }

    /// Refuse every new hello from now on, and end every session with `ended`.
    pub async fn close(&self, ended: Ended) {
        let handles: Vec<Handle> = {
            let mut inner = self.inner();
            inner.closing = Some(ended.message.clone());
            inner.sessions.values().cloned().collect()
        };
        for handle in handles {
            let _ = handle.control.send(Control::Finish(ended.clone())).await;
        }
    }
}

/// The newest session `user` created that nobody is attached to.
fn newest_detached(inner: &Inner, user: &str) -> Option<Handle> {
    inner
        .sessions
        .values()
        .filter(|h| {
            let info = h.info.lock().unwrap_or_else(PoisonError::into_inner);
            info.user == user && info.attached.is_empty()
        })
        .max_by_key(|h| h.order)
        .cloned()
}

/// A short id no session has: 8 hexadecimal characters, easy to type after `attach --id`. Not a
/// secret (whoever reaches the socket may list the sessions anyway), only unlikely to repeat:
/// drawn from std's per-process random hash keys (seeded by the OS), without a dependency or a
/// file to open (a static binary in a bare image may have neither `/dev/urandom` nor a libc
/// `getrandom` to find).
fn new_id(inner: &Inner) -> Result<String, String> {
    use std::hash::{BuildHasher, Hasher};
    let keys = std::collections::hash_map::RandomState::new();
    for attempt in 0..16u64 {
        let mut hasher = keys.build_hasher();
        hasher.write_u64(crate::duration::now_nanos() ^ attempt);
        let id = format!("{:08x}", hasher.finish() as u32);
        if !inner.sessions.contains_key(&id) {
            return Ok(id);
        }
    }
    Err("no free session id after 16 tries".into())
}
