//! Running cargo from xtask: the `cargo` it was started by, whether this is CI, and `cargo test`
//! with its result lines added up (shared by `test` and `e2e`).

use std::io::{BufRead, BufReader};
use std::process::Command;

use anyhow::{Context, bail};

pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
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
