//! `cargo xtask test`: the one test command (README, CI). Runs, in order: the kubectl check, the
//! envtest binaries, `crdgen --check`, `cargo fmt --check`, `cargo clippy -D warnings`, a check
//! of the fuzz target, and `cargo test` for the whole workspace with `KUBEBUILDER_ASSETS`
//! pointing at the binaries.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::kubectl::kubectl_binary;

use crate::progress::{Step, format_duration};

pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
}

fn run_step(name: &str, mut cmd: Command) -> anyhow::Result<()> {
    let step = Step::start(name);
    let status = cmd.status().with_context(|| format!("starting {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    step.done();
    Ok(())
}

/// Counts from cargo's `test result:` lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
}

impl Totals {
    /// Add one `test result: ok. 3 passed; 0 failed; 1 ignored; …` line (others are ignored).
    pub fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else { return };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(count)) = (words.next(), words.next()) else { continue };
            let Ok(count) = count.parse::<u64>() else { continue };
            match label {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                "ignored" => self.ignored += count,
                _ => {}
            }
        }
    }
}

pub fn run(extra_args: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    let kubectl = kubectl_binary();
    let version = Command::new(&kubectl).args(["version", "--client"]).output();
    match version {
        Ok(out) if out.status.success() => {
            eprintln!("xtask: kubectl: {}", String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default());
        }
        _ => bail!(
            "kubectl is needed by the tests and was not found at {} (install it, or set KUBECTL)",
            kubectl.display()
        ),
    }

    let assets = crate::envtest::ensure()?;
    eprintln!("xtask: KUBEBUILDER_ASSETS={}", assets.display());
    // Before any test: `cargo xtask dev` (which a test runs) uses the node when it is there.
    let node_suites = crate::e2e::should_run()?;
    if node_suites {
        crate::node::ensure()?;
    }
    crate::crdgen::run(true)?;

    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run_step("cargo fmt --check", fmt)?;

    let locked: &[&str] = if in_ci() { &["--locked"] } else { &[] };
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets"]).args(locked).args(["--", "-D", "warnings"]);
    run_step("cargo clippy -D warnings", clippy)?;
    // The node suites are `test = false` (a plain `cargo test` needs no root), so
    // `--all-targets` leaves them out: lint them by name.
    let mut node_clippy = cargo();
    node_clippy
        .args(["clippy", "-p", "myownshell-tests", "--test", "e2e", "--test", "node"])
        .args(locked)
        .args(["--", "-D", "warnings"]);
    run_step("cargo clippy -D warnings (node suites)", node_clippy)?;

    // The fuzz target is not a workspace member (it needs nightly to run), so nothing else
    // compiles it; checking it here keeps it in step with the admission API it drives. It
    // shares the workspace's target directory (and its Cargo.lock mirrors the workspace's), so
    // the dependencies clippy just checked are not checked again.
    let mut fuzz = cargo();
    fuzz.arg("check")
        .arg("--manifest-path")
        .arg(assets::workspace_root().join("fuzz/Cargo.toml"))
        .arg("--target-dir")
        .arg(assets::target_dir())
        .args(locked);
    run_step("cargo check (fuzz target)", fuzz)?;

    // Tests run the real binaries as processes (signals, restarts), so build them first.
    let mut bins = cargo();
    bins.args(["build", "--workspace", "--bins"]).args(locked);
    run_step("cargo build --bins", bins)?;

    let step = Step::start("cargo test --workspace");
    let mut test = cargo();
    test.args(["test", "--workspace"])
        .args(locked)
        .args(extra_args)
        .env("KUBEBUILDER_ASSETS", &assets)
        .stdout(Stdio::piped());
    let mut totals = run_tests(test)?;
    step.done();
    if node_suites {
        let node = crate::e2e::run_suites(&assets, extra_args)?;
        totals.passed += node.passed;
    }
    eprintln!("xtask: all checks passed in {}", format_duration(started.elapsed()));
    // The plain closing line CI reads.
    println!("{} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}

/// Run `cargo test`, echoing its stdout and adding up its result lines.
pub fn run_tests(mut cmd: Command) -> anyhow::Result<Totals> {
    let mut child = cmd.spawn().context("starting cargo test")?;
    let mut totals = Totals::default();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            totals.add_line(&line);
        }
    }
    let status = child.wait()?;
    if !status.success() || totals.failed > 0 {
        println!("{} passed, {} failed", totals.passed, totals.failed.max(1));
        bail!("cargo test failed ({status})");
    }
    if totals.passed == 0 {
        bail!("cargo test ran no test");
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_up_result_lines() {
        let mut t = Totals::default();
        for line in [
            "test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s",
            "running 2 tests",
            "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.00s",
            "test foo ... ok",
        ] {
            t.add_line(line);
        }
        assert_eq!(t, Totals { passed: 4, failed: 2, ignored: 1 });
    }
}
