//! Kubernetes Events on `MyOwnShell` objects. Reasons are constants: users filter on them
//! (`kubectl get events --field-selector reason=Scaled`).

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};
use myownshell_api::MyOwnShell;
use tracing::warn;

use crate::metrics::Metrics;

pub mod reasons {
    /// The shell Deployment was created.
    pub const CREATED: &str = "Created";
    /// The shell Deployment's replica count was changed to match `size`.
    pub const SCALED: &str = "Scaled";
    /// The shell Deployment was changed back to match the spec (a spec change or a hand edit).
    pub const UPDATED: &str = "Updated";
    /// The shell Deployment was deleted because the `MyOwnShell` is being deleted.
    pub const DELETED: &str = "Deleted";
    /// A reconcile failed; the note says why. Mirrors `Degraded=True`.
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
}

/// Actions (what the controller did), as the events.k8s.io API asks for.
pub mod actions {
    pub const APPLY: &str = "ApplyDeployment";
    pub const DELETE: &str = "DeleteDeployment";
    pub const RECONCILE: &str = "Reconcile";
}

/// Publish an event about `shell`. Events are best effort: a failure is logged, never returned,
/// so a full event quota cannot stop reconciliation.
pub async fn publish(
    recorder: &Recorder,
    metrics: &Metrics,
    shell: &MyOwnShell,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let reference = shell.object_ref(&());
    let event =
        Event { type_, reason: reason.to_owned(), note: Some(note), action: action.to_owned(), secondary: None };
    metrics.wrote("event");
    if let Err(e) = recorder.publish(&event, &reference).await {
        warn!(error = %e, reason, object = ?reference.name, "could not publish an event");
    }
}
