//! Opening a terminal for a page: the shell's ready pod found as the user, then an exec made as
//! the user (so the connect gate decides it and the record names them) into the shell's session
//! holder, `attach --framed` for a new session, the user's newest detached one, or the one the
//! page names; a pod from before the holder gets a plain `sh` with a TTY instead. A held session
//! is only ever the user's own or, when the shell is shared with them, its owner's.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::AttachParams;
use myownshell_api::MyOwnShell;
use myownshell_session::protocol::{Hello, Size, VERSION, Which};
use serde_json::json;

use super::query::{TerminalQuery, size_ok};
use super::upgrade::{Socket, send_json};
use crate::access::{At, Credential};
use crate::exec::as_user::AsUser;
use crate::exec::target::{self, Found, TargetError};
use crate::gateway::Gateway;
use crate::ids;
use crate::recording::asciicast;
use crate::recording::writer::{self, Limits, Recording};
use crate::terminal::held;
use crate::terminal::session::{Ending, Kind, Place, Terminal, UserKey};

/// The container a shell's pods run the user's programs in (the controller names it).
const SHELL_CONTAINER: &str = "shell";
/// How long the holder has to say which session an attach is.
const HOLDER_ANSWERS: Duration = Duration::from_secs(30);

/// Why no terminal was opened, in the words the page is told, and whether trying again may
/// open it: a refusal (the gate's, the apiserver's 4xx, the holder's "no such session", a cap)
/// stands, while an apiserver that could not answer or a holder that did not answer in time
/// (a burst of reattaching pages) is told as `unavailable`, which the page retries within its
/// reattach window instead of stopping a session that lives on in the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unopened {
    /// What the page is told.
    pub message: String,
    /// Whether the page tries again (`unavailable`) rather than stopping (`refused`).
    pub retry: bool,
}

impl Unopened {
    /// A failure that trying again may cure.
    pub fn transient(message: String) -> Self {
        Unopened { message, retry: true }
    }
}

impl From<String> for Unopened {
    fn from(message: String) -> Self {
        Unopened { message, retry: false }
    }
}

/// Who a terminal belongs to.
pub fn key(user: &myownshell_auth::AuthenticatedUser) -> UserKey {
    UserKey { name: user.name.clone(), uid: user.uid.clone() }
}

/// A terminal for the user of `credential` in a ready pod of the shell: held where the pod has
/// the holder, plain where it does not.
pub async fn open(
    gw: &Arc<Gateway>,
    credential: &Credential,
    mut place: Place,
    query: &TerminalQuery,
    socket: &mut Socket,
) -> Result<Arc<Terminal>, Unopened> {
    let user = &credential.user;
    let reservation = gw.terminals.reserve(&key(user)).map_err(|e| e.to_string())?;
    let as_user = gw.as_user(user).map_err(|e| e.to_string())?;
    let found = find_pod(gw, &as_user, &place, socket).await?;
    let record = found.record || gw.record_all;
    (place.pod, place.uid) = (found.pod.clone(), found.uid.clone());
    if record && gw.recordings.is_none() {
        return Err(format!(
            "shell {}/{} asks for its sessions to be recorded, and this gateway keeps no recordings (--recordings-dir); ask an administrator",
            place.namespace, place.shell
        )
        .into());
    }
    let id = ids::random()?;
    let recording = match record {
        true => Some(start_recording(gw, &place, user, &id, query).await?),
        false => None,
    };
    let held = start(gw, (&as_user, credential), (id.clone(), &place, Kind::Held), query, recording.clone()).await?;
    let terminal = match held.started().await {
        Ok(Some(session)) if !held::may_attach(&session.user, &user.name, found.owner.as_deref()) => {
            held.close("not one's own session".into());
            return Err(format!(
                "session {} of shell {}/{} is {}'s: you may join only your own, and its owner's when it is shared with you",
                session.id, place.namespace, place.shell, session.user
            )
            .into());
        }
        Ok(_) => held,
        Err(Ending::Failed(why)) if holder_missing(&why) => {
            let _ = send_json(socket, json!({ "type": "notice", "message": PLAIN_NOTICE })).await;
            start(gw, (&as_user, credential), (id, &place, Kind::Plain), query, recording).await?
        }
        Err(ending) => return Err(unopened(&ending)),
    };
    gw.terminals.add(terminal.clone(), reservation);
    if terminal.kind == Kind::Plain
        && let (Some(cols), Some(rows)) = (query.cols, query.rows)
        && size_ok(cols, rows)
    {
        terminal.resize(cols, rows).await;
    }
    tracing::info!(user = %user.name, namespace = %terminal.place.namespace, shell = %terminal.place.shell, pod = %terminal.place.pod, terminal = %&terminal.id[..8], held = terminal.kind == Kind::Held, recorded = terminal.is_recorded(), "terminal opened");
    Ok(terminal)
}

/// What a page is told when its shell's pod has no session holder.
const PLAIN_NOTICE: &str = "this shell's pod has no session holder yet (it gets one at its next restart): this terminal ends with its connection";

