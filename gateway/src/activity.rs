//! What the gateway tells the cluster, and its pages, about the shells whose terminals are open,
//! once every `--activity-interval`:
//!
//! - **Use**: a terminal someone typed in, or watched output in, since the last look counts as a
//!   connection: `status.lastConnection` (kind `gateway`, the user, the time of the last
//!   keystroke or output) is written through the same writer as the connect webhook's, so the
//!   idle stop and the quiet moment of a template rollout count it, and a shell in use through
//!   the gateway is never stopped as idle. (A terminal left open with nobody typing and nothing
//!   printed is not use.)
//! - **A coming stop**: while the shell's `Stopping` condition is true, each of its terminals
//!   shows its message once (with an extend button for the owner).
//!
//! One read of each such shell per interval, as the gateway itself (`get` on myownshells,
//! `patch` on myownshells/status: nothing else).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use myownshell_api::names::conditions::STOPPING;
use myownshell_api::{Connection, MyOwnShell, last_connection};
use tokio_util::sync::CancellationToken;

use crate::access::At;
use crate::gateway::Gateway;
use crate::terminal::session::Terminal;

/// The kind of connection a gateway terminal in use is recorded as.
pub const KIND: &str = "gateway";

/// One shell's open terminals, and its latest use.
#[derive(Default)]
struct Shell {
    uid: Option<String>,
    terminals: Vec<Arc<Terminal>>,
    latest: Option<(Timestamp, String, String)>,
}

/// The open terminals by shell.
fn by_shell(terminals: Vec<Arc<Terminal>>) -> HashMap<(String, String), Shell> {
    let mut shells: HashMap<(String, String), Shell> = HashMap::new();
    for terminal in terminals {
        let place = &terminal.place;
        let shell = shells.entry((place.namespace.clone(), place.shell.clone())).or_default();
        shell.uid = place.uid.clone();
        let used = terminal.last_activity();
        if shell.latest.as_ref().is_none_or(|(t, _, _)| used > *t) {
            shell.latest = Some((used, terminal.user.name.clone(), place.pod.clone()));
        }
        shell.terminals.push(terminal);
    }
    shells
}

/// Every `interval` until `shutdown`.
pub async fn run(gw: Arc<Gateway>, interval: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What was last written per shell, not to write it again.
    let mut written: HashMap<(String, String), Timestamp> = HashMap::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let shells = by_shell(gw.terminals.all());
        written.retain(|key, _| shells.contains_key(key));
        for ((namespace, name), shell) in shells {
            let last = written.get(&(namespace.clone(), name.clone())).copied();
            if let Some(at) = look_after(&gw, &namespace, &name, shell, last).await {
                written.insert((namespace, name), at);
            }
        }
    }
}

/// Warn the terminals of one shell of a coming stop, and record its use if it is new; the time
/// recorded, if any.
async fn look_after(
    gw: &Gateway,
    namespace: &str,
    name: &str,
    shell: Shell,
    last: Option<Timestamp>,
) -> Option<Timestamp> {
    let api: Api<MyOwnShell> = Api::namespaced(gw.client.clone(), namespace);
    let current = match api.get_opt(name).await {
        Ok(Some(current)) if shell.uid.is_none() || current.metadata.uid == shell.uid => current,
        Ok(_) => {
            for terminal in &shell.terminals {
                terminal.lose_access(format!("shell {namespace}/{name} was deleted"));
            }
            return None;
        }
        Err(e) => {
            tracing::warn!(error = %e, %namespace, shell = %name, "could not read a shell with open terminals");
            return None;
        }
    };
    // Access lost is access ended ([`crate::access`]).
    let mut open = Vec::with_capacity(shell.terminals.len());
    for terminal in shell.terminals {
        let at = At { shell: &current, uid: terminal.place.uid.as_deref(), pod: &terminal.place.pod };
        match gw.access.refusal(&gw.tokens, &terminal.credential, at).await {
            Some(why) => {
                tracing::info!(user = %terminal.user.name, %namespace, shell = %name, %why, "closed a terminal whose user lost access");
                terminal.lose_access(why);
            }
            None => open.push(terminal),
        }
    }
    let shell = Shell { terminals: open, ..shell };
    let status = current.status.clone().unwrap_or_default();
    let stopping = status.conditions.iter().find(|c| c.type_ == STOPPING && c.status == "True");
    if let Some(stopping) = stopping {
        for terminal in &shell.terminals {
            let owner = current.spec.owner.as_deref() == Some(terminal.user.name.as_str());
            terminal.warn(&stopping.message, owner);
        }
    }
    let (at, user, pod) = shell.latest?;
    if last.is_some_and(|last| at <= last) {
        return None;
    }
    let connection = Connection { user, time: myownshell_runtime::time::to_second(at), pod, kind: KIND.to_owned() };
    match last_connection::write(&api, name, shell.uid.as_deref(), &connection).await {
        Ok(()) => Some(at),
        Err(e) => {
            tracing::warn!(error = %e, %namespace, shell = %name, "could not record a gateway terminal's use");
            None
        }
    }
}
