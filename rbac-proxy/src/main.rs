//! `myownshell-rbac-proxy`: parse flags, set up crypto and logs, run until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_rbac_proxy::standalone::{self, Args};

fn main() -> ExitCode {
    let args = Args::parse();
    myownshell_runtime::log::init(args.log.log_format);
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
    match standalone::run(args, myownshell_runtime::shutdown::on_signals()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "myownshell-rbac-proxy failed");
            ExitCode::FAILURE
        }
    }
}
