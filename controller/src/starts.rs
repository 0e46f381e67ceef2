//! Whether a shell about to run may start: its class's caps on running shells
//! ([`crate::life::slots`]), counted from the caches (the shells of its class and whether their
//! Deployments run pods). A shell already running keeps its slot whatever the caps; one that
//! stops gives it back.

use kube::ResourceExt;
use myownshell_api::MyOwnShell;
use myownshell_api::names::reasons;

use crate::context::Context;
use crate::life::slots::{Peer, Start};
use crate::write::status::Failure;

fn runs(ctx: &Context, namespace: &str, name: &str) -> bool {
    ctx.deployments.get(namespace, name).and_then(|d| d.spec.as_ref().and_then(|s| s.replicas)).unwrap_or(0) > 0
}

/// Whether `shell`, which would run `replicas` pods, may: `None` if it may (its slot taken or
/// kept, or freed when it runs none), else why it waits.
pub fn check(shell: &MyOwnShell, replicas: i32, ctx: &Context) -> Option<Failure> {
    let (namespace, name) = (shell.namespace().unwrap_or_default(), shell.name_any());
    let key = (namespace.clone(), name.clone());
    let class = shell.spec.class_name.as_deref()?;
    if replicas == 0 {
        ctx.slots.release(&key);
        return None;
    }
    if runs(ctx, &namespace, &name) {
        ctx.slots.keep(&key, class);
        return None;
    }
    let caps = ctx.class_caps.get(class);
    if caps.per_user.is_none() && caps.per_namespace.is_none() {
        ctx.slots.keep(&key, class);
        return None;
    }
    let peers: Vec<Peer> = ctx
        .shells
        .state()
        .iter()
        .filter(|s| s.spec.class_name.as_deref() == Some(class))
        .filter(|s| caps.per_namespace.is_some() || s.spec.owner == shell.spec.owner)
        .map(|s| {
            let (ns, n) = (s.namespace().unwrap_or_default(), s.name_any());
            Peer { runs: runs(ctx, &ns, &n), shell: (ns, n), owner: s.spec.owner.clone() }
        })
        .collect();
    let start = Start { shell: key, class, owner: shell.spec.owner.as_deref() };
    match ctx.slots.admit(&start, caps, &peers) {
        Ok(()) => None,
        Err(full) => Some(Failure {
            reason: reasons::RUNNING_LIMIT_REACHED,
            message: full.message(class, shell.spec.owner.as_deref()),
        }),
    }
}
