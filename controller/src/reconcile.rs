//! One reconcile of one `MyOwnShell`: finalizer, Deployment, status, events; and the error policy.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, defaults, names};
use tracing::{debug, info, instrument, warn};

use crate::deployment;
use crate::error::{Error, api_message};
use crate::events::{self, actions};
use crate::labels;
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

/// The Deployment named like `shell`: from the cache, which holds only Deployments carrying our
/// managed-by label; else from the apiserver, because a Deployment without that label (someone
/// else's) may be in the way, and applying over it would take it over.
///
/// Between a 404 here and the apply that creates the Deployment, only someone allowed to create
/// Deployments in the namespace could slip one in; such a Deployment is theirs to lose.
async fn find_deployment(shell: &MyOwnShell, ctx: &Context) -> Result<Option<Arc<Deployment>>, Error> {
    let (name, namespace) = (shell.name_any(), shell.namespace().unwrap_or_default());
    if let Some(cached) = ctx.deployments.get(&namespace, &name) {
        return Ok(Some(cached));
    }
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let live = api.get_opt(&name).await.map_err(|source| Error::ReadDeployment { name, source })?;
    Ok(live.map(|mut d| {
        crate::prune::prune_deployment(&mut d);
        Arc::new(d)
    }))
}

/// Before the Deployment of `shell` is created: that no other Deployment already selects pods by
/// the instance label it would use. Asked of the apiserver (one metadata list) only for names
/// whose label can be shared at all (`labels::may_share_instance`), so creating a shell of an
/// ordinary name costs nothing more.
async fn instance_free(shell: &MyOwnShell, live: Option<&Arc<Deployment>>, ctx: &Context) -> Result<(), Error> {
    let name = shell.name_any();
    if live.is_some() || !labels::may_share_instance(&name) {
        return Ok(());
    }
    let instance = labels::instance_value(&name);
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &shell.namespace().unwrap_or_default());
    let holders = api
        .list_metadata(&ListParams::default().labels(&labels::selector_string(&instance)))
        .await
        .map_err(|source| Error::ReadDeployment { name: name.clone(), source })?;
    match holders.items.into_iter().map(|d| d.name_any()).find(|holder| *holder != name) {
        Some(deployment) => Err(Error::SelectorConflict { deployment, instance }),
        None => Ok(()),
    }
}

/// Server-side apply the desired Deployment unless the live one already matches it. Returns the
/// Deployment as it is now.
async fn ensure_deployment(
    shell: &MyOwnShell,
    live: Option<&Arc<Deployment>>,
    ctx: &Context,
) -> Result<Option<Arc<Deployment>>, Error> {
    let desired = deployment::desired(shell, live.map(|d| &**d))?;
    if !deployment::needs_apply(&desired, live.map(|d| &**d)) {
        debug!(shell = %shell.name_any(), "Deployment up to date; nothing to write");
        return Ok(live.cloned());
    }
    let name = shell.name_any();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &shell.namespace().unwrap_or_default());
    ctx.metrics.wrote("deployment");
    let applied = api
        .patch(&name, &PatchParams::apply(names::FIELD_MANAGER).force(), &Patch::Apply(&desired))
        .await
        .map_err(|source| Error::ApplyDeployment { name: name.clone(), source })?;
    let wanted = shell.spec.size.unwrap_or(defaults::SIZE);
    let (reason, note) = match live.and_then(|d| d.spec.as_ref()).map(|s| s.replicas.unwrap_or(1)) {
        None => (reasons::CREATED, format!("Created Deployment {name} with {wanted} shell pod(s)")),
        Some(before) if before != wanted => {
            (reasons::SCALED, format!("Scaled Deployment {name} from {before} to {wanted} shell pod(s)"))
        }
        Some(_) => (reasons::UPDATED, format!("Updated Deployment {name} to match the spec")),
    };
    info!(shell = %name, reason, "{note}");
    events::publish(&ctx.recorder, &ctx.metrics, shell, EventType::Normal, reason, actions::APPLY, note);
    Ok(Some(ctx.deployments.record_applied(applied)))
}

