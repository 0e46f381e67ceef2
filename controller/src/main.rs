//! `myownshell-controller`: parse flags, then run on the workspace's one process skeleton
//! (`myownshell_runtime::process`) until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use myownshell_controller::{Args, run};
use myownshell_runtime::process::{self, Threads};

/// jemalloc, not the C library's malloc. The controller's heap is a few tens of MB of small,
/// long-lived cache entries, made during bursts (a first list, a relist) in which as much again
/// is allocated and freed on every thread. glibc's malloc keeps the freed memory of each of its
/// per-thread arenas for good: at 10,000 objects it held 72.6 MiB of RSS for a heap that
/// heaptrack measured at about 30 MB; jemalloc, which returns unused pages to the kernel a few
/// seconds after they are freed (from its background thread), holds 48.8–49.1 MiB for the same run
/// (`cargo xtask bench controller --objects 10000`). The shipped image is linked against musl,
/// whose allocator is slow under concurrency; with jemalloc it runs the allocator measured here.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    process::main("myownshell-controller", args.log.log_format, Threads::PerCore, |shutdown| run(args, shutdown))
}
