//! `myownshell-controller`: parse flags, set up crypto and logging, run until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_controller::{Args, run, telemetry};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // One TLS stack (rustls + ring) for the whole process, installed before any client exists.
    if rustls::crypto::ring::default_provider().install_default().is_err() {
        eprintln!("a rustls crypto provider was already installed");
    }
    telemetry::init(args.log_format);

    let shutdown = CancellationToken::new();
    let signals = tokio::spawn(cancel_on_signal(shutdown.clone()));
    let result = run(args, shutdown).await;
    signals.abort();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "exiting");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM (kubelet) or SIGINT (Ctrl-C) starts a graceful shutdown.
async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int) = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(term), Ok(int)) => (term, int),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot listen for signals; stop the process with SIGKILL");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}
