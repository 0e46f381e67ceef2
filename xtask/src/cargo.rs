//! Running cargo from xtask: the `cargo` it was started by, whether this is CI, and `cargo test`
//! with its result lines added up (shared by `test` and `e2e`).

use std::io::{BufRead, BufReader};
use std::process::Command;

use anyhow::{Context, bail};

/// The cargo running xtask, without what `cargo run` told xtask about itself
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, …): build scripts that watch those variables (ring's
/// watches `CARGO_MANIFEST_DIR`) saw them change between a plain `cargo` and one run from
/// `cargo xtask`, and ring, rustls, kube and everything above them were built again each time.
///
/// In CI, without incremental compilation (unless `CARGO_INCREMENTAL` says otherwise): a clean
/// clone builds once, so its incremental caches only cost time and disk (18 of the 30 GiB of
/// `target/debug` here; a CI run ended with "no space left on device").
pub fn cargo() -> Command {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(told_by_cargo_run) {
            cargo.env_remove(name);
        }
    }
    if in_ci() && std::env::var_os("CARGO_INCREMENTAL").is_none() {
        cargo.env("CARGO_INCREMENTAL", "0");
    }
    cargo
}

/// Whether `name` is one of the variables `cargo run` sets for the program it runs.
fn told_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
        )
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
}

/// Counts from cargo's `test result:` lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
}

impl Totals {
    /// These totals, or an error if no test passed (a filter that matched nothing, a test target
    /// gone missing): a run of no test proves nothing.
    pub fn ran_some(self) -> anyhow::Result<Self> {
        if self.passed == 0 {
            bail!("cargo test ran no test");
        }
        Ok(self)
    }

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

/// The end of each failed test's output (libtest's `---- NAME stdout ----` blocks), kept to be
/// printed again after everything else: a CI log that is cut in the middle still ends with why.
#[derive(Debug, Default)]
pub struct FailureReport {
    blocks: Vec<Vec<String>>,
    in_block: bool,
    /// Within a panic's backtrace (`RUST_BACKTRACE=1`): its frames are left out, or a test's 40
    /// lines would be frames of tokio and nothing of the panic's message (as CI once showed).
    in_backtrace: bool,
}

impl FailureReport {
    /// The lines kept of each failed test: the end of its output, where the panic is.
    const TAIL: usize = 40;

    pub fn add_line(&mut self, line: &str) {
        if line.starts_with("---- ") && line.ends_with(" ----") {
            self.blocks.push(vec![line.to_owned()]);
            (self.in_block, self.in_backtrace) = (true, false);
        } else if line == "failures:" {
            self.in_block = false;
        } else if self.in_backtrace && (line.starts_with(' ') || line.starts_with("note: Some details are omitted")) {
            // A frame of the backtrace, or its closing note: left out.
        } else if self.in_block
            && let Some(block) = self.blocks.last_mut()
        {
            self.in_backtrace = line == "stack backtrace:";
            let line = if self.in_backtrace { "stack backtrace: (its frames left out here)" } else { line };
            block.push(line.to_owned());
            if block.len() > Self::TAIL + 1 {
                block.remove(1);
            }
        }
    }

    /// Each failed test's block, trimmed of trailing blank lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for block in &self.blocks {
            let end = block.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
            out.extend(block[..end].iter().cloned());
        }
        out
    }
}

/// `cargo test` failed: how it exited, and the end of each failed test's output. Said as the
/// command's error, which xtask prints last, after the time summary: CI keeps the start and the
/// end of a long log, and a run whose report came before the summary showed neither which
/// assertion failed nor why.
#[derive(Debug)]
pub struct TestsFailed {
    status: std::process::ExitStatus,
    report: Vec<String>,
}

