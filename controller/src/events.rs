//! Kubernetes Events on `MyOwnShell` objects. Their reasons are `myownshell_api::names::reasons`:
//! users filter on them (`kubectl get events --field-selector reason=Scaled`).

use std::sync::Arc;

use kube::{Client, Resource};
use myownshell_api::MyOwnShell;
use myownshell_runtime::events::{self, Occurrence};
pub use myownshell_runtime::events::{EventType, Reporter};
use tracing::warn;

use crate::cache::namespaces::TerminatingNamespaces;
use crate::metrics::Metrics;

/// The name this controller reports in Events.
pub const REPORTER: &str = "myownshell-controller";

/// Actions (what the controller did), as the events.k8s.io API asks for.
pub mod actions {
    /// The Deployment was server-side applied (created, scaled or updated).
    pub const APPLY: &str = "ApplyDeployment";
    /// Cleanup of a deleted `MyOwnShell`: its Deployment was deleted, found gone, or left alone
    /// as not ours.
    pub const DELETE: &str = "DeleteDeployment";
    /// A failed reconcile: the Warning events `ReconcileFailed`, `DeploymentConflict` and
    /// `SelectorConflict`.
    pub const RECONCILE: &str = "Reconcile";
    /// The lifetime started, warned of or stopped the shell (`Started`, `StoppingSoon`, `Stopped`).
    pub const LIFETIME: &str = "Lifetime";
    /// The shell's pods were found unable to run (`ImagePullFailed`, `CrashLooping`, …).
    pub const CHECK_PODS: &str = "CheckPods";
    /// A shell stopped longer than `lifetime.deletePausedAfter` was deleted.
    pub const DELETE_SHELL: &str = "DeleteShell";
    /// The home's claim was created, taken up, kept or deleted (`HomeReused`, `HomeRetained`).
    pub const HOME: &str = "Home";
    /// What the shell's approvals came to changed (`Approved`, `WaitingForApproval`, `Rejected`,
    /// `ApprovalExpired`): an approval given, taken back or run out.
    pub const APPROVAL: &str = "Approval";
}

/// Where events go: one new Event per occurrence, named so that a shell of any name gets its
/// Events (`myownshell_runtime::events`), and none into a namespace being deleted (the apiserver
/// would refuse it).
///
/// Nothing here folds repeats: the reconcile writes a Warning once per cause (when the status's
/// `Degraded` condition changes), not once per retry, so no cache of past events is kept (kube's
/// `Recorder` kept one entry per object for six minutes: 24 MiB at 10,000 objects).
#[derive(Clone)]
pub struct Publisher {
    client: Client,
    reporter: Reporter,
    terminating: Arc<TerminatingNamespaces>,
}

impl Publisher {
    /// Events sent with `client`, reported by `reporter`, none into the namespaces in `terminating`.
    pub fn new(client: Client, reporter: Reporter, terminating: Arc<TerminatingNamespaces>) -> Self {
        Self { client, reporter, terminating }
    }
}

/// Publish an event about `shell` without waiting for it. Events are best effort, as in
/// client-go's broadcaster: a failure is logged, never returned (a full event quota must not
/// stop reconciliation), and the reconcile does not wait for the API call.
pub fn publish(
    publisher: &Publisher,
    metrics: &Metrics,
    shell: &MyOwnShell,
    type_: EventType,
    reason: &'static str,
    action: &'static str,
    note: String,
) {
    if shell.metadata.namespace.as_deref().is_some_and(|ns| publisher.terminating.contains(ns)) {
        return;
    }
    let occurrence = Occurrence { regarding: shell.object_ref(&()), related: None, type_, reason, action, note };
    metrics.wrote("event");
    let publisher = publisher.clone();
    tokio::spawn(async move {
        let object = occurrence.regarding.name.clone();
        if let Err(e) = events::publish(&publisher.client, occurrence, &publisher.reporter).await {
            warn!(error = %e, reason, object = ?object, "could not publish an event");
        }
    });
}
