//! The binary's clients against a real holder: `attach` at a TTY (a PTY pair from
//! `pty-process`), through a pipe, and `--framed` for the gateway; `list`; and `install`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use myownshell_session::protocol::{ClientMessage, Decoder, HolderMessage, SessionInfo, Size};
use support::{BINARY, DEADLINE, Holder, wait_for};

/// Chunks read from `reader` on a thread, to wait for with deadlines.
fn chunks(mut reader: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    rx
}

/// Read `rx` into `seen` until it holds `text`.
fn until(rx: &mpsc::Receiver<Vec<u8>>, seen: &mut Vec<u8>, text: &str) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let shown = String::from_utf8_lossy(seen).into_owned();
        if shown.contains(text) {
            return shown;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => panic!("no {text:?} within {DEADLINE:?}: {shown:?}"),
        }
    }
}

fn lflag_canonical(file: &std::fs::File) -> bool {
    rustix::termios::tcgetattr(file).unwrap().local_modes.contains(rustix::termios::LocalModes::ICANON)
}

/// A person at `kubectl exec -it`: raw mode while attached, restored after; the detach keys
/// leave the session running and say how to come back.
#[test]
fn attach_at_a_tty_detaches_with_the_keys_and_restores_the_terminal() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (pty, pts) = pty_process::blocking::open().unwrap();
    pty.resize(pty_process::Size::new(33, 111)).unwrap();
    let mut child = pty_process::blocking::Command::new(BINARY)
        .arg("attach")
        .arg("--socket-dir")
        .arg(holder.socket_dir())
        .args(["--user", "alice", "--new"])
        .spawn(pts)
        .unwrap();
    let slave_path = std::fs::read_link(format!("/proc/{}/fd/0", child.id())).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
        .open(&slave_path)
        .unwrap();
    let master: std::os::fd::OwnedFd = pty.into();
    let mut writer = std::fs::File::from(master.try_clone().unwrap());
    let output = chunks(std::fs::File::from(master));
    let mut seen = Vec::new();
    writer.write_all(b"stty size; echo tty-$((40+2))\r").unwrap();
    until(&output, &mut seen, "tty-42");
    assert!(String::from_utf8_lossy(&seen).contains("33 111"), "the session has the terminal's size");
    assert!(!lflag_canonical(&slave), "the local terminal is not raw while attached");
    writer.write_all(b"\x10\x11").unwrap();
    let status = wait_for("attach to exit", DEADLINE, || child.try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    let said = until(&output, &mut seen, "attach --id");
    assert!(said.contains("detached from session"), "{said}");
    assert!(lflag_canonical(&slave), "the local terminal was left raw");
    let list = wait_for("the session detached", DEADLINE, || {
        let list = holder.list();
        list.first().is_some_and(|s| s.attached.is_empty()).then_some(list)
    });
    assert!(said.contains(&list[0].id), "{said}");
}

/// Through a pipe: stdin is input, its end the terminal's end-of-file, the exit code the
/// shell's.
#[test]
fn attach_through_a_pipe_exits_with_the_shells_code() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    // (stdin, exit code, output)
    let cases: &[(&[u8], i32, &str)] =
        &[(b"echo piped-$((1+2))\nexit 4\n", 4, "piped-3"), (b"echo until-the-end-$((2+2))\n", 0, "until-the-end-4")];
    for (input, code, shown) in cases {
        let mut child = Command::new(BINARY)
            .arg("attach")
            .arg("--socket-dir")
            .arg(holder.socket_dir())
            .args(["--user", "alice", "--new"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(*code), "{output:?}");
        assert!(String::from_utf8_lossy(&output.stdout).contains(shown), "{output:?}");
    }
}

