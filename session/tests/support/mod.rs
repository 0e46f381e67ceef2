//! What the holder's tests share: the built binary as a holder on a temporary socket folder
//! (ended on drop, SIGTERM then SIGKILL, so no process outlives a test), a protocol client over
//! a blocking socket, and waiting with deadlines.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use myownshell_session::protocol::{
    Attached, ClientMessage, Decoder, Hello, HolderMessage, SessionInfo, Size, VERSION, Which,
};

pub const BINARY: &str = env!("CARGO_BIN_EXE_myownshell-session");

/// How long any one state may take to come about.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// Poll `check` until it gives a value, or fail naming `what`.
pub fn wait_for<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A holder running the built binary.
pub struct Holder {
    child: Child,
    pub dir: tempfile::TempDir,
}

impl Holder {
    /// `serve` with `flags`, wrapping `command`; returns once its socket answers.
    pub fn start(flags: &[&str], command: &[&str]) -> Holder {
        let dir = tempfile::tempdir().unwrap();
        let socket_dir = dir.path().join("run");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg("--socket-dir")
            .arg(&socket_dir)
            .args(flags)
            .arg("--")
            .args(command)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let holder = Holder { child, dir };
        let socket = socket_dir.join(myownshell_session::SOCKET_NAME);
        wait_for("the holder's socket", DEADLINE, || UnixStream::connect(&socket).ok());
        holder
    }

    pub fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// A client connected to it.
    pub fn client(&self) -> Client {
        Client::connect(&self.socket_dir())
    }

    /// A new session of `user` running `command` (the shell if empty), attached.
    pub fn new_session(&self, user: &str, command: &[&str], size: Size) -> (Client, Attached) {
        let mut client = self.client();
        let command = (!command.is_empty()).then(|| command.iter().map(|s| s.to_string()).collect());
        let attached = client.hello(hello(user, Which::New { command }, false, Some(size)));
        (client, attached)
    }

    /// Attach to session `id`.
    pub fn attach(&self, user: &str, id: &str, read_only: bool) -> (Client, Attached) {
        let mut client = self.client();
        let attached = client.hello(hello(user, Which::Attach { id: id.into() }, read_only, None));
        (client, attached)
    }

    /// The sessions, as `list` shows them.
    pub fn list(&self) -> Vec<SessionInfo> {
        let mut client = self.client();
        client.send(&ClientMessage::List);
        match client.recv() {
            Some(HolderMessage::Sessions(list)) => list,
            other => panic!("list answered {other:?}"),
        }
    }

    /// Send SIGTERM; its exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        signal(self.pid(), rustix::process::Signal::TERM);
        self.wait(DEADLINE).expect("the holder did not exit after SIGTERM")
    }

    fn wait(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            signal(self.pid(), rustix::process::Signal::TERM);
            if self.wait(DEADLINE).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

pub fn signal(pid: i32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

pub fn hello(user: &str, session: Which, read_only: bool, size: Option<Size>) -> Hello {
    Hello { version: VERSION, user: user.into(), session, read_only, size }
}

/// A protocol client over a blocking socket.
pub struct Client {
    pub stream: UnixStream,
    decoder: Decoder,
    /// Output received so far.
    pub output: Vec<u8>,
    /// Everything else received so far.
    pub messages: Vec<HolderMessage>,
}

impl Client {
    pub fn connect(dir: &Path) -> Client {
        let stream = UnixStream::connect(dir.join(myownshell_session::SOCKET_NAME)).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        Client { stream, decoder: Decoder::new(), output: Vec::new(), messages: Vec::new() }
    }

    pub fn send(&mut self, message: &ClientMessage) {
        self.stream.write_all(&message.encode().unwrap()).unwrap();
    }

    pub fn input(&mut self, text: &str) {
        self.send(&ClientMessage::Input(text.as_bytes().to_vec()));
    }

    /// The next message within the deadline; `None` once the holder closed.
    pub fn recv(&mut self) -> Option<HolderMessage> {
        self.recv_within(DEADLINE).unwrap_or_else(|| panic!("no message within {DEADLINE:?}"))
    }

    /// The next message within `within`: `None` if none came, `Some(None)` if the holder closed.
    pub fn recv_within(&mut self, within: Duration) -> Option<Option<HolderMessage>> {
        let deadline = Instant::now() + within;
        let mut buf = [0u8; 64 * 1024];
        loop {
            if let Some(frame) = self.decoder.next_frame().unwrap() {
                return Some(Some(HolderMessage::decode(frame).unwrap()));
            }
            match self.stream.read(&mut buf) {
                Ok(0) => return Some(None),
                Ok(n) => self.decoder.feed(&buf[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(None),
                Err(e) => panic!("reading from the holder: {e}"),
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    }

    /// Send the hello; the `Attached` answer.
    pub fn hello(&mut self, hello: Hello) -> Attached {
        self.send(&ClientMessage::Hello(hello));
        match self.recv() {
            Some(HolderMessage::Attached(attached)) => attached,
            other => panic!("the hello was answered with {other:?}"),
        }
    }

    /// Receive until the output holds `text` (keeping every message), or fail.
    pub fn until_output(&mut self, text: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let output = String::from_utf8_lossy(&self.output).into_owned();
            if output.contains(text) {
                return output;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {text:?} in the output within {DEADLINE:?}: {output:?} {:?}", self.messages);
            match self.recv_within(left) {
                Some(Some(message)) => self.keep(message),
                Some(None) => panic!("the holder closed before {text:?}: {output:?} {:?}", self.messages),
                None => {}
            }
        }
    }

    /// Receive until a message matches `pick`, keeping the others, or fail.
    pub fn until<T>(&mut self, what: &str, mut pick: impl FnMut(&HolderMessage) -> Option<T>) -> T {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {what} within {DEADLINE:?}: {:?}", self.messages);
            match self.recv_within(left) {
                Some(Some(message)) => {
                    if let Some(found) = pick(&message) {
                        return found;
                    }
                    self.keep(message);
                }
                Some(None) => panic!("the holder closed before {what}: {:?}", self.messages),
                None => {}
            }
        }
    }

    fn keep(&mut self, message: HolderMessage) {
        match message {
            HolderMessage::Output(bytes) => self.output.extend(bytes),
            other => self.messages.push(other),
        }
    }

    /// Whether the holder closes the connection within `within` (reading what comes before).
    pub fn closed_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            match self.recv_within(deadline.saturating_duration_since(Instant::now())) {
                Some(None) => return true,
                Some(Some(message)) => self.keep(message),
                None => {}
            }
        }
        false
    }
}

/// The live processes of session `sid`, from `/proc`.
pub fn session_processes(sid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((head, tail)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = tail.split_whitespace().collect();
        let (Ok(pid), Some(state), Some(Ok(session))) = (
            head.split(" (").next().unwrap_or("").trim().parse::<i32>(),
            fields.first(),
            fields.get(3).map(|s| s.parse::<i32>()),
        ) else {
            continue;
        };
        if session == sid && *state != "Z" {
            found.push(pid);
        }
    }
    found
}

/// Whether process `pid` still exists (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, tail)| tail.split_whitespace().next() != Some("Z")))
        .unwrap_or(false)
}

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
