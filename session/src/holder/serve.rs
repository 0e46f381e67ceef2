//! `serve`: pid 1 of the shell's container. Reaps every process, wraps the container's own
//! command (stdio inherited, SIGTERM, SIGINT and SIGHUP forwarded), keeps the sessions behind
//! the socket, and exits with the command's code once every session has ended: when the
//! command exits by itself, or after SIGTERM (the pod stopping), when every attached client is
//! told why.

use std::ffi::OsString;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use super::registry::Registry;
use super::session::Config;
use super::{listener, socket};
use crate::procs::reaper::Reaper;
use myownshell_session::protocol::{EndReason, Ended};

/// How long the holder waits for its sessions to end before it exits anyway: every session's
/// SIGHUP grace and SIGKILL, with room, inside a pod's default 30 s termination grace.
const SESSIONS_END_WITHIN: Duration = Duration::from_secs(15);

/// What `serve` was asked.
#[derive(Debug, Clone)]
pub struct Serve {
    pub socket_dir: std::path::PathBuf,
    pub config: Config,
    /// The container's command.
    pub command: Vec<OsString>,
}

/// Run until the wrapped command exits; its exit code.
pub async fn serve(serve: Serve) -> Result<i32, String> {
    let reaper = Reaper::start()?;
    let listener = socket::bind(&serve.socket_dir)?;
    let mut terminate = listen(SignalKind::terminate())?;
    let mut interrupt = listen(SignalKind::interrupt())?;
    let mut hangup = listen(SignalKind::hangup())?;
    let (program, args) = serve.command.split_first().ok_or("serve needs a command: serve -- CMD [ARGS…]")?;
    let (pid, mut exit) = reaper
        .spawn(|| std::process::Command::new(program).args(args).spawn())
        .map_err(|e| format!("starting {}: {e}", program.to_string_lossy()))?;
    let max_connections = listener::max_connections(serve.config.max_sessions);
    let registry = Registry::new(serve.config, reaper.clone());
    let accepting = tokio::spawn(listener::accept(listener, registry.clone(), max_connections));
    let status = loop {
        tokio::select! {
            status = &mut exit => break status.ok(),
            _ = terminate.recv() => {
                forward(pid, Signal::TERM);
                let registry = registry.clone();
                tokio::spawn(async move { registry.close(stopping()).await });
            }
            _ = interrupt.recv() => forward(pid, Signal::INT),
            _ = hangup.recv() => forward(pid, Signal::HUP),
        }
    };
    let code = status.map_or(255, |s| s.code);
    accepting.abort();
    let exited = format!("the shell's container command exited with code {code}");
    registry.close(Ended { reason: EndReason::PodStopping, message: exited }).await;
    let deadline = Instant::now() + SESSIONS_END_WITHIN;
    while !registry.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = std::fs::remove_file(socket::path(&serve.socket_dir));
    Ok(code)
}

fn stopping() -> Ended {
    Ended {
        reason: EndReason::PodStopping,
        message: "the shell's pod is stopping: its sessions end with it; start a new one once the shell runs again"
            .into(),
    }
}

fn listen(kind: SignalKind) -> Result<tokio::signal::unix::Signal, String> {
    signal(kind).map_err(|e| format!("listening for signal {}: {e}", kind.as_raw_value()))
}

fn forward(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = kill_process(pid, signal);
    }
}
