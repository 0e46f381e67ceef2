//! `myownshell-controller`: parse flags, set up crypto and logging, run until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_controller::{Args, run};

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // One TLS stack (rustls + ring) for the whole process, installed before any client exists.
    if rustls::crypto::ring::default_provider().install_default().is_err() {
        eprintln!("a rustls crypto provider was already installed");
    }
    myownshell_runtime::log::init(args.log.log_format);

    let result = run(args, myownshell_runtime::shutdown::on_signals()).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "exiting");
            ExitCode::FAILURE
        }
    }
}
