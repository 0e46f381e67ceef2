//! What the session client's tests share: the built `myownshell-session` (built once by cargo,
//! as the session crate's own tests run it), a holder serving on a temporary socket folder
//! (ended on drop, SIGTERM then SIGKILL, so no process outlives a test), a transport that runs
//! `myownshell-session attach --framed` locally with the command line the plugin's exec runs,
//! a terminal of channels, and waiting with deadlines.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use kubectl_myownshell::attach::step::CLEAR;
use kubectl_myownshell::attach::{Down, Joined, Link, OpenError, Request, Terminal, Transport, framed};
use myownshell_session::protocol::{Hello, SessionInfo, Size, VERSION};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

/// How long any one state may take to come about.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// Where a test's child process is told the holder's binary is.
pub const BINARY_ENV: &str = "KUBECTL_MYOWNSHELL_TEST_SESSION_BINARY";

/// The session holder's binary, built by cargo once per test process (a child is told where).
pub fn binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        if let Some(told) = std::env::var_os(BINARY_ENV) {
            return PathBuf::from(told);
        }
        // TARGET/PROFILE/deps/<this test> → TARGET/PROFILE/myownshell-session
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(Path::parent).unwrap();
        let target_dir = profile_dir.parent().unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = std::process::Command::new(cargo);
        // The whole workspace selected, as `cargo test --workspace` selects it: the binary is the
        // one already built, left where it is. With `-p myownshell-session` cargo unified
        // features over that package alone, built a second binary and put it in place of the
        // workspace's; the session crate's tests, run beside these (2026-12-02), read it as it
        // changed ("install_copies_the_binary": the copy differed from the original).
        build.args(["build", "--quiet", "--workspace", "--bin", "myownshell-session", "--target-dir"]);
        build.arg(target_dir);
        if profile_dir.ends_with("release") {
            build.arg("--release");
        }
        let status = build.status().expect("running cargo build -p myownshell-session");
        assert!(status.success(), "cargo build -p myownshell-session: {status}");
        let binary = profile_dir.join("myownshell-session");
        assert!(binary.exists(), "{} was not built", binary.display());
        binary
    })
}

