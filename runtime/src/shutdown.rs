//! Graceful shutdown: the first SIGTERM (from the kubelet) or SIGINT (Ctrl-C) cancels a token
//! that every server and loop of the process watches.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// A token cancelled by the first SIGTERM or SIGINT. Must be called inside a tokio runtime.
pub fn on_signals() -> CancellationToken {
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let (term, int) = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(term), Ok(int)) => (term, int),
        (Err(e), _) | (_, Err(e)) => {
            // Practically unreachable; the default dispositions still end the process, only
            // without draining, so it is worth a log line rather than refusing to start.
            tracing::error!(error = %e, "cannot listen for signals; SIGTERM will stop the process without draining");
            return shutdown;
        }
    };
    tokio::spawn(async move {
        let (mut term, mut int) = (term, int);
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            () = token.cancelled() => return,
        }
        token.cancel();
    });
    shutdown
}
