//! What every binary's `main` does alike: set up logging, install the one crypto provider,
//! build the tokio runtime, run until SIGTERM/SIGINT, and turn the outcome into an exit code.

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::log::{self, LogFormat};

/// The tokio runtime a binary runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// A multi-thread runtime with one worker per core.
    PerCore,
    /// Exactly this many workers; one runs everything on the main thread (no cross-thread
    /// wake-ups, which is most of a small sidecar's cost).
    Exactly(usize),
}

/// A tokio runtime with `threads` workers.
pub fn runtime(threads: Threads) -> std::io::Result<tokio::runtime::Runtime> {
    match threads {
        Threads::Exactly(0 | 1) => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        Threads::Exactly(n) => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build(),
        Threads::PerCore => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
    }
}

/// Run a binary: logs in `log_format`, rustls's ring provider installed for every TLS user in
/// the process (kube client, servers), then `body` with a token cancelled by the first SIGTERM
/// or SIGINT. An error is logged (with its causes) and printed to stderr under the binary's
/// `name`, and the process exits non-zero.
pub fn main<F, E>(
    name: &str,
    log_format: LogFormat,
    threads: Threads,
    body: impl FnOnce(CancellationToken) -> F,
) -> ExitCode
where
    F: Future<Output = Result<(), E>>,
    E: Display,
{
    log::init(log_format);
    if rustls::crypto::ring::default_provider().install_default().is_err() {
        tracing::error!("a rustls crypto provider was already installed");
        return ExitCode::FAILURE;
    }
    let runtime = match runtime(threads) {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the tokio runtime");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match body(crate::shutdown::on_signals()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = format!("{e:#}"), "{name} failed");
                eprintln!("{name}: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}
