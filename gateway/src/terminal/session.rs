//! One terminal: a `sh` running in a shell's pod through one exec, which outlives the browser
//! tab that opened it by the grace period.
//!
//! The exec's output goes to the page watching (at most one; a second tab takes over) and into
//! the scrollback; with no page watching it goes only to the scrollback, and if no page comes
//! back within the grace period the exec is closed. The page's keystrokes and resizes go to the
//! exec unchanged. Output waits for a slow page (backpressure reaches the pod), never piles up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::scrollback::Scrollback;
use crate::exec::channel::{self, FromPod};
use crate::exec::upgrade::ExecSocket;
use crate::recording::writer::{Event, Recording};

/// Who a terminal belongs to: only the same user (name and uid) may reattach.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserKey {
    /// The user name.
    pub name: String,
    /// The uid TokenReview gave, if any.
    pub uid: Option<String>,
}

/// How a terminal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The program exited with this code.
    Exited(i32),
    /// The exec failed (the apiserver's or kubelet's words).
    Failed(String),
    /// The gateway closed it: why.
    Closed(String),
}

/// What the page watching a terminal is sent.
#[derive(Debug, Clone)]
pub enum ToPage {
    /// Output to draw.
    Output(Bytes),
    /// A line for the user from the gateway.
    Notice(String),
    /// The terminal ended.
    Ended(Ending),
    /// Another page took the terminal over.
    Replaced,
    /// The shell's lifetime will stop it soon (the `Stopping` condition's message), and whether
    /// this user may extend it (they own it).
    Stopping {
        /// What the condition says.
        line: String,
        /// Whether to offer the extend button.
        can_extend: bool,
    },
}

/// Where a terminal runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The shell's namespace.
    pub namespace: String,
    /// The shell.
    pub shell: String,
    /// The pod the exec runs in.
    pub pod: String,
    /// The shell's uid when the terminal opened (its activity is recorded only on that shell,
    /// never on one made again under the same name).
    pub uid: Option<String>,
}

struct Viewer {
    id: u64,
    tx: mpsc::Sender<ToPage>,
}

struct State {
    scrollback: Scrollback,
    viewer: Option<Viewer>,
    /// Since when no page watches (None while one does).
    detached_since: Option<Instant>,
    ending: Option<Ending>,
    /// When someone last typed, or saw output.
    last_activity: Timestamp,
    /// The last notice of a coming stop told to a page, not to repeat it.
    told: Option<String>,
    /// The size last sent to the pod.
    size: Option<(u16, u16)>,
}

/// One terminal.
pub struct Terminal {
    /// Its id, which a page reattaches with.
    pub id: String,
    /// Whose it is.
    pub user: UserKey,
    /// Who opened it and with what, to ask again whether they still may ([`crate::access`]).
    pub credential: crate::access::Credential,
    /// Where it runs.
    pub place: Place,
    to_pod: mpsc::Sender<Vec<u8>>,
    /// Where output and resizes are recorded, if the session is.
    recording: Option<Recording>,
    state: Mutex<State>,
    ended: CancellationToken,
    next_viewer: AtomicU64,
}

/// What a page gets when it attaches: its viewer id, its channel, and the screen so far.
pub struct Attached {
    /// Passed back to [`Terminal::detach`].
    pub viewer: u64,
    /// What to send the page.
    pub rx: mpsc::Receiver<ToPage>,
    /// The recent output to draw first.
    pub replay: Vec<u8>,
}

/// Frames queued for the pod, and messages queued for a page, before senders wait.
const QUEUE: usize = 64;

impl Terminal {
    /// A terminal over an open exec; `on_end` runs once when it ends (to forget it).
    pub fn start(
        id: String,
        credential: crate::access::Credential,
        place: Place,
        exec: ExecSocket,
        scrollback: usize,
        recording: Option<Recording>,
        on_end: impl FnOnce(&Terminal) + Send + 'static,
    ) -> Arc<Self> {
        let (to_pod, frames) = mpsc::channel(QUEUE);
        let user = UserKey { name: credential.user.name.clone(), uid: credential.user.uid.clone() };
        let terminal = Arc::new(Self {
            id,
            user,
            credential,
            place,
            to_pod,
            recording,
            state: Mutex::new(State {
                scrollback: Scrollback::new(scrollback),
                viewer: None,
                detached_since: Some(Instant::now()),
                ending: None,
                last_activity: Timestamp::now(),
                told: None,
                size: None,
            }),
            ended: CancellationToken::new(),
            next_viewer: AtomicU64::new(1),
        });
        let pumping = terminal.clone();
        tokio::spawn(async move {
            let ending = pumping.pump(exec, frames).await;
            pumping.end(ending);
            on_end(&pumping);
        });
        terminal
    }

    /// Relay frames both ways until the exec ends or the terminal is closed.
    async fn pump(&self, exec: ExecSocket, mut frames: mpsc::Receiver<Vec<u8>>) -> Ending {
        let (mut sink, mut source) = exec.split();
        let write = async {
            while let Some(frame) = frames.recv().await {
                if sink.send(Message::binary(frame)).await.is_err() {
                    break;
                }
            }
        };
        let read = async {
            while let Some(message) = source.next().await {
                let frame = match message {
                    Ok(Message::Binary(frame)) => frame,
                    Ok(Message::Close(_)) => break,
                    Ok(_) => continue,
                    Err(e) => return Ending::Failed(format!("the connection to the pod broke: {e}")),
                };
                match channel::from_pod(&frame) {
                    FromPod::Output(output) => self.output(output).await,
                    FromPod::Exited(code) => return Ending::Exited(code),
                    FromPod::Failed(why) => return Ending::Failed(why),
                    FromPod::Ignored => {}
                }
            }
            Ending::Failed("the pod closed the connection".to_owned())
        };
        // A recorded session never goes on unrecorded.
        let unrecorded = async {
            match &self.recording {
                Some(recording) => {
                    recording.stopped.cancelled().await;
                    recording.why().unwrap_or_else(|| "the session's recording stopped".to_owned())
                }
                None => std::future::pending().await,
            }
        };
        let ending = tokio::select! {
            ending = read => ending,
            why = unrecorded => Ending::Closed(format!("{why}: a recorded session does not go on unrecorded")),
            () = write => Ending::Failed("the connection to the pod broke".to_owned()),
            () = self.ended.cancelled() => self.state.lock().ending.clone().unwrap_or(Ending::Closed("closed".into())),
        };
        let _ = sink.close().await;
        ending
    }

