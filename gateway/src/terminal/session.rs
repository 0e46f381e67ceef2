//! One terminal: one exec into a shell's pod, of one of two kinds ([`Kind`]).
//!
//! - **Held**: `myownshell-session attach --framed` without a TTY, speaking the holder's frames
//!   ([`super::held`]): the session lives in the pod, so when the page goes the exec goes at once
//!   (the session stays, for any replica to reattach), and the recent screen comes from the
//!   holder when a page attaches.
//! - **Plain**: `sh` with a TTY, for a pod from before the holder: the exec outlives the browser
//!   tab that opened it by the grace period, with its own scrollback.
//!
//! The exec's output goes to the page watching (at most one; a second tab takes over) and into
//! the scrollback; with no page watching it goes only to the scrollback. The page's keystrokes
//! and resizes go to the exec. Output waits for a slow page (backpressure reaches the pod),
//! never piles up.

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

use myownshell_session::protocol::{Attached as HeldSession, Presence};

use super::held::{self, Told};
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
    /// The gateway closed it because its user may no longer connect (the shell is gone, or no
    /// longer lets them in, or the cluster no longer accepts their token): why.
    AccessLost(String),
    /// The holder ended the session: the reason (the page protocol's name) and why in words.
    Ended(&'static str, String),
    /// The holder would not attach (an unknown session, the pod's cap): why.
    Refused(String),
    /// The page left a held session running (the exec went, the session did not).
    Detached,
}