/// Whether an exec failed because the pod has no session holder (from before the holder).
fn holder_missing(why: &str) -> bool {
    why.contains(myownshell_session::BINARY) && (why.contains("no such file") || why.contains("not found"))
}

/// An ending before a terminal started, as the page is told it: the exec that broke or the
/// holder that did not answer in time may well open on the next try; the holder's refusal, an
/// ended session or lost access stand.
fn unopened(ending: &Ending) -> Unopened {
    match ending {
        Ending::Failed(why) | Ending::Closed(why) => Unopened::transient(why.clone()),
        Ending::Refused(why) | Ending::AccessLost(why) | Ending::Ended(_, why) => why.clone().into(),
        Ending::Exited(code) => format!("the session's program exited with code {code}").into(),
        Ending::Detached => String::from("detached").into(),
    }
}

/// Start the exec of a `kind` terminal: held (`attach --framed` as the page asks, no TTY) or
/// plain (`--command`, a TTY).
async fn start(
    gw: &Arc<Gateway>,
    (as_user, credential): (&AsUser, &Credential),
    (id, place, kind): (String, &Place, Kind),
    query: &TerminalQuery,
    recording: Option<Recording>,
) -> Result<Arc<Terminal>, Unopened> {
    let (command, params) = match kind {
        Kind::Held => {
            let params = AttachParams::default().stdin(true).stdout(true).stderr(true).container(SHELL_CONTAINER);
            (myownshell_session::exec::attach(&hello(&credential.user.name, query)), params)
        }
        Kind::Plain => (gw.settings.command.clone(), AttachParams::interactive_tty().container(SHELL_CONTAINER)),
    };
    let exec = kube::core::Request::new(Pod::url_path(&(), Some(&place.namespace)))
        .exec(&place.pod, command, &params)
        .map_err(|e| e.to_string())?;
    let connection = as_user.connect(exec).await.map_err(|e| match e.transient() {
        true => Unopened::transient(e.to_string()),
        false => e.to_string().into(),
    })?;
    let forget = Arc::downgrade(gw);
    let terminal = Terminal::start(
        id,
        credential.clone(),
        (place.clone(), kind),
        connection,
        gw.settings.scrollback,
        recording,
        move |t| {
            if let Some(gw) = forget.upgrade() {
                gw.terminals.remove(&t.id);
            }
        },
    );
    if kind == Kind::Held {
        let started = tokio::time::timeout(HOLDER_ANSWERS, terminal.started()).await;
        if started.is_err() {
            terminal.close("the session holder did not answer".into());
        }
    }
    Ok(terminal)
}

/// The hello of a held terminal: the session the page names (`session`), a new one (`new`), or
/// the user's newest detached one, else a new one; read-only if the page asks.
fn hello(user: &str, query: &TerminalQuery) -> Hello {
    let session = match (&query.session, query.new.is_some()) {
        (Some(id), _) => Which::Attach { id: id.clone() },
        (None, true) => Which::New { command: None },
        (None, false) => Which::AttachOrNew { command: None },
    };
    let size = match (query.cols, query.rows) {
        (Some(cols), Some(rows)) if size_ok(cols, rows) => Some(Size { cols, rows }),
        _ => None,
    };
    Hello { version: VERSION, user: user.to_owned(), session, read_only: query.read_only.is_some(), size }
}

/// The shell's ready pod, read as the user, telling the page what it waits for meanwhile.
async fn find_pod(gw: &Gateway, as_user: &AsUser, place: &Place, socket: &mut Socket) -> Result<Found, Unopened> {
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
        TargetError::Api(m) | TargetError::Stopped(m) => m.into(),
        TargetError::Unavailable(m) => Unopened::transient(m),
        timeout @ TargetError::Timeout(..) => timeout.to_string().into(),
    })
}

/// The recording of a new terminal: its file and writer. A recording that cannot be made
/// refuses the terminal (a shell that asks for recording is never opened unrecorded).
async fn start_recording(
    gw: &Gateway,
    place: &Place,
    user: &myownshell_auth::AuthenticatedUser,
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

/// Why the user reattaching to `terminal` (with `credential`, which may be newer than the one it
/// was opened with) may no longer use it, if they may not: the shell read as them (RBAC's `get`),
/// then [`crate::access`].
pub async fn still_allowed(gw: &Gateway, terminal: &Terminal, credential: &Credential) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_that_did_not_start_is_retried_only_when_it_may_start_next_time() {
        let cases = [
            ("the holder did not answer in time", Ending::Closed("the session holder did not answer".into()), true),
            ("the exec broke before the holder answered", Ending::Failed("the pod closed the connection".into()), true),
            ("the holder refused: no such session", Ending::Refused("no session 0a1b".into()), false),
            ("the session ended meanwhile", Ending::Ended("killed", "ended by alice".into()), false),
            ("access lost", Ending::AccessLost("no longer shared".into()), false),
            ("the program exited", Ending::Exited(1), false),
        ];
        for (what, ending, retry) in cases {
            assert_eq!(unopened(&ending).retry, retry, "{what}");
        }
    }
}