impl std::fmt::Display for TestsFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cargo test failed ({})", self.status)?;
        if !self.report.is_empty() {
            write!(f, "; the failed tests' output, again (its last {} lines each):", FailureReport::TAIL)?;
            for line in &self.report {
                write!(f, "\n  {line}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for TestsFailed {}

/// Run `cargo test`, echoing its stdout and adding up its result lines (see [`Totals::ran_some`]).
pub fn run_tests(mut cmd: Command) -> anyhow::Result<Totals> {
    let mut child = cmd.spawn().context("starting cargo test")?;
    let mut totals = Totals::default();
    let mut failures = FailureReport::default();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            totals.add_line(&line);
            failures.add_line(&line);
        }
    }
    let status = child.wait()?;
    if !status.success() || totals.failed > 0 {
        println!("{} passed, {} failed", totals.passed, totals.failed.max(1));
        return Err(TestsFailed { status, report: failures.lines() }.into());
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_cargo_run_tells_its_program_is_not_passed_on() {
        for name in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "CARGO_PKG_VERSION_MAJOR", "CARGO_CRATE_NAME"] {
            assert!(super::told_by_cargo_run(name), "{name}");
        }
        for name in ["CARGO_HOME", "CARGO_TARGET_DIR", "CARGO", "CARGO_TERM_COLOR", "PATH"] {
            assert!(!super::told_by_cargo_run(name), "{name}");
        }
    }

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

    #[test]
    fn a_failed_run_says_the_failed_tests_output_in_its_error() {
        use std::os::unix::process::ExitStatusExt;
        let status = std::process::ExitStatus::from_raw(101 << 8);
        let report = vec!["---- e2e stdout ----".to_owned(), "thread 'e2e' panicked: why".to_owned()];
        assert_eq!(
            TestsFailed { status, report }.to_string(),
            "cargo test failed (exit status: 101); the failed tests' output, again (its last 40 lines each):\n  \
             ---- e2e stdout ----\n  thread 'e2e' panicked: why"
        );
        assert_eq!(TestsFailed { status, report: vec![] }.to_string(), "cargo test failed (exit status: 101)");
    }

    #[test]
    fn keeps_the_end_of_each_failed_tests_output() {
        let mut report = FailureReport::default();
        let mut output = vec!["running 2 tests", "test a ... FAILED", "", "failures:", "", "---- a stdout ----"];
        let many: Vec<String> = (0..50).map(|i| format!("line {i}")).collect();
        output.extend(many.iter().map(String::as_str));
        output.extend(["thread 'a' panicked at x.rs:1:1:", "why", "", "---- b stdout ----", "short", ""]);
        output.extend(["failures:", "    a", "    b", "test result: FAILED. 0 passed; 2 failed"]);
        for line in output {
            report.add_line(line);
        }
        let lines = report.lines();
        assert_eq!(lines.first().map(String::as_str), Some("---- a stdout ----"));
        assert!(lines.contains(&"why".to_owned()) && !lines.contains(&"line 0".to_owned()), "{lines:?}");
        assert_eq!(lines[lines.len() - 2..], ["---- b stdout ----".to_owned(), "short".to_owned()]);
        assert_eq!(lines.len(), FailureReport::TAIL + 2, "a: its header and 39 lines (a trailing blank cut), b: 2");
    }

    #[test]
    fn leaves_out_the_frames_of_a_backtrace() {
        let mut report = FailureReport::default();
        let mut output =
            vec!["---- a stdout ----", "thread 'a' panicked at x.rs:1:1:", "the reason", "stack backtrace:"];
        let frames: Vec<String> =
            (0..60).map(|i| format!("  {i:>2}: tokio::frame{i}\n             at x.rs:{i}")).collect();
        output.extend(frames.iter().map(String::as_str));
        output.extend(["note: Some details are omitted, run with `RUST_BACKTRACE=full`.", "after", "", "failures:"]);
        for line in output {
            report.add_line(line);
        }
        assert_eq!(
            report.lines(),
            [
                "---- a stdout ----",
                "thread 'a' panicked at x.rs:1:1:",
                "the reason",
                "stack backtrace: (its frames left out here)",
                "after"
            ]
        );
    }
}