/// How a terminal's exec speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Through the session holder in the pod.
    Held,
    /// A plain `sh` with a TTY (a pod from before the holder).
    Plain,
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
    /// Who is attached to the held session now.
    Presence(Presence),
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
    /// The held session, once the holder said which it is.
    session: Option<HeldSession>,
    /// Who is attached to it, as the holder last said.
    presence: Option<Presence>,
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
    /// How its exec speaks.
    pub kind: Kind,
    to_pod: mpsc::Sender<Vec<u8>>,
    /// Where output and resizes are recorded, if the session is.
    recording: Option<Recording>,
    state: Mutex<State>,
    ended: CancellationToken,
    /// Cancelled once the holder said which session this is (or the terminal ended first).
    started: CancellationToken,
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
        (place, kind): (Place, Kind),
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
            kind,
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
                session: None,
                presence: None,
            }),
            ended: CancellationToken::new(),
            started: CancellationToken::new(),
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
            let mut reader = held::Reader::default();
            let mut stderr = String::new();
            while let Some(message) = source.next().await {
                let frame = match message {
                    Ok(Message::Binary(frame)) => frame,
                    Ok(Message::Close(_)) => break,
                    Ok(_) => continue,
                    Err(e) => return Ending::Failed(format!("the connection to the pod broke: {e}")),
                };
                let said = match (self.kind, channel::from_pod(&frame)) {
                    (Kind::Plain, FromPod::Output(output) | FromPod::Stderr(output)) => {
                        self.output(output).await;
                        None
                    }
                    (Kind::Held, FromPod::Output(frames)) => match reader.feed(frames) {
                        Ok(told) => self.hear(told).await,
                        Err(why) => Some(Ending::Failed(why)),
                    },
                    (Kind::Held, FromPod::Stderr(text)) => {
                        keep_some(&mut stderr, text);
                        None
                    }
                    (Kind::Plain, FromPod::Exited(code)) => Some(Ending::Exited(code)),
                    (Kind::Held, FromPod::Exited(_)) => Some(Ending::Failed(held_client_ended(&stderr))),
                    (_, FromPod::Failed(why)) => Some(Ending::Failed(with_stderr(why, &stderr))),
                    (_, FromPod::Ignored) => None,
                };
                if let Some(ending) = said {
                    return ending;
                }
            }
            Ending::Failed(with_stderr("the pod closed the connection".to_owned(), &stderr))
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

    /// What the holder told: an ending, if it ends the terminal.
    async fn hear(&self, told: Vec<Told>) -> Option<Ending> {
        for told in told {
            match told {
                Told::Attached(attached) => {
                    self.state.lock().session = Some(attached);
                    self.started.cancel();
                }
                Told::Output(bytes) => self.output(&bytes).await,
                Told::Presence(presence) => {
                    let viewer = {
                        let mut state = self.state.lock();
                        state.presence = Some(presence.clone());
                        state.viewer.as_ref().map(|v| v.tx.clone())
                    };
                    if let Some(tx) = viewer {
                        let _ = tx.send(ToPage::Presence(presence)).await;
                    }
                }
                Told::Notice(line) => self.notice(line),
                Told::Exited(code) => return Some(Ending::Exited(code)),
                Told::Ended(reason, why) => return Some(Ending::Ended(reason, why)),
                Told::Refused(why) => return Some(Ending::Refused(why)),
            }
        }
        None
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
        match self.kind {
            Kind::Plain => {
                let _ = self.to_pod.send(channel::stdin(bytes)).await;
            }
            Kind::Held => {
                for frame in held::input(bytes) {
                    let _ = self.to_pod.send(channel::stdin(&frame)).await;
                }
            }
        }
    }

    /// Tell the holder something (held terminals only; a plain one has no holder).
    async fn to_holder(&self, frame: Vec<u8>) {
        if self.kind == Kind::Held {
            let _ = self.to_pod.send(channel::stdin(&frame)).await;
        }
    }

    /// End the held session, its processes with it (`End`; the holder lets its creator).
    pub async fn end_session(&self) {
        self.to_holder(held::end()).await;
    }

    /// Let others type in the held session, or stop them (its creator's to say).
    pub async fn allow_drive(&self, allow: bool) {
        self.to_holder(held::allow_drive(allow)).await;
    }

    /// The held session, once the holder said which, and who is attached to it.
    pub fn session(&self) -> (Option<HeldSession>, Option<Presence>) {
        let state = self.state.lock();
        (state.session.clone(), state.presence.clone())
    }

    /// Until the holder has said which session this is; its answer, or how the terminal ended
    /// first (a plain terminal starts at once).
    pub async fn started(&self) -> Result<Option<HeldSession>, Ending> {
        if self.kind == Kind::Plain {
            return Ok(None);
        }
        tokio::select! {
            () = self.started.cancelled() => {}
            () = self.ended.cancelled() => {}
        }
        let state = self.state.lock();
        match (&state.session, &state.ending) {
            (Some(session), _) => Ok(Some(session.clone())),
            (None, Some(ending)) => Err(ending.clone()),
            (None, None) => Err(Ending::Failed("the session holder said nothing".into())),
        }
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
        let frame = match self.kind {
            Kind::Plain => channel::resize(cols, rows),
            Kind::Held => channel::stdin(&held::resize(cols, rows)),
        };
        let _ = self.to_pod.send(frame).await;
    }

    /// Close the program's stdin: it reads end of file (v5's close frame; the holder's `Eof`).
    pub async fn close_stdin(&self) {
        let frame = match self.kind {
            Kind::Plain => channel::close_stdin(),
            Kind::Held => channel::stdin(&held::eof()),
        };
        let _ = self.to_pod.send(frame).await;
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
        // Without the terminal queries in it: answered again by the page, they would be typed in.
        let replay = myownshell_session::queries::without_queries(&state.scrollback.contents());
        Attached { viewer, rx, replay }
    }

    /// The page `viewer` went away. A held terminal's exec goes at once (the session stays in
    /// the pod, for any replica to reattach); a plain one starts the grace period, after which,
    /// if no page came back, the exec is closed.
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
        if self.kind == Kind::Held {
            let terminal = self.clone();
            tokio::spawn(async move {
                terminal.to_holder(held::detach()).await;
                terminal.end(Ending::Detached);
            });
            return;
        }
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

    /// Close the exec: its user may no longer connect.
    pub fn lose_access(&self, why: String) {
        self.end(Ending::AccessLost(why));
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

/// Keep at most 4 KiB of what a held terminal's client wrote to stderr, for the message of a
/// failure.
fn keep_some(kept: &mut String, text: &[u8]) {
    if kept.len() < 4096 {
        kept.push_str(&String::from_utf8_lossy(&text[..text.len().min(4096 - kept.len())]));
    }
}

fn with_stderr(why: String, stderr: &str) -> String {
    match stderr.trim() {
        "" => why,
        said => format!("{why}: {said}"),
    }
}

/// Why a held terminal's client ended before the holder told how the session did.
fn held_client_ended(stderr: &str) -> String {
    with_stderr("the connection to the session holder ended".to_owned(), stderr)
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
