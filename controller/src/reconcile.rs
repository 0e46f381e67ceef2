//! One reconcile of one `MyOwnShell`: finalizer, Deployment, status, events; and the error policy.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, names};
use tracing::{debug, instrument, warn};

use crate::apply_deployment::{ensure_deployment, find_deployment, instance_free};
use crate::cleanup::cleanup;
use crate::error::{Error, api_message};
use crate::events::{self, actions};
use crate::memo::{self, DeploymentCache, StatusMemo};
use crate::metrics::Metrics;
use crate::object_map::ObjectMap;
use crate::ownership;
use crate::pending_events::PendingEvents;
use crate::status::{self, Failure};

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    /// For every API call: applies, status patches, reads past the cache, deletes.
    pub(crate) client: Client,
    /// Our Deployments as last seen (watch cache plus our own recent applies).
    pub(crate) deployments: DeploymentCache,
    /// The `MyOwnShell` watch cache: its size is the `managed_objects` gauge.
    pub(crate) shells: Store<MyOwnShell>,
    /// Publishes the events on `MyOwnShell` objects.
    pub(crate) recorder: events::Publisher,
    /// The controller's metrics (reconciles, writes, managed objects).
    pub(crate) metrics: Metrics,
    /// Status writes the `MyOwnShell` watch has not delivered yet.
    pub(crate) statuses: StatusMemo,
    /// When each object's oldest event not yet reconciled arrived (the queue-latency metric).
    pub(crate) pending_events: PendingEvents,
    /// Consecutive failures per object, for the per-object exponential backoff.
    failures: ObjectMap<MyOwnShell, u32>,
}

impl Context {
    /// The shared state of all reconciles, with no failures counted yet.
    pub fn new(
        client: Client,
        deployments: DeploymentCache,
        shells: Store<MyOwnShell>,
        recorder: events::Publisher,
        metrics: Metrics,
        statuses: StatusMemo,
        pending_events: PendingEvents,
    ) -> Self {
        Self {
            client,
            deployments,
            shells,
            recorder,
            metrics,
            statuses,
            pending_events,
            failures: ObjectMap::default(),
        }
    }
}

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

/// The reconcile entry point for `kube::runtime::Controller`.
#[instrument(skip_all, fields(name = %shell.name_any(), namespace = shell.namespace().as_deref().unwrap_or_default()))]
pub async fn reconcile(shell: Arc<MyOwnShell>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = ObjectRef::from_obj(&*shell);
    if let Some(waited) = ctx.pending_events.started(&key, std::time::Instant::now()) {
        ctx.metrics.queue_latency.observe(waited.as_secs_f64());
    }
    let measure = ctx.metrics.start_reconcile();
    let result = reconcile_inner(shell, &ctx).await;
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

/// Bring the Deployment and the status in line with the spec.
async fn apply(shell: &MyOwnShell, api: &Api<MyOwnShell>, ctx: &Context) -> Result<Action, Error> {
    if !ctx.deployments.wait_until_ready().await {
        return Err(Error::CacheStopped);
    }
    let name = shell.name_any();
    let (current, error) = match find_deployment(shell, ctx).await {
        Err(e) => (None, Some(e)),
        // Never write what is not ours, and never report its pods as our shells.
        Ok(Some(d)) if !ownership::of(&d, shell).is_ours() => (None, Some(Error::DeploymentConflict(name.clone()))),
        Ok(live) => {
            let written = async {
                instance_free(shell, live.as_ref(), ctx).await?;
                ensure_deployment(shell, live.as_ref(), ctx).await
            };
            match written.await {
                Ok(current) => (current, None),
                Err(e) => (live, Some(e)),
            }
        }
    };
    let failure = error.as_ref().map(|e| Failure { reason: e.reason(), message: failure_message(e) });
    let previous = ctx.statuses.latest(shell);
    let status = status::compute(shell, previous.as_ref(), current.as_deref(), failure.as_ref(), &status::now());
    let status_written = if previous.as_ref() != Some(&status) {
        ctx.metrics.wrote("status");
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status::merge_patch(&status))).await {
            Ok(written) => {
                ctx.statuses.record(shell, status, memo::echo_version(shell, &written));
                Ok(())
            }
            Err(e) => Err(Error::WriteStatus(e)),
        }
    } else {
        Ok(())
    };
    if let Some(e) = error {
        // The recorder folds repeats of the same event into one series, so a failure that
        // persists through the backoff does not flood the namespace with events.
        let note = failure_message(&e);
        let reason = if e.is_conflict() {
            if !previous.as_ref().is_some_and(|s| status::degraded_by(s, e.reason())) {
                warn!(shell = %name, "{note}");
            }
            e.reason()
        } else {
            reasons::RECONCILE_FAILED
        };
        events::publish(&ctx.recorder, &ctx.metrics, shell, EventType::Warning, reason, actions::RECONCILE, note);
        return Err(e);
    }
    status_written?;
    Ok(Action::await_change())
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
pub fn error_policy(shell: Arc<MyOwnShell>, error: &Error, ctx: Arc<Context>) -> Action {
    if error.is_waiting() {
        return Action::requeue(TERMINATING_RECHECK);
    }
    if error.is_conflict() {
        debug!(shell = %shell.name_any(), namespace = ?shell.namespace(), error = %error, "blocked by another Deployment");
        return Action::requeue(CONFLICT_RECHECK);
    }
    let failures = ctx.failures.update(
        ObjectRef::from_obj(&*shell),
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
