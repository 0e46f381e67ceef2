//! Cleanup of a deleted `MyOwnShell`: its home kept or deleted (`spec.home.onDelete`), its
//! Deployment deleted (if ours), then its pods awaited, before the finalizer goes.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, Stop};
use tracing::{debug, info, warn};

use crate::context::Context;
use crate::error::Error;
use crate::events::{self, EventType, actions};
use crate::labels;
use crate::ownership;
use crate::write::stop_deployment::{Deleted, delete_deployment};

/// Delete the Deployment and wait until it is gone; then the finalizer helper removes the
/// finalizer. Idempotent: a Deployment already gone, a restart half-way, a second delete of the
/// `MyOwnShell` all end the same way.
pub(crate) async fn cleanup(shell: &MyOwnShell, ctx: &Context) -> Result<Action, Error> {
    let name = shell.name_any();
    ctx.metrics.shell_degraded(&shell.namespace().unwrap_or_default(), &name, None);
    // Its class's slot is free for a shell waiting to start.
    ctx.slots.release(&(shell.namespace().unwrap_or_default(), name.clone()));
    // The home first: a kept one must lose its ownerReference before the shell is gone (or the
    // garbage collector takes it); a deleted one waits, by Kubernetes' own protection, until
    // the shell's pod has let go of it.
    crate::home::write::release(shell, ctx).await?;
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
            if delete_deployment(shell, d, ctx).await? == Deleted::Held {
                // Someone else's finalizer holds it: wait for the deletion event.
                return Err(Error::DeploymentTerminating(name));
            }
            format!("Deleted Deployment {name} and its shell pods")
        }
    };
    info!(shell = %name, "{note}");
    events::publish(&ctx.recorder, &ctx.metrics, shell, EventType::Normal, reasons::DELETED, actions::DELETE, note);
    Ok(Action::await_change())
}

/// Cleanup waits, once the Deployment is gone, until the shell's pods are gone too: the shell's
/// owner is what keeps strangers out of them (`webhook/src/connect/access.rs`), so its pods must not
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

/// Delete `shell`, stopped (`stop`) longer than `lifetime.deletePausedAfter`; its finalizer then
/// cleans up as after any deletion. The uid precondition keeps a newer shell of the same name
/// safe.
pub(crate) async fn delete_stopped(
    shell: &MyOwnShell,
    stop: &Stop,
    api: &Api<MyOwnShell>,
    ctx: &Context,
) -> Result<Action, Error> {
    let name = shell.name_any();
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: shell.metadata.uid.clone(), resource_version: None }),
        ..DeleteParams::default()
    };
    ctx.metrics.wrote("shell_delete");
    match api.delete(&name, &params).await {
        Ok(_) => {}
        // Gone already, or replaced by a newer shell of the name: nothing of ours to delete.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return Ok(Action::await_change()),
        Err(source) => return Err(Error::DeleteShell { name, source }),
    }
    let after = shell.spec.lifetime.as_ref().and_then(|l| l.delete_paused_after.as_deref()).unwrap_or_default();
    let home = match shell.spec.home.as_ref().map(|h| h.on_delete) {
        Some(Some(myownshell_api::HomeOnDelete::Retain)) => "; its home is kept (spec.home.onDelete: Retain)",
        Some(_) => "; its home and the files in it go too (spec.home.onDelete: Delete)",
        None => "",
    };
    let note = format!(
        "Deleted: stopped since {} ({}), longer than lifetime.deletePausedAfter ({after}){home}",
        stop.at.0, stop.reason
    );
    info!(shell = %name, "{note}");
    events::publish(
        &ctx.recorder,
        &ctx.metrics,
        shell,
        EventType::Normal,
        reasons::DELETED_AFTER_STOP,
        actions::DELETE_SHELL,
        note,
    );
    Ok(Action::await_change())
}
