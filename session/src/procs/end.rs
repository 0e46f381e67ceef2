//! Ending a session's processes: every live process whose session id is the session's gets
//! SIGHUP (what a terminal hanging up sends; a shell saves its history and exits on it) and
//! SIGCONT (a stopped job only sees its SIGHUP once continued), then SIGKILL after a short grace.
//! The end is proven, not assumed: `/proc` is read again until no live process of the session
//! is left, or the error names the ones that stayed.
//!
//! What escapes: a process that made a session of its own (`setsid`, a double-forking daemon)
//! is no longer the session's, as it is no longer the terminal's; it ends with the container.

use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use tokio::time::{Instant, sleep};

use super::stat;

/// How long after SIGKILL the processes may take to go (the kernel frees them at once, unless
/// one is stuck in an uninterruptible wait).
const AFTER_KILL: Duration = Duration::from_secs(5);

/// How often `/proc` is read while waiting.
const POLL: Duration = Duration::from_millis(10);

/// End every process of session `session`, waiting `grace` between SIGHUP and SIGKILL.
pub async fn session(session: i32, grace: Duration) -> Result<(), String> {
    let live = members(session)?;
    if live.is_empty() {
        return Ok(());
    }
    signal(&live, Signal::HUP);
    signal(&live, Signal::CONT);
    if gone(session, grace).await? {
        return Ok(());
    }
    signal(&members(session)?, Signal::KILL);
    if gone(session, AFTER_KILL).await? {
        return Ok(());
    }
    Err(format!(
        "processes {:?} of session {session} are still running {}s after SIGKILL",
        members(session)?,
        AFTER_KILL.as_secs()
    ))
}

fn members(session: i32) -> Result<Vec<i32>, String> {
    stat::of_session(session).map_err(|e| format!("reading /proc for the processes of session {session}: {e}"))
}

fn signal(pids: &[i32], signal: Signal) {
    for pid in pids.iter().filter_map(|&p| Pid::from_raw(p)) {
        // A process that exited meanwhile is what we want; nothing else can fail for our own.
        let _ = kill_process(pid, signal);
    }
}

/// Whether the session has no live process left within `within`.
async fn gone(session: i32, within: Duration) -> Result<bool, String> {
    let deadline = Instant::now() + within;
    loop {
        if members(session)?.is_empty() {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        sleep(POLL).await;
    }
}
