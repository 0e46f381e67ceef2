//! `myownshell-webhook`: see `myownshell_webhook::cli::Args` for the flags.

use clap::Parser;
use myownshell_webhook::cli::Args;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    myownshell_runtime::log::init(args.log.log_format);
    // One crypto provider for every rustls user in the process (kube client, servers).
    let _ = rustls::crypto::ring::default_provider().install_default();
    match myownshell_webhook::run::run(args, myownshell_runtime::shutdown::on_signals()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "myownshell-webhook failed");
            eprintln!("myownshell-webhook: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
