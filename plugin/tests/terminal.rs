//! The session client at a real terminal (`attach::local`): this test binary runs itself again
//! as `connect` would run, under a PTY pair, against a real holder: the terminal raw while
//! attached and restored after, its size in the hello and again on SIGWINCH, the detach keys,
//! and the last line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kubectl_myownshell::attach::local::{self, Raw};
use kubectl_myownshell::attach::{self, Options, Request, farewell};
use myownshell_session::protocol::Which;
use support::{BINARY_ENV, DEADLINE, Holder, Local};

/// Set in the child: the holder's socket folder.
const CHILD: &str = "KUBECTL_MYOWNSHELL_TEST_SOCKET_DIR";

/// Not a test by itself: in the child (run by the test below under a PTY), `connect`'s part
/// with the local transport; exits with `connect`'s code, its last line on stderr.
#[tokio::test]
async fn child_connects_at_its_terminal() {
    let Some(socket_dir) = std::env::var_os(CHILD) else { return };
    let mut transport = Local {
        socket_dir: socket_dir.into(),
        user: "alice".into(),
        pids: Default::default(),
        down: Default::default(),
    };
    let screen = local::is_screen();
    let options = Options {
        shell: "web".into(),
        come_back: "kubectl myownshell connect web".into(),
        detach_keys: vec![0x10, 0x11],
        grace: Duration::from_secs(5),
        screen,
    };
    let request = Request { which: Which::New { command: None }, read_only: false, size: local::window() };
    let first = attach::open(&mut transport, &request).await.unwrap();
    let mut terminal = local::terminal(screen).unwrap();
    let raw = screen.then(Raw::enter);
    let ending = attach::run(&mut transport, first, request, &options, &mut terminal).await;
    drop(raw);
    let (line, code) = farewell(&ending, &options);
    eprintln!("{}", line.unwrap_or_default());
    std::process::exit(i32::from(code));
}

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
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => panic!("no {text:?} within {DEADLINE:?}: {shown:?}"),
        }
    }
}

fn canonical(file: &std::fs::File) -> bool {
    rustix::termios::tcgetattr(file).unwrap().local_modes.contains(rustix::termios::LocalModes::ICANON)
}

#[tokio::test]
async fn at_a_terminal_raw_sized_detached_and_restored() {
    let holder = Holder::start().await;
    let (pty, pts) = pty_process::blocking::open().unwrap();
    pty.resize(pty_process::Size::new(33, 111)).unwrap();
    let mut child = pty_process::blocking::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_connects_at_its_terminal", "--nocapture", "--test-threads=1"])
        .env(CHILD, holder.socket_dir())
        .env(BINARY_ENV, support::binary())
        .spawn(pts)
        .unwrap();
    let slave_path = std::fs::read_link(format!("/proc/{}/fd/0", child.id())).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
        .open(&slave_path)
        .unwrap();
    let master: std::os::fd::OwnedFd = pty.into();
    let mut keys = std::fs::File::from(master.try_clone().unwrap());
    let output = chunks(std::fs::File::from(master));
    let mut seen = Vec::new();
    keys.write_all(b"stty size; echo tty-$((40+2))\r").unwrap();
    let shown = until(&output, &mut seen, "tty-42");
    assert!(shown.contains("33 111"), "the hello had the window's size: {shown:?}");
    assert!(!canonical(&slave), "the terminal is raw while attached");

    let size = rustix::termios::Winsize { ws_row: 40, ws_col: 120, ws_xpixel: 0, ws_ypixel: 0 };
    rustix::termios::tcsetwinsize(&slave, size).unwrap();
    // SIGWINCH reaches the child (its terminal's foreground), whose Resize reaches the session:
    // asked again until the session has the new size (the keys may overtake the signal).
    for attempt in 0.. {
        keys.write_all(format!("stty size; echo asked-{attempt}-$((1+1))\r").as_bytes()).unwrap();
        let shown = until(&output, &mut seen, &format!("asked-{attempt}-2"));
        if shown.contains("40 120") {
            break;
        }
        let tail: String = shown.chars().rev().take(300).collect::<Vec<_>>().into_iter().rev().collect();
        assert!(attempt < 50, "the new size never reached the session: …{tail:?}");
    }

    keys.write_all(b"\x10\x11").unwrap();
    let said = until(&output, &mut seen, "to come back");
    assert!(said.contains("detached from session") && said.contains("--session"), "{said}");
    let status = support::eventually("the child to exit", || child.try_wait().unwrap()).await;
    assert!(status.success(), "{status:?}");
    assert!(canonical(&slave), "the terminal was left raw");
    let sessions = holder.list().await;
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(sessions[0].attached.is_empty() && said.contains(&sessions[0].id), "detached, the session goes on: {said}");
}
