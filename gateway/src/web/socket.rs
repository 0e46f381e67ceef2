//! `GET /api/terminal/{namespace}/{shell}`: the page's WebSocket to a terminal.
//!
//! With `?terminal=ID` (the id the page was given) it reattaches to the user's own terminal if
//! it still runs (the same `sh`, the recent screen drawn again); otherwise it opens a new one:
//! the pod is found as the user, and the exec is made as the user, so the connect gate's
//! refusal, the record of connections and the audit log all name the person typing.
//!
//! On the socket, binary messages are keystrokes one way and output the other; text messages
//! are JSON: from the page `{"type":"resize","cols":…,"rows":…}`; to the page `attached`,
//! `notice`, `stopping` (the shell's lifetime stops it soon: the `Stopping` condition's words),
//! `error` (a message the page sent was not understood), `refused` (no terminal was
//! opened: the apiserver's or the gate's words, or what a shell waited for), `exit`, `closed` and
//! `replaced`.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use http::{Request, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::AttachParams;
use myownshell_api::MyOwnShell;
use myownshell_rbac_proxy::AuthenticatedUser;
use myownshell_runtime::server::ConnectionInfo;
use serde::Deserialize;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::api::refused;
use super::control::{self, Control};
use super::upgrade::{Socket, upgrade};
use crate::access::{At, Credential};
use crate::exec::as_user::AsUser;
use crate::exec::target::{self, Found, TargetError};
use crate::gateway::Gateway;
use crate::ids;
use crate::recording::asciicast;
use crate::recording::writer::{self, Limits, Recording};
use crate::signin::{self, Purpose, Refusal};
use crate::terminal::session::{Ending, Place, Terminal, ToPage, UserKey};

/// The container a shell's pods run the user's programs in (the controller names it).
const SHELL_CONTAINER: &str = "shell";

/// The query of the terminal socket.
#[derive(Deserialize, Default)]
pub struct TerminalQuery {
    #[serde(default)]
    terminal: Option<String>,
    #[serde(default)]
    cols: Option<u16>,
    #[serde(default)]
    rows: Option<u16>,
}

/// The terminal size a page may ask for when it opens one.
fn size_ok(cols: u16, rows: u16) -> bool {
    (1..=control::MAX_SIZE).contains(&cols) && (1..=control::MAX_SIZE).contains(&rows)
}

fn key(user: &AuthenticatedUser) -> UserKey {
    UserKey { name: user.name.clone(), uid: user.uid.clone() }
}

/// The handler: authenticate, then take the connection over.
pub async fn terminal(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, shell)): Path<(String, String)>,
    Query(query): Query<TerminalQuery>,
    mut request: Request<Body>,
) -> Response {
    let certificate = request.extensions().get::<ConnectionInfo>().and_then(|i| i.peer_certificates.clone());
    let certificate = certificate.as_ref().and_then(|c| c.first());
    let caller = match signin::caller(&gw.gate(), request.headers(), certificate, Purpose::Terminal).await {
        Ok(caller) => caller,
        Err(refusal) => return refused(refusal),
    };
    let (response, socket) = match upgrade(&mut request, gw.settings.max_message) {
        Ok(upgrading) => upgrading,
        Err(e) => return refused(Refusal { status: StatusCode::BAD_REQUEST, message: e.to_string() }),
    };
    let tasks = gw.tasks.clone();
    let credential = Credential { user: caller.user, token: caller.token };
    tasks.spawn(async move {
        if let Some(socket) = socket.await {
            serve(gw, credential, Place { namespace, shell, pod: String::new(), uid: None }, query, socket).await;
        }
    });
    response.into_response()
}

async fn send_json(socket: &mut Socket, value: serde_json::Value) -> bool {
    socket.send(Message::text(value.to_string())).await.is_ok()
}

