//! One reconcile of one `MyOwnShell`: finalizer, Deployment, status, events; and the error policy.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, MyOwnShellStatus, defaults, names};
use tracing::{debug, info, instrument, warn};

use crate::cache::cached_shell::{CachedShell, retype};
use crate::cache::memo;
use crate::context::Context;
use crate::error::{Error, api_message};
use crate::events::{self, EventType, actions};
use crate::health::diagnose::{Diagnosis, diagnose};
use crate::home;
use crate::home::assess::{Assessment, assess, pod_waits_for_home};
use crate::life::lifetime::{self, Phase};
use crate::life::rollout;
use crate::ownership;
use crate::write::announce;
use crate::write::apply_deployment::{Wanted, ensure_deployment, find_deployment, instance_free};
use crate::write::cleanup::{cleanup, delete_stopped};
use crate::write::deletes_in_flight::RECORD_WAIT_AT_MOST;
use crate::write::status::{self, Failure};
use crate::write::stop_deployment::{Removal, remove_deployment};

/// How long to wait before retrying an object that failed `failures` times in a row:
/// 500 ms doubling up to 5 minutes.
pub fn backoff_delay(failures: u32) -> Duration {
    const BASE: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(300);
    BASE.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1))).min(MAX)
}

/// How often cleanup looks again while the Deployment is terminating (its deletion event
/// usually triggers the owner first).
const TERMINATING_RECHECK: Duration = Duration::from_secs(2);

/// How often an object blocked by a foreign Deployment (or by another Deployment's selector)
/// looks again. A foreign Deployment without our labels is outside the Deployment watch, and one
/// with them is mapped to the shell of its own name, so the blocker's removal sends this object
/// no event; this recheck is what lets the conflict resolve by itself. One read per blocked
/// object per period.
const CONFLICT_RECHECK: Duration = Duration::from_secs(5);

/// The reconcile entry point for `kube::runtime::Controller`: the shell, unpacked from the
/// watch cache.
#[instrument(skip_all, fields(name = %cached.name_any(), namespace = cached.namespace().as_deref().unwrap_or_default()))]
pub async fn reconcile(cached: Arc<CachedShell>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = retype(&ObjectRef::from_obj(&*cached));
    if let Some(waited) = ctx.pending_events.started(&key, std::time::Instant::now()) {
        ctx.metrics.queue_latency.observe(waited.as_secs_f64());
    }
    let measure = ctx.metrics.start_reconcile();
    let result = match unpacked(&cached, &ctx).await {
        Ok(Some(shell)) => reconcile_inner(Arc::new(shell), &ctx).await,
        // Gone since the cache saw it: its deletion event follows.
        Ok(None) => Ok(Action::await_change()),
        Err(e) => Err(e),
    };
    ctx.metrics.managed_objects.set(ctx.shells.len() as i64);
    let label = match &result {
        Ok(_) => {
            ctx.failures.remove(&key);
            "success"
        }
        Err(e) => e.metric_label(),
    };
    measure.finish(label);
    result
}

/// The shell `cached` holds; read from the apiserver if it does not unpack (never, short of a
/// bug), `None` if it is gone.
async fn unpacked(cached: &CachedShell, ctx: &Context) -> Result<Option<MyOwnShell>, Error> {
    if let Some(shell) = cached.shell() {
        return Ok(Some(shell));
    }
    let (name, namespace) = (cached.name_any(), cached.namespace().unwrap_or_default());
    warn!(shell = %name, namespace = %namespace, "the cached shell does not unpack: reading it from the apiserver");
    let api: Api<MyOwnShell> = Api::namespaced(ctx.client.clone(), &namespace);
    api.get_opt(&name).await.map_err(|source| Error::ReadShell { name, source })
}

async fn reconcile_inner(shell: Arc<MyOwnShell>, ctx: &Context) -> Result<Action, Error> {
    let name = shell.name_any();
    let namespace = shell.namespace().unwrap_or_default();
    let api: Api<MyOwnShell> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = finalizer(&api, names::FINALIZER, shell, |event| async {
        match event {
            FinalizerEvent::Apply(shell) => apply(&shell, &api, ctx).await,
            FinalizerEvent::Cleanup(shell) => cleanup(&shell, ctx).await,
        }
    })
    .await;
    match result {
        // The object is already gone: a reconcile of a stale cached copy (queued by the
        // Deployment's deletion, say) cleaned up after the one that removed the finalizer.
        // Removing a finalizer from an object that no longer exists is success.
        Err(kube::runtime::finalizer::Error::RemoveFinalizer(kube::Error::Api(s))) if s.code == 404 => {
            debug!(shell = %name, "finalizer already gone with the object");
            Ok(Action::await_change())
        }
        other => other.map_err(|e| Error::Finalizer(Box::new(e))),
    }
}

