//! A stopped shell has no Deployment: its Deployment (ours only) is deleted at the stop, its
//! ReplicaSets and pods with it, and made again at its next start, as JupyterHub deletes a
//! stopped server's pod and Coder a stopped workspace's. Its spec, home, record of connections and
//! status stay on the `MyOwnShell`. Its name stays the shell's meanwhile: nobody but the operator
//! and Kubernetes' own controllers may create a Deployment of that name while the `MyOwnShell`
//! exists (`config/policy/shell_names.yaml`).
//!
//! Why delete, not scale to 0: scaled to 0, a Deployment costs kube-controller-manager about three
//! status writes and two Events per stop on top of the scale (`cargo xtask bench controller
//! --stops`: 5.96 writes per stop for the bench scaling a Deployment to 0 itself, issue 41); a
//! deleted one costs the delete, as its ReplicaSets and pods go by the garbage collector, which
//! writes no Event. A stopped shell then holds no Deployment or ReplicaSet in etcd or in any
//! controller's cache, and an operator upgrade has nothing of it to roll: its next start takes
//! the template of the day.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use kube::{Api, ResourceExt};
use myownshell_api::MyOwnShell;
use tracing::debug;

use crate::context::Context;
use crate::error::Error;
use crate::life::rollout::Decision;
use crate::ownership;

/// What became of a Deployment asked to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deleted {
    /// This delete removed it.
    Gone,
    /// It was gone already (a cached copy the watch had not yet seen deleted).
    AlreadyGone,
    /// Someone else's finalizer holds it: it goes once they let go.
    Held,
}

/// Delete Deployment `d` of `shell` (ours: the caller checked): background propagation, so it
/// goes at once and a garbage collector (if the cluster runs one) removes its ReplicaSets and
/// pods after (foreground would hang on a cluster without one); the uid precondition keeps a
/// newer Deployment of the same name safe.
pub(crate) async fn delete_deployment(shell: &MyOwnShell, d: &Deployment, ctx: &Context) -> Result<Deleted, Error> {
    let name = shell.name_any();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &shell.namespace().unwrap_or_default());
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions { uid: d.metadata.uid.clone(), resource_version: None }),
        ..DeleteParams::default()
    };
    ctx.metrics.wrote("deployment_delete");
    let _in_flight = ctx.deletes.begin();
    match api.delete(&name, &params).await {
        Ok(either) if either.is_left() => Ok(Deleted::Held),
        Ok(_) => Ok(Deleted::Gone),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Deleted::AlreadyGone),
        Err(source) => Err(Error::DeleteDeployment { name, source }),
    }
}

/// What [`remove_deployment`] did.
#[derive(Debug)]
pub(crate) enum Removal {
    /// It deleted the Deployment just now. The stop is recorded by the reconcile that the
    /// deletion's watch event brings, milliseconds later (`reconcile::STOP_RECORD_FALLBACK` if it
    /// never comes), not by this one: a worker is then busy for one write per stop, not two, so
    /// a class's shells all due at one instant have their Deployments deleted before any of their
    /// statuses is written (`cargo xtask bench controller --stops 500 --stop-rate 100`: with 64
    /// workers, 100 stops at once waited for a delete and a status write each, stop delay p99
    /// 454 ms).
    Deleted,
    /// Nothing was deleted now (none there, already going, not ours, or the delete failed): as
    /// [`crate::reconcile`]'s Deployment step returns, the Deployment as it is, the failure if
    /// any, and the template decision.
    Settled(Option<Arc<Deployment>>, Option<Error>, Option<Decision>),
}

/// For a stopped shell: its Deployment deleted if it is ours and still there. Settled with the
/// template decision `Current`, as the next start builds the template of the day. A Deployment
/// of its name and labels that is not ours is left alone and said to be in the way (its pods
/// would pass for the shell's).
pub(crate) async fn remove_deployment(shell: &MyOwnShell, ctx: &Context) -> Removal {
    // The cache alone (synced before any reconcile): every Deployment this controller made
    // carries the managed-by label it watches. One without it is someone else's, and in nobody's
    // way while the shell is stopped; its start looks for it on the apiserver. So a stopped shell's
    // reconcile (10,000 of them after a restart) asks the apiserver nothing.
    let Some(live) = ctx.deployments.get(&shell.namespace().unwrap_or_default(), &shell.name_any()) else {
        return Removal::Settled(None, None, Some(Decision::Current));
    };
    if !ownership::of(&live, shell).is_ours() {
        return Removal::Settled(None, Some(Error::DeploymentConflict(shell.name_any())), None);
    }
    if live.metadata.deletion_timestamp.is_some() {
        return Removal::Settled(None, None, Some(Decision::Current));
    }
    let deleted = match delete_deployment(shell, &live, ctx).await {
        Ok(deleted) => deleted,
        Err(e) => return Removal::Settled(Some(live), Some(e), None),
    };
    debug!(shell = %shell.name_any(), ?deleted, "stopped: Deployment deleted");
    match deleted {
        Deleted::Gone => Removal::Deleted,
        Deleted::AlreadyGone | Deleted::Held => Removal::Settled(None, None, Some(Decision::Current)),
    }
}