    async fn output(&self, output: &[u8]) {
        if let Some(recording) = &self.recording {
            let _ = recording.tx.send(Event::Output(Bytes::copy_from_slice(output))).await;
        }
        let tx = {
            let mut state = self.state.lock();
            state.scrollback.push(output);
            // Output nobody sees is no sign of use.
            if state.viewer.is_some() {
                state.last_activity = Timestamp::now();
            }
            state.viewer.as_ref().map(|v| v.tx.clone())
        };
        if let Some(tx) = tx {
            // Waits while the page is slow; a page gone drops the message (it is in the scrollback).
            let _ = tx.send(ToPage::Output(Bytes::copy_from_slice(output))).await;
        }
    }

    /// Type `bytes`.
    pub async fn input(&self, bytes: &[u8]) {
        self.state.lock().last_activity = Timestamp::now();
        let _ = self.to_pod.send(channel::stdin(bytes)).await;
    }

    /// Set the terminal's size. The same size again is not sent (a page that floods resizes
    /// costs the pod nothing new).
    pub async fn resize(&self, cols: u16, rows: u16) {
        {
            let mut state = self.state.lock();
            if state.size == Some((cols, rows)) {
                return;
            }
            state.size = Some((cols, rows));
        }
        if let Some(recording) = &self.recording {
            let _ = recording.tx.send(Event::Resize(cols, rows)).await;
        }
        let _ = self.to_pod.send(channel::resize(cols, rows)).await;
    }

    /// Close the program's stdin: it reads end of file (v5's close frame).
    pub async fn close_stdin(&self) {
        let _ = self.to_pod.send(channel::close_stdin()).await;
    }

    /// A page starts watching; the page watching before is told it was replaced.
    pub fn attach(&self) -> Attached {
        let (tx, rx) = mpsc::channel(QUEUE);
        let viewer = self.next_viewer.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state.lock();
        if let Some(old) = state.viewer.replace(Viewer { id: viewer, tx: tx.clone() }) {
            let _ = old.tx.try_send(ToPage::Replaced);
        }
        state.detached_since = None;
        if let Some(ending) = &state.ending {
            let _ = tx.try_send(ToPage::Ended(ending.clone()));
        }
        Attached { viewer, rx, replay: state.scrollback.contents() }
    }

    /// The page `viewer` went away: start the grace period, after which, if no page came back,
    /// the exec is closed.
    pub fn detach(self: &Arc<Self>, viewer: u64, grace: Duration) {
        let since = {
            let mut state = self.state.lock();
            if state.viewer.as_ref().map(|v| v.id) != Some(viewer) {
                return;
            }
            state.viewer = None;
            let now = Instant::now();
            state.detached_since = Some(now);
            now
        };
        let terminal = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                () = terminal.ended.cancelled() => return,
            }
            if terminal.state.lock().detached_since == Some(since) {
                let why = format!("nobody reattached within {}s", grace.as_secs());
                terminal.close(why);
            }
        });
    }

    /// Tell the page watching, if any, something from the gateway.
    pub fn notice(&self, line: String) {
        if let Some(viewer) = &self.state.lock().viewer {
            let _ = viewer.tx.try_send(ToPage::Notice(line));
        }
    }

    /// Close the exec.
    pub fn close(&self, why: String) {
        self.end(Ending::Closed(why));
    }

    fn end(&self, ending: Ending) {
        let mut state = self.state.lock();
        if state.ending.is_some() {
            return;
        }
        state.ending = Some(ending.clone());
        if let Some(viewer) = &state.viewer {
            let _ = viewer.tx.try_send(ToPage::Ended(ending));
        }
        drop(state);
        self.ended.cancel();
    }

    /// Whether it has ended.
    pub fn has_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// When someone last typed or saw output.
    pub fn last_activity(&self) -> Timestamp {
        self.state.lock().last_activity
    }

    /// Tell the page `line` about a coming stop (with an extend button when `can_extend`),
    /// unless it was the last one told; whether it was told now.
    pub fn warn(&self, line: &str, can_extend: bool) -> bool {
        let mut state = self.state.lock();
        if state.told.as_deref() == Some(line) {
            return false;
        }
        state.told = Some(line.to_owned());
        if let Some(viewer) = &state.viewer {
            let _ = viewer.tx.try_send(ToPage::Stopping { line: line.to_owned(), can_extend });
        }
        true
    }

    /// Whether its session is recorded.
    pub fn is_recorded(&self) -> bool {
        self.recording.is_some()
    }

    /// Whether a page watches it now.
    pub fn is_watched(&self) -> bool {
        self.state.lock().viewer.is_some()
    }
}

impl Terminal {
    /// Resolves when the terminal has ended.
    pub async fn wait_ended(&self) {
        self.ended.cancelled().await;
    }

    /// How it ended, once it has.
    pub fn ending(&self) -> Option<Ending> {
        self.state.lock().ending.clone()
    }
}
