//! Children of the harness die with the process that started them: on SIGKILL and on panic.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use myownshell_envtest::process::is_alive as alive;

fn start_probe(mode: &str) -> (std::process::Child, Vec<u32>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_envtest-probe"))
        .arg(mode)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = BufReader::new(stdout).lines().next().unwrap().unwrap();
    let pids: Vec<u32> = line.strip_prefix("pids ").unwrap().split(' ').map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 2, "{line}");
    assert!(pids.iter().all(|p| alive(*p)), "children not running: {pids:?}");
    (child, pids)
}

fn assert_all_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if pids.iter().all(|p| !alive(*p)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    for pid in &left {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    panic!("orphans left behind after 15s: {left:?}");
}

#[test]
fn children_die_when_the_test_process_is_sigkilled() {
    let (mut child, pids) = start_probe("wait");
    child.kill().unwrap(); // SIGKILL: no destructor, no signal handler runs
    child.wait().unwrap();
    assert_all_gone(&pids);
}

#[test]
fn children_die_when_the_test_process_panics() {
    let (mut child, pids) = start_probe("panic");
    // Running, as seen: now it may panic.
    writeln!(child.stdin.take().unwrap(), "go").unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert_all_gone(&pids);
}
