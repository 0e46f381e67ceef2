//! `GET /api/terminal/{namespace}/{shell}`: the page's WebSocket to a terminal.
//!
//! The terminal is held in the shell's pod by its session holder: with `?session=ID` the page
//! reattaches to that session (the same `sh`, the recent screen drawn again by the holder),
//! through whichever replica of the gateway it reaches; with `?new=1` it opens a new one;
//! otherwise it takes up the user's newest detached session, or opens a new one
//! ([`super::opening`]). `?readOnly=1` watches without typing. A pod from before the holder gets
//! a plain terminal, which this replica keeps for `--reattach-grace` (`?terminal=ID` reattaches
//! it). Either way the pod is found as the user and the exec is made as the user, so the connect
//! gate's refusal, the record of connections and the audit log all name the person typing.
//!
//! On the socket, binary messages are keystrokes one way and output the other; text messages
//! are JSON: from the page `resize`, `eof`, `detach` (leave the session running), `end` (end
//! it), `allowDrive` ([`super::control`]); to the page `attached`, `presence` (who is attached),
//! `notice`, `stopping` (the shell's lifetime stops it soon: the `Stopping` condition's words),
//! `error` (a message the page sent was not understood), `refused` (no terminal was opened: the
//! apiserver's, the gate's or the holder's words), `unavailable` (none was opened this time: an
//! apiserver or a holder that could not answer yet; the page tries again), `handover` (this
//! gateway is stopping: the page opens its session through another replica and closes this
//! socket once attached there, [`super::handover`]), `exit`, `closed` (with a `reason`: the
//! holder's `idleTtl`, `killed`, `podStopping`; `accessLost`, final; `execEnded`, the exec to a
//! held session ended but not the session, so the page reattaches; `gateway`), `detached` and
//! `replaced`. `attached` says the protocol's version (`protocol`, 2) and, for a held session,
//! its id, creator, start (`created`, seconds since the epoch), `pid` and `command`.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use http::{Request, StatusCode};
use myownshell_runtime::server::ConnectionInfo;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::api::refused;
use super::control::{self, Control};
use super::handover::Leave;
use super::opening::{key, open, still_allowed};
use crate::access::Credential;
use crate::gateway::Gateway;
use crate::signin::{self, Purpose, Refusal};
use crate::terminal::session::{Ending, Kind, Place, Terminal, ToPage};

use super::query::TerminalQuery;
use super::upgrade::{Socket, send_json, upgrade};

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

/// The most of a too-big message read and dropped after closing the socket for it: a little
/// more than a page plausibly sends past `--max-message-bytes` (1 MiB) in one go.
const TOO_BIG_DRAIN_BYTES: usize = 4 * 1024 * 1024;