/// Delete the Deployment and wait until it is gone; then the finalizer helper removes the
/// finalizer. Idempotent: a Deployment already gone, a restart half-way, a second delete of the
/// `MyOwnShell` all end the same way.
async fn cleanup(shell: &MyOwnShell, ctx: &Context) -> Result<Action, Error> {
    let name = shell.name_any();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &shell.namespace().unwrap_or_default());
    // Read from the API server, not the cache: after a restart the cache may be behind, and
    // deleting is the one step where acting on stale data would hurt.
    let live = api.get_opt(&name).await.map_err(|source| Error::ReadDeployment { name: name.clone(), source })?;
    let owned = live.as_ref().filter(|d| ownership::of(d, shell).is_ours());
    let note = match owned {
        None if live.is_some() => {
            warn!(shell = %name, "a Deployment of this name exists but is not ours; leaving it alone");
            format!("Left Deployment {name} alone: it is not controlled by this MyOwnShell")
        }
        None => {
            wait_for_shell_pods(shell, ctx).await?;
            format!("Deployment {name} and its shell pods are gone")
        }
        Some(d) if d.metadata.deletion_timestamp.is_some() => {
            debug!(shell = %name, "Deployment still terminating");
            return Err(Error::DeploymentTerminating(name));
        }
        Some(d) => {
            // Background propagation: the Deployment goes at once; a garbage collector (if the
            // cluster runs one) removes its ReplicaSets and pods after. Foreground would hang
            // on a cluster without one. The uid precondition keeps us from deleting a newer
            // Deployment of the same name.
            let params = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                preconditions: Some(Preconditions { uid: d.metadata.uid.clone(), resource_version: None }),
                ..DeleteParams::default()
            };
            ctx.metrics.wrote("deployment_delete");
            match api.delete(&name, &params).await {
                Ok(either) if either.is_left() => {
                    // Someone else's finalizer holds it: wait for the deletion event.
                    return Err(Error::DeploymentTerminating(name));
                }
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => return Err(Error::DeleteDeployment { name, source }),
            }
            format!("Deleted Deployment {name} and its shell pods")
        }
    };
    info!(shell = %name, "{note}");
    events::publish(&ctx.recorder, &ctx.metrics, shell, EventType::Normal, reasons::DELETED, actions::DELETE, note);
    Ok(Action::await_change())
}

/// Cleanup waits, once the Deployment is gone, until the shell's pods are gone too: the shell's
/// owner is what keeps strangers out of them (`webhook/src/access.rs`), so its pods must not
/// outlive it. The garbage collector removes them with the ReplicaSet; a pod that lost its owner
/// (an orphan no collector will take) is deleted here, with a uid precondition.
async fn wait_for_shell_pods(shell: &MyOwnShell, ctx: &Context) -> Result<(), Error> {
    let name = shell.name_any();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &shell.namespace().unwrap_or_default());
    let selector = labels::selector_string(&labels::instance_for(&name, None));
    let read_error = |source| Error::ReadPods { name: name.clone(), source };
    let pods = api.list_metadata(&ListParams::default().labels(&selector)).await.map_err(read_error)?;
    if pods.items.is_empty() {
        return Ok(());
    }
    let has_owner = |p: &&kube::core::PartialObjectMeta<Pod>| {
        p.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true))
    };
    for orphan in pods.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && !has_owner(p)) {
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: orphan.metadata.uid.clone(), resource_version: None }),
            ..DeleteParams::default()
        };
        ctx.metrics.wrote("pod_delete");
        match api.delete(&orphan.name_any(), &params).await {
            Ok(_) => info!(shell = %name, pod = %orphan.name_any(), "deleted a shell pod that lost its owner"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(source) => return Err(Error::DeletePod { name: orphan.name_any(), source }),
        }
    }
    Err(Error::ShellPodsTerminating { name, pods: pods.items.len() })
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
