//! Whether a shell about to run may start: its class's caps on running shells
//! ([`crate::life::slots`]), counted from the caches (the shells of its class and whether their
//! Deployments run pods). A shell already running keeps its slot whatever the caps; one that
//! stops gives it back.

use kube::ResourceExt;
use myownshell_api::MyOwnShell;
use myownshell_api::names::reasons;

use crate::cache::cached_shell::CachedShell;
use crate::context::Context;
use crate::life::slots::{Peer, Start};
use crate::write::status::Failure;

/// Whether `shell` holds a slot of its class: its Deployment runs pods, and its last status does
/// not say it waits for a slot. Pods a waiting shell runs were started by someone else (an
/// administrator's `kubectl scale deploy`; editors are refused by `config/policy/shell_workloads.yaml`),
/// never by a start the caps let through: they take no slot, and the next apply takes them away.
fn holds_slot(ctx: &Context, shell: &MyOwnShell) -> bool {
    runs(ctx, shell) && !waits(ctx, shell)
}

/// [`holds_slot`] for a shell as the watch cache keeps it, unpacked only if its Deployment runs
/// pods. One that runs pods and does not unpack (never, short of a bug) counts as holding its
/// slot: a cap errs towards one start too few, never one too many.
fn cached_holds_slot(ctx: &Context, cached: &CachedShell) -> bool {
    runs(ctx, cached) && cached.shell().is_none_or(|shell| !waits(ctx, &shell))
}

/// Whether the latest status of `shell` says it waits for a slot of its class.
fn waits(ctx: &Context, shell: &MyOwnShell) -> bool {
    ctx.statuses.latest(shell).is_some_and(|s| waits_for_a_slot(&s))
}

/// Whether the Deployment of `shell` runs pods.
fn runs(ctx: &Context, shell: &impl ResourceExt) -> bool {
    let (namespace, name) = (shell.namespace().unwrap_or_default(), shell.name_any());
    ctx.deployments.get(&namespace, &name).and_then(|d| d.spec.as_ref().and_then(|s| s.replicas)).unwrap_or(0) > 0
}

/// Whether a status says its shell waits for a slot of its class.
fn waits_for_a_slot(status: &myownshell_api::MyOwnShellStatus) -> bool {
    status.conditions.iter().any(|c| c.reason == reasons::RUNNING_LIMIT_REACHED)
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
    if holds_slot(ctx, shell) {
        ctx.slots.keep(&key, class);
        return None;
    }
    let caps = ctx.classes.get(class);
    if caps.per_user.is_none() && caps.per_namespace.is_none() {
        ctx.slots.keep(&key, class);
        return None;
    }
    let peers: Vec<Peer> = ctx
        .shells
        .state()
        .iter()
        .filter(|s| s.class_name() == Some(class))
        .filter(|s| caps.per_namespace.is_some() || s.owner() == shell.spec.owner.as_deref())
        .map(|s| {
            let (ns, n) = (s.namespace().unwrap_or_default(), s.name_any());
            Peer { runs: cached_holds_slot(ctx, s), shell: (ns, n), owner: s.owner().map(str::to_owned) }
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

/// The `FitsClass` condition of a shell with a class: whether its image (its own, else its
/// class's default, else the operator's) is one its class allows; `None` without a class.
pub fn fit(shell: &MyOwnShell, ctx: &Context) -> Option<(bool, &'static str, String)> {
    let name = shell.spec.class_name.as_deref()?;
    let Some(class) = ctx.classes.class(name) else {
        return Some((
            false,
            reasons::CLASS_MISSING,
            format!(
                "no MyOwnShellClass is named {name:?} (deleted?): the shell runs on as it is, and its next start is refused"
            ),
        ));
    };
    let image = myownshell_api::class::effective::image(&shell.spec, Some(&class.spec));
    match class.spec.images.as_ref().and_then(|i| i.allowed.as_ref()) {
        Some(allowed) if !myownshell_api::image_pattern::any_matches(allowed, image) => Some((
            false,
            reasons::CLASS_FORBIDS,
            format!(
                "the image {image:?} is no longer one MyOwnShellClass {name:?} allows ({}): the shell runs on as it is, and its next start is refused until spec.image is one of them",
                allowed.join(", ")
            ),
        )),
        _ => Some((true, reasons::CLASS_FITS, format!("the shell fits MyOwnShellClass {name:?}"))),
    }
}

/// What the shell's approvals come to now, and the `Approved` condition (`None`: its class asks
/// for none, or it has no class).
pub fn approval(
    shell: &MyOwnShell,
    ctx: &Context,
    now: k8s_openapi::jiff::Timestamp,
) -> (myownshell_api::approval::Verdict, Option<(bool, &'static str, String)>) {
    use myownshell_api::approval::{Asked, Verdict, valid_for, verdict};
    let class = shell.spec.class_name.as_deref().and_then(|name| ctx.classes.class(name));
    let rule = class.as_ref().and_then(|c| c.spec.approval.as_ref());
    let asked = rule.map(|rule| Asked {
        rule,
        // The CRD's pattern keeps an unreadable duration out; one written around it counts as 8h.
        valid_for: myownshell_runtime::time::parse_duration(valid_for(rule))
            .unwrap_or(std::time::Duration::from_secs(8 * 3600)),
    });
    let approvals = shell.spec.approvals.as_deref().unwrap_or_default();
    let verdict = verdict(asked, approvals, shell.spec.owner.as_deref(), now);
    let condition = match &verdict {
        Verdict::NotRequired => None,
        Verdict::Approved { .. } => Some((true, reasons::APPROVED, verdict.words())),
        Verdict::Waiting { expired: true, .. } => Some((false, reasons::APPROVAL_EXPIRED, verdict.words())),
        Verdict::Waiting { .. } => Some((false, reasons::WAITING_FOR_APPROVAL, verdict.words())),
        Verdict::Rejected { .. } => Some((false, reasons::REJECTED, verdict.words())),
    };
    (verdict, condition)
}
