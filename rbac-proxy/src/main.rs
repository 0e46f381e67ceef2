//! `myownshell-rbac-proxy`: parse flags, set up crypto and logs, run until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_rbac_proxy::standalone::{self, Args, LogFormat};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Cancel `shutdown` on the first SIGTERM or SIGINT.
fn cancel_on_signals(shutdown: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
        shutdown.cancel();
    });
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_tracing(args.log_format);
    match standalone::runtime(args.worker_threads) {
        Ok(runtime) => runtime.block_on(run(args)),
        Err(e) => {
            tracing::error!(error = %e, "cannot start the tokio runtime");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> ExitCode {
    if rustls::crypto::ring::default_provider().install_default().is_err() {
        tracing::error!("a rustls crypto provider was already installed");
        return ExitCode::FAILURE;
    }
    let shutdown = CancellationToken::new();
    if let Err(e) = cancel_on_signals(shutdown.clone()) {
        tracing::error!(error = %e, "cannot install signal handlers");
        return ExitCode::FAILURE;
    }
    match standalone::run(args, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "myownshell-rbac-proxy failed");
            ExitCode::FAILURE
        }
    }
}
