//! `myownshell-webhook`: see `myownshell_webhook::args::Args` for the flags; runs on the
//! workspace's one process skeleton (`myownshell_runtime::process`) until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_runtime::process::{self, Threads};
use myownshell_webhook::args::Args;

fn main() -> ExitCode {
    let args = Args::parse();
    process::main("myownshell-webhook", args.log.log_format, Threads::PerCore, |shutdown| {
        myownshell_webhook::run::run(args, shutdown)
    })
}
