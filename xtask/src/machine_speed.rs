//! How fast this machine's CPU is today, measured before `cargo xtask test` starts its lanes and
//! said again under its summary: the CPU time of one `kubectl version --client`. kubectl is the
//! process a run starts most (3,911 times in a warm run), and its start-up is nearly all of what
//! it costs. The same machine type has given the same process 2.3 times the CPU on a slow day
//! (docs/benchmarks.md, 2026-12-02: kubectl's runs averaged 0.11 s of CPU before 07:00 UTC, when
//! warm runs took 17 to 19 minutes, and 0.047 s after 07:20 UTC, when they took 13 to 14). With
//! this figure beside the wall time, a slow run is read as the machine's or the code's.
//!
//! Read from the CPU time of this process's waited-for children
//! ([`myownshell_envtest::process::waited_children_cpu_time`]), measured while no other child of
//! this process runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use myownshell_envtest::process::waited_children_cpu_time;

/// How many runs are timed together: one run is about 5 clock ticks, so ten read to about 2%.
const RUNS: u32 = 10;

/// The CPU one `kubectl version --client` took, the mean of [`RUNS`] runs; `None` where kubectl
/// or `/proc/self/stat` could not be used.
pub fn kubectl_run_cpu(kubectl: &Path) -> Option<Duration> {
    let children = || waited_children_cpu_time(std::process::id());
    let before = children()?;
    for _ in 0..RUNS {
        let status = Command::new(kubectl)
            .args(["version", "--client"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
    }
    Some(children()?.checked_sub(before)? / RUNS)
}

/// The line said before the lanes start and again after the summary.
pub fn describe(cpu: Option<Duration>) -> String {
    match cpu {
        Some(cpu) => format!(
            "the machine's speed: one `kubectl version --client` took {} ms of CPU (the mean of {RUNS}); kubectl's runs \
             averaged 47 ms on a day a warm run took 13 to 14 minutes, 110 ms on one it took 17 to 19 \
             (docs/benchmarks.md)",
            cpu.as_millis()
        ),
        None => "the machine's speed: not measured (kubectl or /proc/self/stat could not be used)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_figure_or_why_there_is_none() {
        assert!(describe(Some(Duration::from_millis(47))).contains("took 47 ms of CPU (the mean of 10)"));
        assert!(describe(None).contains("not measured"));
    }
}