/// How long a closing socket waits for the page's own Close frame.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Close the page's socket as RFC 6455 asks: send our Close, then read until the page's Close
/// (or the end, or [`CLOSE_WAIT`]) before the TCP connection goes. Dropping it with the page's
/// Close frame still unread makes the kernel answer with a reset, which, behind `kubectl
/// port-forward`, ends the whole forward ("lost connection to pod") and every other terminal
/// through it.
async fn close(socket: &mut Socket) {
    if socket.close(None).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(Ok(message)) = socket.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// One page's socket, from attaching to leaving.
async fn serve(gw: Arc<Gateway>, credential: Credential, place: Place, query: TerminalQuery, mut socket: Socket) {
    let user = credential.user.clone();
    let owner = key(&user);
    let resumed = query.terminal.as_deref().and_then(|id| gw.terminals.get(id, &owner));
    let resumed = resumed.filter(|t| t.place.namespace == place.namespace && t.place.shell == place.shell);
    if let Some(terminal) = &resumed
        && let Some(why) = still_allowed(&gw, terminal, &credential).await
    {
        terminal.close(why.clone());
        let _ = send_json(&mut socket, json!({ "type": "refused", "message": why })).await;
        close(&mut socket).await;
        return;
    }
    let (terminal, was_resumed) = match resumed {
        Some(t) => (t, true),
        _ => match open(&gw, &credential, place, &query, &mut socket).await {
            Ok(t) => (t, false),
            Err(message) => {
                let _ = send_json(&mut socket, json!({ "type": "refused", "message": message })).await;
                close(&mut socket).await;
                return;
            }
        },
    };
    bridge(&gw, &terminal, was_resumed, &mut socket).await;
}

/// Why the user reattaching to `terminal` (with `credential`, which may be newer than the one it
/// was opened with) may no longer use it, if they may not: the shell read as them (RBAC's `get`),
/// then [`crate::access`].
async fn still_allowed(gw: &Gateway, terminal: &Terminal, credential: &Credential) -> Option<String> {
    let as_user = match gw.as_user(&credential.user) {
        Ok(as_user) => as_user,
        Err(e) => return Some(e.to_string()),
    };
    let shells = kube::core::Request::new(MyOwnShell::url_path(&(), Some(&terminal.place.namespace)));
    let get = match shells.get(&terminal.place.shell, &Default::default()) {
        Ok(get) => get,
        Err(e) => return Some(e.to_string()),
    };
    let shell: MyOwnShell = match as_user.request(get).await {
        Ok(shell) => shell,
        Err(kube::Error::Api(status)) => return Some(status.message),
        Err(e) => return Some(format!("cannot tell whether you may still connect: {e}")),
    };
    let at = At { shell: &shell, uid: terminal.place.uid.as_deref(), pod: &terminal.place.pod };
    gw.access.refusal(&gw.tokens, credential, at).await
}

/// A new terminal for the user of `credential` in a ready pod of the shell.
async fn open(
    gw: &Arc<Gateway>,
    credential: &Credential,
    mut place: Place,
    query: &TerminalQuery,
    socket: &mut Socket,
) -> Result<Arc<Terminal>, String> {
    let user = &credential.user;
    let reservation = gw.terminals.reserve(&key(user)).map_err(|e| e.to_string())?;
    let as_user = gw.as_user(user).map_err(|e| e.to_string())?;
    let found = find_pod(gw, &as_user, &place, socket).await?;
    let record = found.record || gw.record_all;
    (place.pod, place.uid) = (found.pod, found.uid);
    if record && gw.recordings.is_none() {
        return Err(format!(
            "shell {}/{} asks for its sessions to be recorded, and this gateway keeps no recordings (--recordings-dir); ask an administrator",
            place.namespace, place.shell
        ));
    }
    let params = AttachParams::interactive_tty().container(SHELL_CONTAINER);
    let exec = kube::core::Request::new(Pod::url_path(&(), Some(&place.namespace)))
        .exec(&place.pod, gw.settings.command.clone(), &params)
        .map_err(|e| e.to_string())?;
    let connection = as_user.connect(exec).await.map_err(|e| e.to_string())?;
    let id = ids::random()?;
    let recording = match record {
        true => Some(start_recording(gw, &place, user, &id, query).await?),
        false => None,
    };
    let forget = Arc::downgrade(gw);
    let terminal =
        Terminal::start(id, credential.clone(), place, connection, gw.settings.scrollback, recording, move |t| {
            if let Some(gw) = forget.upgrade() {
                gw.terminals.remove(&t.id);
            }
        });
    gw.terminals.add(terminal.clone(), reservation);
    if let (Some(cols), Some(rows)) = (query.cols, query.rows)
        && size_ok(cols, rows)
    {
        terminal.resize(cols, rows).await;
    }
    tracing::info!(user = %user.name, namespace = %terminal.place.namespace, shell = %terminal.place.shell, pod = %terminal.place.pod, terminal = %&terminal.id[..8], recorded = terminal.is_recorded(), "terminal opened");
    Ok(terminal)
}

/// The shell's ready pod, read as the user, telling the page what it waits for meanwhile.
async fn find_pod(gw: &Gateway, as_user: &AsUser, place: &Place, socket: &mut Socket) -> Result<Found, String> {
    let (waiting, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let finding = target::find(as_user, &place.namespace, &place.shell, gw.settings.connect_timeout, waiting);
    let mut finding = std::pin::pin!(finding);
    let found = loop {
        tokio::select! {
            found = &mut finding => break found,
            Some(line) = lines.recv() => {
                let _ = send_json(socket, json!({ "type": "notice", "message": line })).await;
            }
        }
    };
    found.map_err(|e| match e {
        TargetError::Api(m) | TargetError::Stopped(m) => m,
        timeout @ TargetError::Timeout(..) => timeout.to_string(),
    })
}

/// The recording of a new terminal: its file and writer. A recording that cannot be made
/// refuses the terminal (a shell that asks for recording is never opened unrecorded).
async fn start_recording(
    gw: &Gateway,
    place: &Place,
    user: &AuthenticatedUser,
    id: &str,
    query: &TerminalQuery,
) -> Result<Recording, String> {
    let store = gw.recordings.as_ref().ok_or("no --recordings-dir")?;
    let shell = (place.namespace.clone(), place.shell.clone());
    store.quota.room_for(&shell).map_err(|full| format!("the session cannot be recorded: {full}"))?;
    let now = Timestamp::now();
    let path = store.path_for(&place.namespace, &place.shell, now, id).ok_or("not a name a recording can have")?;
    let (cols, rows) = (query.cols.unwrap_or(80), query.rows.unwrap_or(24));
    let title = format!("{}/{} by {}", place.namespace, place.shell, user.name);
    let header = asciicast::header(cols, rows, now.as_second(), &title);
    let limits = Limits { max_bytes: store.max_bytes, quota: store.quota.clone(), shell };
    writer::start(path, header, limits).await.map_err(|e| format!("the session cannot be recorded: {e}"))
}

fn ending_message(ending: &Ending) -> serde_json::Value {
    match ending {
        Ending::Exited(code) => json!({ "type": "exit", "code": code }),
        Ending::Failed(message) | Ending::Closed(message) => json!({ "type": "closed", "message": message }),
    }
}

/// Relay between the page and the terminal until either goes.
async fn bridge(gw: &Gateway, terminal: &Arc<Terminal>, resumed: bool, socket: &mut Socket) {
    let mut attached = terminal.attach();
    let hello = json!({ "type": "attached", "terminal": terminal.id, "pod": terminal.place.pod, "resumed": resumed });
    if !send_json(socket, hello).await {
        terminal.detach(attached.viewer, gw.settings.grace);
        return;
    }
    if terminal.is_recorded() {
        let line = "this session is recorded: what the terminal shows and its size (never what you type)";
        let _ = send_json(socket, json!({ "type": "notice", "message": line })).await;
    }
    if !attached.replay.is_empty() && socket.send(Message::binary(std::mem::take(&mut attached.replay))).await.is_err()
    {
        terminal.detach(attached.viewer, gw.settings.grace);
        return;
    }
    let mut ping = tokio::time::interval(gw.settings.ping_interval);
    let mut heard = Instant::now();
    let gone_after = gw.settings.ping_interval * 3;
    loop {
        tokio::select! {
            message = socket.next() => {
                heard = Instant::now();
                match message {
                    Some(Ok(Message::Binary(keys))) => terminal.input(&keys).await,
                    Some(Ok(Message::Text(text))) => control(terminal, socket, text.as_str()).await,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                }
            }
            out = attached.rx.recv() => match out {
                Some(ToPage::Output(bytes)) => if socket.send(Message::binary(bytes)).await.is_err() { break },
                Some(ToPage::Notice(line)) => if !send_json(socket, json!({ "type": "notice", "message": line })).await { break },
                Some(ToPage::Stopping { line, can_extend }) => {
                    let warning = json!({ "type": "stopping", "message": line, "canExtend": can_extend });
                    if !send_json(socket, warning).await { break }
                }
                Some(ToPage::Ended(ending)) => {
                    let _ = send_json(socket, ending_message(&ending)).await;
                    close(socket).await;
                    return;
                }
                Some(ToPage::Replaced) | None => {
                    let _ = send_json(socket, json!({ "type": "replaced" })).await;
                    close(socket).await;
                    return;
                }
            },
            () = terminal.wait_ended() => {
                // Ended while this page's queue was full: say how, once the queue is read.
                let ending = terminal.ending().unwrap_or(Ending::Closed("closed".into()));
                while let Ok(ToPage::Output(bytes)) = attached.rx.try_recv() {
                    let _ = socket.send(Message::binary(bytes)).await;
                }
                let _ = send_json(socket, ending_message(&ending)).await;
                close(socket).await;
                return;
            }
            _ = ping.tick() => {
                if heard.elapsed() >= gone_after || socket.send(Message::Ping(Default::default())).await.is_err() {
                    break;
                }
            }
            () = gw.shutdown.cancelled() => {
                let line = "the gateway is restarting: reconnect to open a new terminal";
                let _ = send_json(socket, json!({ "type": "closed", "message": line })).await;
                close(socket).await;
                terminal.close(line.to_owned());
                return;
            }
        }
    }
    terminal.detach(attached.viewer, gw.settings.grace);
}

async fn control(terminal: &Terminal, socket: &mut Socket, text: &str) {
    match control::read(text) {
        Ok(Control::Resize(cols, rows)) => terminal.resize(cols, rows).await,
        Ok(Control::Eof) => terminal.close_stdin().await,
        Err(message) => {
            let _ = send_json(socket, json!({ "type": "error", "message": message })).await;
        }
    }
}

/// Close every terminal: the gateway stops.
pub fn close_all(gw: &Gateway) {
    for terminal in gw.terminals.all() {
        terminal.close("the gateway stopped".to_owned());
    }
}
