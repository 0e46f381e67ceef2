//! `myownshell-rbac-proxy`: parse flags, then run on the workspace's one process skeleton
//! (`myownshell_runtime::process`) until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_rbac_proxy::args::Args;
use myownshell_runtime::process::{self, Threads};

fn main() -> ExitCode {
    let args = Args::parse();
    let threads = Threads::Exactly(usize::from(args.worker_threads));
    process::main("myownshell-rbac-proxy", args.log.log_format, threads, |shutdown| {
        myownshell_rbac_proxy::run::run(args, shutdown)
    })
}
