//! The connect webhook: `kubectl exec`, `attach`, `port-forward`, `cp` (an exec of `tar`), a
//! proxied request to a pod, and `kubectl debug` (an ephemeral container), into a shell's pod,
//! let through only for the shell's owner and those it is shared with ([`crate::connect::access`]).
//!
//! For CONNECT the request's object is the options (`PodExecOptions`, …), not the Pod, so
//! nothing of the pod is read but its name, which tells whose shell it is. Pods that are no
//! shell's are let through untouched and unrecorded. Every answer about a shell's pod comes with
//! a [`Connection`] for the record (an Event, a counter, `status.lastConnection`); recording is
//! the server's job, not this pure function's.

use std::sync::Arc;

use crate::connect::access::{self, Grant, ShellAccess};
use crate::connect::shell_index::ShellIndex;
use crate::review::request::{Operation, Request};
use crate::review::response::Response;

/// How someone connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectKind {
    /// `kubectl exec` (and `kubectl cp`).
    Exec = 0,
    /// `kubectl attach`.
    Attach = 1,
    /// `kubectl port-forward`.
    PortForward = 2,
    /// A request proxied to the pod (`pods/proxy`).
    Proxy = 3,
    /// `kubectl debug`: an ephemeral container added to the pod.
    Debug = 4,
}

impl ConnectKind {
    /// How many there are (the discriminants run from 0).
    pub const COUNT: usize = ConnectKind::Debug as usize + 1;

    /// Each kind, in discriminant order.
    pub const ALL: [ConnectKind; ConnectKind::COUNT] =
        [ConnectKind::Exec, ConnectKind::Attach, ConnectKind::PortForward, ConnectKind::Proxy, ConnectKind::Debug];

    /// The kind a request is, if it is one of them.
    pub fn of(request: &Request<'_>) -> Option<Self> {
        let sub = request.sub_resource.as_deref()?;
        if !request.kind.group.is_empty() || request.kind.version != "v1" {
            return None;
        }
        match (request.operation, sub) {
            (Operation::Connect, "exec") => Some(ConnectKind::Exec),
            (Operation::Connect, "attach") => Some(ConnectKind::Attach),
            (Operation::Connect, "portforward") => Some(ConnectKind::PortForward),
            (Operation::Connect, "proxy") => Some(ConnectKind::Proxy),
            (Operation::Update, "ephemeralcontainers") => Some(ConnectKind::Debug),
            _ => None,
        }
    }

    /// As `status.lastConnection.kind` and the metric label say it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectKind::Exec => "exec",
            ConnectKind::Attach => "attach",
            ConnectKind::PortForward => "portforward",
            ConnectKind::Proxy => "proxy",
            ConnectKind::Debug => "debug",
        }
    }

    /// What the requester tried, for messages.
    fn doing(self) -> &'static str {
        match self {
            ConnectKind::Exec => "exec (or cp) into",
            ConnectKind::Attach => "attach to",
            ConnectKind::PortForward => "port-forward to",
            ConnectKind::Proxy => "proxy to",
            ConnectKind::Debug => "add a debug container to",
        }
    }
}

/// A connection into a shell's pod, allowed or not: what the record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// How.
    pub kind: ConnectKind,
    /// The namespace of the pod and the shell.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The shell the pod belongs to (each, in the rare case of two).
    pub shell: Arc<ShellAccess>,
    /// Who.
    pub user: String,
    /// Why they were let in; `None`: refused.
    pub grant: Option<Grant>,
    /// A dry run: decided, but nothing may be recorded.
    pub dry_run: bool,
}

/// Decide a connection request: the answer, and what to record (nothing for a pod that is no
/// shell's). Every shell the pod's name could belong to must let the user in.
pub fn connect<'a>(
    request: &Request<'a>,
    shells: &ShellIndex,
    admin_groups: &[String],
) -> (Response<'a>, Vec<Connection>) {
    let Some(kind) = ConnectKind::of(request) else {
        let reason = format!(
            "this webhook handles connections to pods, got {} {}",
            request.operation.as_str(),
            request.describe_kind()
        );
        return (Response::invalid(request, reason), Vec::new());
    };
    // `pods/proxy` names the pod with its port and scheme: `POD:8080` is `POD`.
    let pod = access::connected_pod(request.name.as_ref());
    // This webhook is the gate (failurePolicy Fail): a pod it cannot place is not let through.
    // Only a replica that is not ready yet is asked this (readiness waits for the first list).
    if !shells.is_synced() {
        let message = format!(
            "the MyOwnShell webhook has not listed the shells yet, so it cannot tell whose pod {pod} is; try again in a moment"
        );
        return (Response::deny(request.uid.clone(), 503, "ServiceUnavailable", message), Vec::new());
    }
    let user = &request.user_info;
    let decided: Vec<(Arc<ShellAccess>, Option<Grant>)> = shells.in_namespace(&request.namespace, |in_namespace| {
        access::shells_of_pod(in_namespace, pod)
            .into_iter()
            .map(|shell| (shell.clone(), access::may_connect(shell, user, admin_groups)))
            .collect()
    });
    let refused: Vec<&Arc<ShellAccess>> = decided.iter().filter(|(_, grant)| grant.is_none()).map(|(s, _)| s).collect();
    let response = match refused.first() {
        None => Response::allow(request),
        Some(shell) => {
            let message = format!(
                "{} may not {} pod {pod}: it runs shell {}/{} (a MyOwnShell), which only {} may connect to; \
                 its owner can add you to spec.sharedWith",
                user.username,
                kind.doing(),
                request.namespace,
                shell.name,
                shell.who_may_connect()
            );
            Response::deny(request.uid.clone(), 403, "Forbidden", message)
        }
    };
    let allowed = refused.is_empty();
    let record = decided
        .into_iter()
        .map(|(shell, grant)| Connection {
            kind,
            namespace: request.namespace.clone().into_owned(),
            pod: pod.to_owned(),
            shell,
            user: user.username.clone().into_owned(),
            // Refused by one shell is refused: the others did not let anyone in either.
            grant: grant.filter(|_| allowed),
            dry_run: request.dry_run.unwrap_or(false),
        })
        .collect();
    (response, record)
}
