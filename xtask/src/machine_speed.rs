//! How fast this machine's CPU is today, measured before `cargo xtask test` starts its lanes and
//! said again under its summary: the CPU time of one `kubectl version --client`. kubectl is the
//! process a run starts most (3,911 times in a warm run), and its start-up is nearly all of what
//! it costs. The same machine type has given the same process 2.3 times the CPU on a slow day
//! (docs/benchmarks.md, 2026-12-02: kubectl's runs averaged 0.11 s of CPU before 07:00 UTC, when
//! warm runs took 17 to 19 minutes, and 0.047 s after 07:20 UTC, when they took 13 to 14). With
//! this figure beside the wall time, a slow run is read as the machine's or the code's.
//!
//! Read from the children's CPU time of `/proc/self/stat` (`cutime`, `cstime`), which the kernel
//! adds to when a child is waited for. Measured while no other child of this process runs.
//! Hand-read for the same reason as `/proc/stat` in `machine_cpu.rs`: two fields of one line.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How many runs are timed together: one run is about 5 clock ticks, so ten read to about 2%.
const RUNS: u32 = 10;

/// Linux reports process times in USER_HZ, which its ABI fixes at 100 a second (`man 5 proc`).
const TICKS_PER_SECOND: u64 = 100;

/// The CPU one `kubectl version --client` took, the mean of [`RUNS`] runs; `None` where kubectl
/// or `/proc/self/stat` could not be used.
pub fn kubectl_run_cpu(kubectl: &Path) -> Option<Duration> {
    let before = children_ticks()?;
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
    let ticks = children_ticks()?.checked_sub(before)?;
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND) / RUNS)
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

fn children_ticks() -> Option<u64> {
    parse_children_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// `cutime + cstime` of a `/proc/PID/stat` line: its 16th and 17th fields, counted after the
/// command name in parentheses, which may itself hold spaces and parentheses.
fn parse_children_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // The first field after the name is the 3rd (the state).
    let mut fields = after_name.split_whitespace().skip(16 - 3);
    let cutime: u64 = fields.next()?.parse().ok()?;
    let cstime: u64 = fields.next()?.parse().ok()?;
    Some(cutime + cstime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_children_ticks_are_read_after_the_command_name() {
        // Fields 3 to 17: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime, then the rest.
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 130 40 20 0 1";
        for (stat, ticks) in [
            (format!("42 (xtask) {tail}"), Some(170)),
            (format!("42 (a (b) c) {tail}"), Some(170)),
            (format!("42 (x) y) {tail}"), Some(170)),
            ("42 (xtask) S 1 2 3".to_owned(), None),
            ("42 xtask S 1 2 3 4 5 6 7 8 9 10 11 12 130 40".to_owned(), None),
            (format!("42 (xtask) {}", tail.replace("130", "-")), None),
            (String::new(), None),
        ] {
            assert_eq!(parse_children_ticks(&stat), ticks, "{stat:?}");
        }
    }

    #[test]
    fn a_real_run_is_counted() {
        // `true` costs next to nothing: the reading is a number, not an error.
        let before = children_ticks().expect("/proc/self/stat");
        Command::new("true").status().expect("true");
        assert!(children_ticks().expect("/proc/self/stat") >= before);
    }

    #[test]
    fn the_line_names_the_figure_or_why_there_is_none() {
        assert!(describe(Some(Duration::from_millis(47))).contains("took 47 ms of CPU (the mean of 10)"));
        assert!(describe(None).contains("not measured"));
    }
}