/// Poll `check` until it gives a value, or fail naming `what`.
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {DEADLINE:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A holder running the built binary.
pub struct Holder {
    child: std::process::Child,
    pub dir: tempfile::TempDir,
}

impl Holder {
    /// `serve` wrapping `sleep 600` (the container's command); returns once its socket is there.
    pub async fn start() -> Holder {
        let dir = tempfile::tempdir().unwrap();
        let child = std::process::Command::new(binary())
            .arg("serve")
            .arg("--socket-dir")
            .arg(dir.path().join("run"))
            .args(["--shell", "/bin/sh", "--", "sleep", "600"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let holder = Holder { child, dir };
        let socket = holder.socket_dir().join(myownshell_session::SOCKET_NAME);
        eventually("the holder's socket", || std::os::unix::net::UnixStream::connect(&socket).ok()).await;
        holder
    }

    pub fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// The sessions, as `list --json` says (the plugin's `sessions` runs it through its exec).
    pub async fn list(&self) -> Vec<SessionInfo> {
        let argv = myownshell_session::exec::list();
        let out = tokio::process::Command::new(binary())
            .arg(&argv[1])
            .arg("--socket-dir")
            .arg(self.socket_dir())
            .args(&argv[2..])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "list: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// A transport to this holder as `user`.
    pub fn transport(&self, user: &str) -> Local {
        Local { socket_dir: self.socket_dir(), user: user.to_owned(), pids: Arc::default(), down: Arc::default() }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        signal(self.child.id(), rustix::process::Signal::TERM);
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn signal(pid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// `attach --framed` run here as the plugin's exec runs it in the pod: the same command line
/// (`myownshell_session::exec::attach`), with the test's socket folder.
pub struct Local {
    pub socket_dir: PathBuf,
    pub user: String,
    /// Every attach process started, by pid.
    pub pids: Arc<Mutex<Vec<u32>>>,
    /// While set, opening fails as it would with the network down.
    pub down: Arc<AtomicBool>,
}

impl Transport for Local {
    async fn open(&mut self, request: &Request) -> Result<(Link, Joined), OpenError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(OpenError::Failed("the network is down".into()));
        }
        let hello = Hello {
            version: VERSION,
            user: self.user.clone(),
            session: request.which.clone(),
            read_only: request.read_only,
            size: request.size,
        };
        let argv = myownshell_session::exec::attach(&hello);
        assert_eq!(argv[..3], [myownshell_session::BINARY, "attach", "--framed"]);
        let mut child = tokio::process::Command::new(binary())
            .arg("attach")
            .arg("--socket-dir")
            .arg(&self.socket_dir)
            .args(&argv[2..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| OpenError::Failed(e.to_string()))?;
        self.pids.lock().unwrap().push(child.id().unwrap());
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let end = move |_seen: bool, error: Option<String>| async move {
            let status = child.wait().await;
            Down::Dropped(format!("the attach ended ({status:?}, {error:?})"))
        };
        framed::spawn(stdout, stdin, end).joined().await
    }
}

/// The person's side of a test terminal.
pub struct Person {
    pub keyboard: Option<mpsc::Sender<Vec<u8>>>,
    pub window: mpsc::Sender<Size>,
    pub signals: mpsc::Sender<i32>,
    pub screen: Arc<Mutex<Vec<u8>>>,
    pub said: Arc<Mutex<Vec<String>>>,
}

/// A terminal of channels, and the person at it.
pub fn terminal() -> (Terminal<Screen>, Person) {
    let (keyboard, input) = mpsc::channel(16);
    let (window, resized) = mpsc::channel(4);
    let (signals, stop) = mpsc::channel(4);
    let screen = Arc::new(Mutex::new(Vec::new()));
    let said = Arc::new(Mutex::new(Vec::new()));
    let lines = said.clone();
    let terminal = Terminal {
        input,
        resized,
        stop,
        output: Screen(screen.clone()),
        lines: Box::new(move |line: &str| lines.lock().unwrap().push(line.to_owned())),
    };
    (terminal, Person { keyboard: Some(keyboard), window, signals, screen, said })
}

impl Person {
    pub async fn type_keys(&self, keys: &str) {
        self.keyboard.as_ref().unwrap().send(keys.as_bytes().to_vec()).await.unwrap();
    }

    /// The screen since it was last cleared (all of it, if never).
    pub fn redrawn(&self) -> String {
        let screen = self.screen.lock().unwrap();
        let start = screen.windows(CLEAR.len()).rposition(|w| w == CLEAR).map_or(0, |at| at + CLEAR.len());
        String::from_utf8_lossy(&screen[start..]).into_owned()
    }

    pub fn cleared(&self) -> bool {
        self.screen.lock().unwrap().windows(CLEAR.len()).any(|w| w == CLEAR)
    }

    /// Wait until the screen (since it was last cleared) holds `text`.
    pub async fn until_screen(&self, text: &str) -> String {
        eventually(&format!("{text:?} on the screen"), || Some(self.redrawn()).filter(|s| s.contains(text))).await
    }

    /// Wait until a line said contains `words`.
    pub async fn until_said(&self, words: &str) -> String {
        eventually(&format!("a line with {words:?}"), || {
            self.said.lock().unwrap().iter().find(|l| l.contains(words)).cloned()
        })
        .await
    }

    pub fn lines_with(&self, words: &str) -> usize {
        self.said.lock().unwrap().iter().filter(|l| l.contains(words)).count()
    }
}

/// The screen: what is written to it, kept.
pub struct Screen(Arc<Mutex<Vec<u8>>>);

impl AsyncWrite for Screen {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
