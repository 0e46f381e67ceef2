//! The one waiter for children: on every SIGCHLD, `waitpid(-1, WNOHANG)` until nothing is left
//! to reap, handing each status to whoever registered its pid, and dropping the rest (orphans
//! reparented to the holder, which as pid 1 must reap them or they stay zombies forever).
//!
//! Why not tokio::process (which `pty-process`'s `async` feature spawns through): tokio waits
//! for its own children by pid, and a `waitpid(-1)` here would reap them first, leaving tokio
//! with `ECHILD` and the session without its exit code; letting tokio reap would leave orphans
//! unreaped. So children are spawned with `std::process`, never waited on by it, and registered
//! here in the same critical section as the spawn: a child that exits before its registration
//! is finished cannot have its status handed to nobody, because dispatching takes the same lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustix::process::{WaitOptions, WaitStatus};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The exit code, or 128 + the signal that killed it.
    pub code: i32,
    pub signal: Option<i32>,
}

impl Status {
    fn of(status: WaitStatus) -> Self {
        match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => Status { code, signal: None },
            (None, Some(signal)) => Status { code: 128 + signal, signal: Some(signal) },
            // Neither exited nor killed: only asked for with WUNTRACED/WCONTINUED, which we do not.
            (None, None) => Status { code: 255, signal: None },
        }
    }
}

/// The waiter. Started once per process, before any child.
#[derive(Debug, Default)]
pub struct Reaper {
    waiting: Mutex<HashMap<i32, oneshot::Sender<Status>>>,
}

impl Reaper {
    /// Become the reaper of every descendant (pid 1 is already; otherwise a child subreaper, so
    /// that orphans come to us in a test as they do in a container) and start reaping on every
    /// SIGCHLD. Needs a tokio runtime.
    pub fn start() -> Result<Arc<Reaper>, String> {
        if rustix::process::getpid().as_raw_nonzero().get() != 1 {
            rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
                .map_err(|e| format!("becoming a child subreaper: {e}"))?;
        }
        let mut children = signal(SignalKind::child()).map_err(|e| format!("listening for SIGCHLD: {e}"))?;
        let reaper = Arc::new(Reaper::default());
        let this = reaper.clone();
        tokio::spawn(async move {
            // Children that ended before the handler was in place are reaped on the first pass.
            loop {
                this.reap();
                if children.recv().await.is_none() {
                    return;
                }
            }
        });
        Ok(reaper)
    }

    /// Spawn a child with `spawn` and register its pid; its status arrives on the receiver.
    pub fn spawn(
        &self,
        spawn: impl FnOnce() -> std::io::Result<std::process::Child>,
    ) -> std::io::Result<(i32, oneshot::Receiver<Status>)> {
        let mut waiting = self.waiting();
        let child = spawn()?;
        // Dropping a std Child neither kills nor waits for it: the reaper does the waiting.
        let pid = i32::try_from(child.id()).map_err(|_| std::io::Error::other("a pid above i32"))?;
        let (tx, rx) = oneshot::channel();
        waiting.insert(pid, tx);
        Ok((pid, rx))
    }

    /// Reap every child that has ended.
    fn reap(&self) {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    let waiter = self.waiting().remove(&pid.as_raw_nonzero().get());
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(Status::of(status));
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                // Nothing more has ended, or no children at all.
                Ok(None) | Err(_) => return,
            }
        }
    }

    fn waiting(&self) -> MutexGuard<'_, HashMap<i32, oneshot::Sender<Status>>> {
        // Nothing panics while holding it; a poisoned map is still a consistent map.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