/// A page's message past `--max-message-bytes`: the socket is closed with 1009, and what the
/// page is still sending of the message is read and dropped for a moment (at most
/// [`TOO_BIG_DRAIN_BYTES`] or [`CLOSE_WAIT`], keeping nothing). Closed at once, the unread bytes
/// made the kernel answer with a reset, and the page saw a broken pipe, never the 1009.
async fn too_big<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    socket: &mut tokio_tungstenite::WebSocketStream<S>,
) {
    let frame = CloseFrame { code: CloseCode::Size, reason: "a message larger than --max-message-bytes".into() };
    if socket.close(Some(frame)).await.is_err() {
        return;
    }
    let raw = socket.get_mut();
    let mut buf = vec![0u8; 16 * 1024];
    let mut read = 0usize;
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while read <= TOO_BIG_DRAIN_BYTES {
            match raw.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

/// One page's socket, from attaching to leaving.
async fn serve(gw: Arc<Gateway>, credential: Credential, place: Place, query: TerminalQuery, mut socket: Socket) {
    let owner = key(&credential.user);
    let resumed = query.terminal.as_deref().and_then(|id| gw.terminals.get(id, &owner));
    let resumed = resumed.filter(|t| t.place.namespace == place.namespace && t.place.shell == place.shell);
    if let Some(terminal) = &resumed
        && let Some(why) = still_allowed(&gw, terminal, &credential).await
    {
        terminal.lose_access(why.clone());
        let _ = send_json(&mut socket, json!({ "type": "refused", "message": why })).await;
        close(&mut socket).await;
        return;
    }
    let (terminal, was_resumed) = match resumed {
        Some(t) => (t, true),
        _ => match open(&gw, &credential, place, &query, &mut socket).await {
            Ok(t) => (t, false),
            Err(unopened) => {
                let kind = if unopened.retry { "unavailable" } else { "refused" };
                let _ = send_json(&mut socket, json!({ "type": kind, "message": unopened.message })).await;
                close(&mut socket).await;
                return;
            }
        },
    };
    bridge(&gw, &terminal, was_resumed, &mut socket).await;
}

/// The page protocol's version, in every `attached` (2: held sessions; a gateway before them
/// sent output with no `attached` at all).
const PROTOCOL: u32 = 2;

/// What the page is told of how its terminal ended.
fn ending_message(ending: &Ending) -> serde_json::Value {
    match ending {
        Ending::Exited(code) => json!({ "type": "exit", "code": code }),
        // The exec to the pod ended: for a held terminal the session may well live on, and the page
        // reattaches to it.
        Ending::Failed(message) => json!({ "type": "closed", "message": message, "reason": "execEnded" }),
        Ending::Closed(message) => json!({ "type": "closed", "message": message, "reason": "gateway" }),
        // Final: opening the terminal again would be refused.
        Ending::AccessLost(message) => json!({ "type": "closed", "message": message, "reason": "accessLost" }),
        Ending::Ended(reason, message) => json!({ "type": "closed", "message": message, "reason": reason }),
        Ending::Refused(message) => json!({ "type": "refused", "message": message }),
        Ending::Detached => json!({ "type": "detached" }),
    }
}

/// The page's first message: which terminal (and for a held one, which session and who is in it).
fn hello(terminal: &Terminal, resumed: bool) -> serde_json::Value {
    let (session, presence) = terminal.session();
    match (terminal.kind, session) {
        (Kind::Held, Some(s)) => {
            let attached = presence.as_ref().map_or(&s.attached, |p| &p.attached);
            json!({
                "type": "attached", "protocol": PROTOCOL, "held": true, "terminal": terminal.id, "session": s.id,
                "pod": terminal.place.pod, "resumed": s.resumed, "readOnly": s.read_only, "creator": s.user,
                "created": s.created, "pid": s.pid, "command": s.command,
                "allowDrive": presence.as_ref().map_or(s.allow_drive, |p| p.allow_drive), "attached": attached,
            })
        }
        _ => json!({
            "type": "attached", "protocol": PROTOCOL, "held": false, "terminal": terminal.id, "pod": terminal.place.pod,
            "resumed": resumed,
        }),
    }
}

/// Relay between the page and the terminal until either goes.
async fn bridge(gw: &Gateway, terminal: &Arc<Terminal>, resumed: bool, socket: &mut Socket) {
    let mut attached = terminal.attach();
    if !send_json(socket, hello(terminal, resumed)).await {
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
    // Held until this function returns: the page's turn to move ends with its socket.
    let mut leaving = gw.handover.leaving(terminal.kind == Kind::Held);
    loop {
        tokio::select! {
            message = socket.next() => {
                heard = Instant::now();
                match message {
                    Some(Ok(Message::Binary(keys))) => terminal.input(&keys).await,
                    Some(Ok(Message::Text(text))) => {
                        if control(terminal, socket, text.as_str()).await {
                            terminal.detach(attached.viewer, gw.settings.grace);
                            let _ = send_json(socket, json!({ "type": "detached" })).await;
                            close(socket).await;
                            return;
                        }
                    }
                    Some(Err(WsError::Capacity(_))) => {
                        too_big(socket).await;
                        break;
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                }
            }
            out = attached.rx.recv() => if !to_page(socket, out).await { return },
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
            leave = leaving.next() => match leave {
                Leave::Tell => {
                    let line = "the gateway is restarting: moving this terminal to another replica";
                    if !send_json(socket, json!({ "type": "handover", "message": line })).await {
                        break;
                    }
                }
                Leave::Go => {
                    goodbye(terminal, attached.viewer, gw, socket).await;
                    return;
                }
            },
        }
    }
    terminal.detach(attached.viewer, gw.settings.grace);
}

/// Send the page what the terminal has for it; whether the page is still there.
async fn to_page(socket: &mut Socket, out: Option<ToPage>) -> bool {
    match out {
        Some(ToPage::Output(bytes)) => socket.send(Message::binary(bytes)).await.is_ok(),
        Some(ToPage::Notice(line)) => send_json(socket, json!({ "type": "notice", "message": line })).await,
        Some(ToPage::Presence(p)) => {
            send_json(socket, json!({ "type": "presence", "attached": p.attached, "allowDrive": p.allow_drive })).await
        }
        Some(ToPage::Stopping { line, can_extend }) => {
            send_json(socket, json!({ "type": "stopping", "message": line, "canExtend": can_extend })).await
        }
        Some(ToPage::Ended(ending)) => {
            let _ = send_json(socket, ending_message(&ending)).await;
            close(socket).await;
            false
        }
        Some(ToPage::Replaced) | None => {
            let _ = send_json(socket, json!({ "type": "replaced" })).await;
            close(socket).await;
            false
        }
    }
}

/// The gateway stops: a held terminal's page is told to reattach (its session stays in the pod,
/// for the next replica); a plain terminal ends here.
async fn goodbye(terminal: &Arc<Terminal>, viewer: u64, gw: &Gateway, socket: &mut Socket) {
    if terminal.kind == Kind::Held {
        let line = "the gateway is restarting: reattaching";
        let _ = send_json(socket, json!({ "type": "notice", "message": line })).await;
        close(socket).await;
        terminal.detach(viewer, gw.settings.grace);
        return;
    }
    let line = "the gateway is restarting: reconnect to open a new terminal";
    let _ = send_json(socket, json!({ "type": "closed", "message": line, "reason": "gateway" })).await;
    close(socket).await;
    terminal.close(line.to_owned());
}

/// Act on one control message; whether the page asked to detach.
async fn control(terminal: &Terminal, socket: &mut Socket, text: &str) -> bool {
    match control::read(text) {
        Ok(Control::Resize(cols, rows)) => terminal.resize(cols, rows).await,
        Ok(Control::Eof) => terminal.close_stdin().await,
        Ok(Control::Detach) => return true,
        Ok(Control::End) => terminal.end_session().await,
        Ok(Control::AllowDrive(allow)) => terminal.allow_drive(allow).await,
        Err(message) => {
            let _ = send_json(socket, json!({ "type": "error", "message": message })).await;
        }
    }
    false
}

/// Close every plain terminal: the gateway stops. A held one is left to its page's [`goodbye`],
/// which tells the page to reattach: closing it here too raced with that (whichever of the
/// bridge's branches `select!` took first), and a page told `closed` stops for good, though its
/// session lives on in the pod (`cargo xtask bench sessions` lost 85 of 375 pages in a rollout
/// that way). The exec of a held terminal whose page never hears goodbye ends with the process.
pub fn close_all(gw: &Gateway) {
    for terminal in gw.terminals.all() {
        if terminal.kind == Kind::Plain {
            terminal.close("the gateway stopped".to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::WebSocketStream;
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

    use super::*;

    /// A page sending a message past the bound reads a 1009 close, not a broken pipe: what it
    /// still sends of the message is drained (without it, the page's send fails once the
    /// gateway has dropped the socket).
    #[tokio::test]
    async fn a_too_big_message_is_answered_with_1009_while_the_page_is_still_sending() {
        let (page_io, gateway_io) = tokio::io::duplex(64 * 1024);
        let config = WebSocketConfig::default().max_message_size(Some(1024)).max_frame_size(Some(1024));
        let mut gateway = WebSocketStream::from_raw_socket(gateway_io, Role::Server, Some(config)).await;
        let mut page = WebSocketStream::from_raw_socket(page_io, Role::Client, None).await;
        let serving = tokio::spawn(async move {
            match gateway.next().await {
                Some(Err(WsError::Capacity(_))) => too_big(&mut gateway).await,
                other => panic!("the gateway read {other:?}"),
            }
        });
        page.send(Message::binary(vec![b'x'; 2 * 1024 * 1024])).await.expect("the page's send went through");
        let answer = tokio::time::timeout(std::time::Duration::from_secs(10), page.next()).await.expect("an answer");
        match answer {
            Some(Ok(Message::Close(Some(frame)))) => assert_eq!(frame.code, CloseCode::Size),
            other => panic!("the page read {other:?}"),
        }
        serving.await.expect("the gateway's side");
    }
}