/// Until every cache a reconcile reads holds its first list.
async fn caches_ready(ctx: &Context) -> Result<(), Error> {
    if !ctx.deployments.wait_until_ready().await {
        return Err(Error::CacheStopped);
    }
    ctx.open.wait_synced().await;
    ctx.classes.wait_synced().await;
    Ok(())
}

/// Bring the Deployment and the status in line with the spec and the shell's lifetime.
async fn apply(shell: &MyOwnShell, api: &Api<MyOwnShell>, ctx: &Context) -> Result<Action, Error> {
    caches_ready(ctx).await?;
    let namespace = shell.namespace().unwrap_or_default();
    if ctx.terminating.contains(&namespace) {
        debug!(shell = %shell.name_any(), "the namespace is being deleted: the shell's deletion follows");
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let previous = ctx.statuses.latest(shell);
    let size = shell.spec.size.unwrap_or(defaults::SIZE);
    // A class that asks for approval: the shell runs only while approved, and stops when its
    // approval runs out, warned ahead like any lifetime stop.
    let (verdict, approval) = crate::starts::approval(shell, ctx, now);
    let plan = lifetime::plan_approved(shell, previous.as_ref(), now, approved_until(&verdict));
    // A shell runs only where the connect gate looks (`cache::open_namespaces`): elsewhere it is
    // held at no pods, and says so if it would run.
    let open = ctx.open.is_open(&namespace);
    let closed = !open && plan.replicas(size) > 0;
    let (home, home_error, hard) = home(shell, ctx).await;
    // A claim of the shell's name that is not its home holds it too: never mounted, no pods.
    let home_held = home.as_ref().is_some_and(|h| h.hold);
    let unapproved = !verdict.allows_running();
    let (plan, waiting) =
        room_for(shell, if open && !home_held && !unapproved { plan } else { plan.held() }, size, ctx);
    if let (true, Phase::Stopped(stop)) = (plan.delete, &plan.phase) {
        return delete_stopped(shell, stop, api, ctx).await;
    }
    let replicas = plan.replicas(size);
    let (activity, lifetime_tells_scale) = (last_activity(previous.as_ref()), plan.starts_or_stops());
    let wanted = Wanted { replicas, activity, now, lifetime_tells_scale, mount_home: !home_held };
    let (current, error, template) = match hard {
        Some(e) => (untouched(shell, ctx).await, Some(e), None),
        // A stopped shell has no Deployment (`write::stop_deployment` says why).
        None if matches!(plan.phase, Phase::Stopped(_)) => match remove_deployment(shell, ctx).await {
            Removal::Deleted => return Ok(stop_begun(ctx, previous.as_ref(), &plan, now)),
            Removal::Settled(current, error, template) => (current, error, template),
        },
        None => write_deployment(shell, &wanted, ctx).await,
    };
    if error.as_ref().is_some_and(Error::is_namespace_terminating) {
        ctx.terminating.insert(&namespace);
        debug!(shell = %shell.name_any(), "the namespace is being deleted: the shell's deletion follows");
        return Ok(Action::await_change());
    }
    let diagnosis = pods_problem(shell, ctx, replicas, home.as_ref(), now);
    let error = error.or(home_error);
    let home_problem =
        home.as_ref().and_then(|h| h.problem.clone()).map(|(reason, message)| Failure { reason, message });
    let failure = failure_of(error.as_ref(), closed.then(|| not_open(&namespace)), &home_problem, &waiting);
    let class_fit = crate::starts::fit(shell, ctx);
    let inputs = status::Inputs {
        deployment: current.as_deref(),
        failure: failure.as_ref(),
        plan: Some(&plan),
        diagnosis: diagnosis.as_ref(),
        template: template.as_ref(),
        home: home.as_ref(),
        class_fit: class_fit.as_ref(),
        approval: approval.as_ref(),
    };
    let status = status::compute(shell, previous.as_ref(), &inputs, &myownshell_runtime::time::to_second(now));
    ctx.metrics.shell_degraded(&namespace, &shell.name_any(), status::degraded_reason(&status));
    let written = write_status(shell, api, previous.as_ref(), &status, ctx).await;
    let told_as = told_as(error.as_ref(), closed, home_problem.as_ref(), waiting.as_ref(), diagnosis.as_ref());
    let mut told = announce::trouble_event(previous.as_ref(), &status, told_as).into_iter().collect::<Vec<_>>();
    // What the lifetime did is told once it is recorded: a reconcile that could not write the
    // status does it again, and tells it then.
    if written.is_ok() {
        told.extend(recorded(shell, ctx, previous.as_ref(), &plan, approval.as_ref()));
    }
    tell(shell, ctx, told);
    if let Some(e) = error {
        return Err(e);
    }
    written?;
    let quiet_at = template.and_then(|t| t.waits_until());
    // A waiting shell looks again soon: a slot frees when a shell of its class stops.
    let recheck = waiting.map(|_| myownshell_runtime::time::plus(now, SLOT_RECHECK));
    Ok(next_look([plan.wake_at, diagnosis.and_then(|d| d.until), quiet_at, recheck]))
}

/// Until when the shell is approved, if its class asks for approval and it is.
fn approved_until(verdict: &myownshell_api::approval::Verdict) -> Option<Timestamp> {
    match verdict {
        myownshell_api::approval::Verdict::Approved { until, .. } => Some(*until),
        _ => None,
    }
}

/// The worst problem of the shell's pods, if any. None for a shell meant to run no pods (its last
/// ones are on their way out), nor for a pod that only waits for its home to bind (`HomeReady`
/// tells that, not `Degraded`).
fn pods_problem(
    shell: &MyOwnShell,
    ctx: &Context,
    replicas: i32,
    home: Option<&Assessment>,
    now: Timestamp,
) -> Option<Diagnosis> {
    let namespace = shell.namespace().unwrap_or_default();
    (replicas > 0)
        .then(|| diagnose(&ctx.pods.of(&namespace, &shell.name_any()), &|n| ctx.nodes.not_ready(n), now))
        .flatten()
        .filter(|d| !pod_waits_for_home(home, d))
}

/// What the status says is wrong, the first that applies: the reconcile's error, the namespace
/// not opened (`closed`), the home's problem, the wait for a slot of the class.
fn failure_of(
    error: Option<&Error>,
    closed: Option<Failure>,
    home_problem: &Option<Failure>,
    waiting: &Option<Failure>,
) -> Option<Failure> {
    error
        .map(|e| Failure { reason: e.reason(), message: failure_message(e) })
        .or(closed)
        .or_else(|| home_problem.clone())
        .or_else(|| waiting.clone())
}

/// The Events of what this reconcile recorded in the status (a stop's warning, a change of
/// what the approvals come to), each transition and approval change counted in the metrics.
fn recorded(
    shell: &MyOwnShell,
    ctx: &Context,
    previous: Option<&MyOwnShellStatus>,
    plan: &lifetime::Plan,
    approval: Option<&status::Value>,
) -> Vec<announce::Announcement> {
    let mut told = announce::lifetime_events(&shell.name_any(), plan);
    for (transition, reason) in announce::transitions(plan) {
        let labels = crate::metrics::TransitionLabels { transition: transition.into(), reason };
        ctx.metrics.lifetime_transitions.get_or_create(&labels).inc();
    }
    if let Some(event) = announce::approval_event(previous, approval) {
        let labels = crate::metrics::ReasonLabels { reason: event.reason.into() };
        ctx.metrics.approval_changes.get_or_create(&labels).inc();
        told.push(event);
    }
    told
}

/// How long a stop whose Deployment a reconcile deleted waits for the deletion's watch event,
/// which reconciles it again and records the stop, before it is reconciled anyway. The event
/// comes within milliseconds; this bounds how long a lost one (a watch that reconnected across
/// the deletion sees no event of it) leaves the status behind.
pub const STOP_RECORD_FALLBACK: Duration = Duration::from_secs(30);

/// A stop's Deployment deleted by this reconcile ([`Removal::Deleted`] says why its status waits
/// for the next one): how late after its deadline it began is observed here, once per stop.
fn stop_begun(ctx: &Context, previous: Option<&MyOwnShellStatus>, plan: &lifetime::Plan, now: Timestamp) -> Action {
    if let Some(late) = announce::stop_delay(previous, plan, now) {
        ctx.metrics.lifetime_stop_delay.observe(late.as_secs_f64());
    }
    Action::requeue(STOP_RECORD_FALLBACK)
}

/// How often a shell waiting for a slot of its class looks again.
const SLOT_RECHECK: Duration = Duration::from_secs(5);

/// `plan`, held at no pods when it would start the shell and its class has no room for it (a
/// running shell keeps its slot), and why it waits.
fn room_for(shell: &MyOwnShell, plan: lifetime::Plan, size: i32, ctx: &Context) -> (lifetime::Plan, Option<Failure>) {
    match crate::starts::check(shell, plan.replicas(size), ctx) {
        None => (plan, None),
        Some(waiting) => (plan.held(), Some(waiting)),
    }
}

/// The reason and action of the Warning Event for a reconcile's trouble, if any.
fn told_as(
    error: Option<&Error>,
    closed: bool,
    home_problem: Option<&Failure>,
    waiting: Option<&Failure>,
    diagnosis: Option<&Diagnosis>,
) -> Option<(&'static str, &'static str)> {
    match (error, diagnosis) {
        (Some(e), _) if e.is_conflict() => Some((e.reason(), actions::RECONCILE)),
        (Some(_), _) => Some((reasons::RECONCILE_FAILED, actions::RECONCILE)),
        (None, _) if closed => Some((reasons::NAMESPACE_NOT_OPEN, actions::RECONCILE)),
        (None, _) if home_problem.is_some() => home_problem.map(|p| (p.reason, actions::HOME)),
        (None, _) if waiting.is_some() => waiting.map(|p| (p.reason, actions::RECONCILE)),
        (None, Some(d)) => Some((d.reason, actions::CHECK_PODS)),
        (None, None) => None,
    }
}

/// Log and publish what a reconcile tells.
fn tell(shell: &MyOwnShell, ctx: &Context, told: Vec<announce::Announcement>) {
    for a in told {
        if a.type_ == EventType::Warning {
            warn!(shell = %shell.name_any(), reason = a.reason, "{}", a.note);
        } else {
            info!(shell = %shell.name_any(), reason = a.reason, "{}", a.note);
        }
        events::publish(&ctx.recorder, &ctx.metrics, shell, a.type_, a.reason, a.action, a.note);
    }
}

/// The shell's home (`None` without one): its claim made sure of and what it means for the
/// shell; why it could not grow, if it could not (told, and the rest goes on); and the error, if
/// the claim could not be read or made (the Deployment is then left as it is: a transient error
/// must not restart a shell without its home).
async fn home(shell: &MyOwnShell, ctx: &Context) -> (Option<Assessment>, Option<Error>, Option<Error>) {
    if shell.spec.home.is_none() {
        return (None, None, None);
    }
    ctx.claims.wait_synced().await;
    let found = match home::write::ensure(shell, ctx).await {
        Ok(found) => found,
        Err(e) => return (None, None, Some(e)),
    };
    let claim = found.as_ref().map(|f| (&*f.claim, f.ownership));
    let assessment = assess(&names::home_claim(&shell.name_any()), claim, &|n| ctx.nodes.not_ready(n));
    (Some(assessment), found.and_then(|f| f.grow_error), None)
}

/// The shell's Deployment as it is, if it is ours, for the status of a reconcile that does not
/// write it.
async fn untouched(shell: &MyOwnShell, ctx: &Context) -> Option<Arc<Deployment>> {
    find_deployment(shell, ctx).await.ok().flatten().filter(|d| ownership::of(d, shell).is_ours())
}

/// The last sign a shell is in use: its last connection, or its start, whichever is later.
fn last_activity(status: Option<&MyOwnShellStatus>) -> Option<Timestamp> {
    let status = status?;
    let connected = status.last_connection.as_ref().map(|c| c.time.0);
    let started = status.started_at.as_ref().map(|t| t.0);
    connected.max(started)
}

/// Look up the Deployment, make sure it is ours, and apply what `wanted` asks. Returns the
/// Deployment as it is now (the live one if the write failed), the failure if any, and what was
/// decided of its pod template.
async fn write_deployment(
    shell: &MyOwnShell,
    wanted: &Wanted,
    ctx: &Context,
) -> (Option<Arc<Deployment>>, Option<Error>, Option<rollout::Decision>) {
    match find_deployment(shell, ctx).await {
        Err(e) => (None, Some(e), None),
        // Never write what is not ours, and never report its pods as our shells.
        Ok(Some(d)) if !ownership::of(&d, shell).is_ours() => {
            (None, Some(Error::DeploymentConflict(shell.name_any())), None)
        }
        Ok(live) => {
            let written = async {
                instance_free(shell, live.as_ref(), ctx).await?;
                ensure_deployment(shell, live.as_ref(), wanted, ctx).await
            };
            match written.await {
                Ok((current, decision)) => (current, None, Some(decision)),
                Err(e) => (live, Some(e), None),
            }
        }
    }
}

/// Patch the status to `status` unless it is not worth a write over `previous` (the latest
/// known): the same, or a pod count that the rollout's next written change carries
/// ([`status::worth_writing`]). A stopped shell's status waits first, a second at most, for the
/// Deployment deletes in flight.
async fn write_status(
    shell: &MyOwnShell,
    api: &Api<MyOwnShell>,
    previous: Option<&MyOwnShellStatus>,
    status: &MyOwnShellStatus,
    ctx: &Context,
) -> Result<(), Error> {
    if !status::worth_writing(previous, status) {
        return Ok(());
    }
    // A stop's record waits for the deletes of a burst of stops (`write::deletes_in_flight`).
    if status.stopped.is_some() && !ctx.deletes.settled(RECORD_WAIT_AT_MOST).await {
        debug!(shell = %shell.name_any(), "recording the stop with deletes still in flight");
    }
    ctx.metrics.wrote("status");
    if tracing::enabled!(tracing::Level::DEBUG) {
        debug!(shell = %shell.name_any(), changes = ?crate::write::status_changes::changes(previous, status), "writing the status");
    }
    let patch = Patch::Merge(status::merge_patch(status));
    let written =
        api.patch_status(&shell.name_any(), &PatchParams::default(), &patch).await.map_err(Error::WriteStatus)?;
    ctx.statuses.record(shell, status.clone(), memo::echo_version(shell, &written));
    Ok(())
}

/// When to reconcile again without a change: at the first of the lifetime's next deadline, the
/// moment a pod problem lapses by itself and the quiet moment a waiting template waits for;
/// else only on a change.
///
/// The delay is counted from the clock as the reconcile returns, not from the `now` it started
/// with: kube's Controller counts a requeue from the return, so a reconcile whose writes took a
/// second under load would otherwise wake a second after the deadline. (The echo of our own
/// status write is filtered out, so that reconcile is usually the last before the deadline.)
fn next_look(moments: [Option<Timestamp>; 4]) -> Action {
    match moments.into_iter().flatten().min() {
        Some(at) => Action::requeue(lifetime::until(at, Timestamp::now())),
        None => Action::await_change(),
    }
}

/// Why a shell in `namespace`, which is not opened to shells, runs no pods.
fn not_open(namespace: &str) -> Failure {
    Failure {
        reason: reasons::NAMESPACE_NOT_OPEN,
        message: format!(
            "namespace {namespace} is not opened to shells, so the gate that keeps strangers out of a shell's pods does not look there: the shell runs no pods until a cluster administrator opens it (kubectl label namespace {namespace} {}={})",
            names::SHELLS_NAMESPACE_LABEL,
            names::SHELLS_NAMESPACE_LABEL_VALUE
        ),
    }
}

fn failure_message(e: &Error) -> String {
    match e {
        Error::ApplyDeployment { name, source } => format!("applying Deployment {name}: {}", api_message(source)),
        other => other.to_string(),
    }
}

/// What to do after a failed reconcile: wait during cleanup, look again at a steady pace while a
/// foreign Deployment is in the way (the condition and the event already say so), back off
/// exponentially per object on real failures.
pub fn error_policy(shell: Arc<CachedShell>, error: &Error, ctx: Arc<Context>) -> Action {
    if error.is_waiting() {
        return Action::requeue(TERMINATING_RECHECK);
    }
    if error.is_conflict() {
        debug!(shell = %shell.name_any(), namespace = ?shell.namespace(), error = %error, "blocked by another Deployment");
        return Action::requeue(CONFLICT_RECHECK);
    }
    let failures = ctx.failures.update(
        retype(&ObjectRef::from_obj(&*shell)),
        || 0,
        |n| {
            *n = n.saturating_add(1);
            *n
        },
    );
    let delay = backoff_delay(failures);
    warn!(shell = %shell.name_any(), namespace = ?shell.namespace(), error = %error, failures, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_failure_and_is_capped() {
        let cases = [
            (0, 500),
            (1, 500),
            (2, 1_000),
            (3, 2_000),
            (4, 4_000),
            (10, 256_000),
            (11, 300_000),
            (40, 300_000),
            (u32::MAX, 300_000),
        ];
        for (failures, millis) in cases {
            assert_eq!(backoff_delay(failures), Duration::from_millis(millis), "after {failures} failures");
        }
    }
}
