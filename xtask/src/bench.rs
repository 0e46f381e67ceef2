//! `cargo xtask bench <target>`: benchmarks that print figures (never timed tests). Each target
//! lives in its own module (`bench_<target>.rs`) and compares against a floor measured in the
//! same run, so the ratio means something on any machine.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Target {}

pub fn run(target: Target) -> anyhow::Result<()> {
    match target {}
}