/// `--framed`, as the gateway runs it: its own hello from the flags, then frames relayed both
/// ways through pipes; stdin's end detaches, the session goes on.
#[test]
fn attach_framed_relays_frames_and_detaches_at_the_end_of_stdin() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let mut child = Command::new(BINARY)
        .arg("attach")
        .arg("--socket-dir")
        .arg(holder.socket_dir())
        .args(["--framed", "--user", "alice", "--new", "--cols", "90", "--rows", "20"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = chunks(child.stdout.take().unwrap());
    let mut decoder = Decoder::new();
    let mut next = || -> HolderMessage {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(frame) = decoder.next_frame().unwrap() {
                return HolderMessage::decode(frame).unwrap();
            }
            decoder.feed(&stdout.recv_timeout(deadline.saturating_duration_since(Instant::now())).unwrap());
        }
    };
    let HolderMessage::Attached(attached) = next() else { panic!("no Attached first") };
    assert_eq!((attached.cols, attached.rows, attached.user.as_str()), (90, 20, "alice"));
    stdin
        .write_all(&ClientMessage::Input(b"stty size; seq 30000; echo framed-$((2+3))\r".to_vec()).encode().unwrap())
        .unwrap();
    let (mut output, mut frames) = (String::new(), 0);
    while !output.contains("framed-5") {
        if let HolderMessage::Output(bytes) = next() {
            frames += 1;
            output.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    assert!(output.contains("20 90"), "{output}");
    assert!(frames < 200, "{frames} frames for 30,000 lines");
    drop(stdin);
    let status = wait_for("attach --framed to exit", DEADLINE, || child.try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    let list = wait_for("the session detached", DEADLINE, || {
        let list = holder.list();
        list.first().is_some_and(|s| s.attached.is_empty()).then_some(list)
    });
    assert_eq!(list[0].id, attached.id);
}

/// `--framed` whose session exits while input is still coming (the gateway relays keys typed
/// after `exit`): the holder stops reading, the input has nowhere to go, and the session's
/// `Exited` frame still reaches stdout, with exit code 0: the gateway tells an exit, not a
/// broken connection.
#[test]
fn attach_framed_relays_the_exit_even_while_input_still_comes() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let mut child = Command::new(BINARY)
        .arg("attach")
        .arg("--socket-dir")
        .arg(holder.socket_dir())
        .args(["--framed", "--user", "alice", "--new"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&ClientMessage::Input(b"exit 3\r".to_vec()).encode().unwrap()).unwrap();
    // Keys go on coming after the exit, until the pipe breaks (the client has gone).
    let more = ClientMessage::Input(vec![b'x'; 16 * 1024]).encode().unwrap();
    let typing = std::thread::spawn(move || {
        let started = Instant::now();
        while started.elapsed() < DEADLINE && stdin.write_all(&more).is_ok() {}
    });
    let output = child.wait_with_output().unwrap();
    typing.join().unwrap();
    let mut decoder = Decoder::new();
    decoder.feed(&output.stdout);
    let mut exited = None;
    while let Some(frame) = decoder.next_frame().unwrap() {
        if let HolderMessage::Exited(e) = HolderMessage::decode(frame).unwrap() {
            exited = Some(e.code);
        }
    }
    assert_eq!(exited, Some(3), "no Exited frame on stdout; stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
}

/// `list`: a table for people, JSON for programs.
#[test]
fn list_shows_a_table_and_json() {
    let holder = Holder::start(&[], &["sleep", "600"]);
    let (mut client, attached) = holder.new_session("alice", &[], Size { cols: 80, rows: 24 });
    client.input("echo typed\r");
    client.until_output("typed");
    let run = |json: bool| {
        let mut command = Command::new(BINARY);
        command.arg("list").arg("--socket-dir").arg(holder.socket_dir());
        if json {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let table = run(false);
    assert!(table.starts_with("ID"), "{table}");
    assert!(table.contains(&attached.id) && table.contains("alice (driving)") && table.contains("/bin/sh"), "{table}");
    let sessions: Vec<SessionInfo> = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].id.as_str(), sessions[0].pid), (attached.id.as_str(), attached.pid));
    assert!(sessions[0].last_input.is_some() && sessions[0].last_output.is_some());
}

/// `install`: the binary copies itself, read-only and executable, leaving no temporary file.
#[test]
fn install_copies_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("myownshell-session");
    let status = Command::new(BINARY).arg("install").arg(&dest).status().unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read(&dest).unwrap(), std::fs::read(BINARY).unwrap());
    assert_eq!(std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777, 0o555);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file is left");
    let version = Command::new(&dest).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("myownshell-session"), "{version:?}");
}
