//! `myownshell-gateway`: parse flags, then run on the workspace's one process skeleton
//! (`myownshell_runtime::process`) until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_gateway::args::Args;
use myownshell_runtime::process::{self, Threads};

fn main() -> ExitCode {
    let args = Args::parse();
    process::main("myownshell-gateway", args.log.log_format, Threads::PerCore, |shutdown| {
        myownshell_gateway::run::run(args, shutdown)
    })
}
