//! Finding a shell's Deployment (cache first, then the apiserver), checking its instance label is
//! free, and server-side applying it when it differs from what the spec asks.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, names};
use tracing::{debug, info};

use crate::context::Context;
use crate::deployment;
use crate::error::Error;
use crate::events::{self, EventType, actions};
use crate::labels;
use crate::life::rollout::{self, Decision, Why};

/// The Deployment named like `shell`: from the cache, which holds only Deployments carrying our
/// managed-by label; else from the apiserver, because a Deployment without that label (someone
/// else's) may be in the way, and applying over it would take it over.
///
/// Between a 404 here and the apply that creates the Deployment, only someone allowed to create
/// Deployments in the namespace could slip one in; such a Deployment is theirs to lose.
pub(crate) async fn find_deployment(shell: &MyOwnShell, ctx: &Context) -> Result<Option<Arc<Deployment>>, Error> {
    let (name, namespace) = (shell.name_any(), shell.namespace().unwrap_or_default());
    if let Some(cached) = ctx.deployments.get(&namespace, &name) {
        return Ok(Some(cached));
    }
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let live = api.get_opt(&name).await.map_err(|source| Error::ReadDeployment { name, source })?;
    Ok(live.map(|mut d| {
        crate::cache::prune::prune_deployment(&mut d);
        Arc::new(d)
    }))
}

/// Before the Deployment of `shell` is created: that no other Deployment already selects pods by
/// the instance label it would use. Asked of the apiserver (one metadata list) only for names
/// whose label can be shared at all (`labels::may_share_instance`), so creating a shell of an
/// ordinary name costs nothing more.
pub(crate) async fn instance_free(
    shell: &MyOwnShell,
    live: Option<&Arc<Deployment>>,
    ctx: &Context,
) -> Result<(), Error> {
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

/// What the shell's pods should be: `replicas` of them, running the template the controller
/// builds now unless `rollout` says it waits; `activity` is the last sign of use (the last
/// connection or the start).
pub(crate) struct Wanted {
    pub(crate) replicas: i32,
    pub(crate) activity: Option<Timestamp>,
    pub(crate) now: Timestamp,
    /// The lifetime stops or starts the shell in this reconcile and tells so in its own Event
    /// (`Stopped`, `Started`): a change of replicas it makes is not told again as `Scaled`.
    pub(crate) lifetime_tells_scale: bool,
    /// Mount the shell's home claim (it has one, and the claim of its name is its own).
    pub(crate) mount_home: bool,
}

/// Server-side apply the Deployment `wanted` asks for unless the live one already matches it.
/// Returns the Deployment as it is now, and what was decided of its pod template.
pub(crate) async fn ensure_deployment(
    shell: &MyOwnShell,
    live: Option<&Arc<Deployment>>,
    wanted: &Wanted,
    ctx: &Context,
) -> Result<(Option<Arc<Deployment>>, Decision), Error> {
    let replicas = wanted.replicas;
    let settings = &ctx.settings.template;
    let class = shell.spec.class_name.as_deref().and_then(|name| ctx.classes.class(name));
    let live_ref = live.map(|d| &**d);
    let built = deployment::desired_mounting(shell, live_ref, replicas, settings, wanted.mount_home, class.as_deref())?;
    let input = rollout::Input {
        live: live_ref,
        desired: &built,
        replicas,
        update_requested_at: shell.spec.update_requested_at.as_ref().map(|t| t.0),
        last_activity: wanted.activity,
        now: wanted.now,
    };
    let decision = rollout::decide(&input, &ctx.settings.rollout);
    let desired = rollout::shape(built, live_ref, &decision, wanted.now);
    if !deployment::needs_apply(&desired, live_ref) {
        debug!(shell = %shell.name_any(), "Deployment up to date; nothing to write");
        return Ok((live.cloned(), decision));
    }
    let name = shell.name_any();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &shell.namespace().unwrap_or_default());
    ctx.metrics.wrote("deployment");
    let applied = api
        .patch(&name, &PatchParams::apply(names::FIELD_MANAGER).force(), &Patch::Apply(&desired))
        .await
        .map_err(|source| Error::ApplyDeployment { name: name.clone(), source })?;
    let before = live.and_then(|d| d.spec.as_ref()).map(|s| s.replicas.unwrap_or(1));
    match applied_event(&name, before, replicas, &decision, wanted.lifetime_tells_scale) {
        Some((reason, note)) => {
            info!(shell = %name, reason, "{note}");
            events::publish(&ctx.recorder, &ctx.metrics, shell, EventType::Normal, reason, actions::APPLY, note);
        }
        None => debug!(shell = %name, replicas, "Deployment scaled by the lifetime"),
    }
    Ok((Some(ctx.deployments.record_applied(applied)), decision))
}

/// The Event for an apply of Deployment `name` that had `before` replicas (`None`: it is created)
/// and now has `replicas`; `None` when the lifetime started or stopped it, whatever template it
/// took along.
///
/// A start or a stop is told by the status (`status.stopped`, `startedAt`), and a template taken
/// at one by `UpToDate`: no running pod restarts for it, so `TemplateUpdated` ("its pods
/// restart") would be wrong as well as one more write per transition. `cargo xtask bench
/// controller --stops` saw it on every stop that took the template an upgrade had left pending
/// (500 of 500), on an apiserver that the stops already keep busy.
fn applied_event(
    name: &str,
    before: Option<i32>,
    replicas: i32,
    decision: &Decision,
    lifetime_tells_scale: bool,
) -> Option<(&'static str, String)> {
    let Some(before) = before else {
        // Made again at a start (a stopped shell has none): the status tells the start.
        if lifetime_tells_scale {
            return None;
        }
        return Some((reasons::CREATED, format!("Created Deployment {name} with {replicas} shell pod(s)")));
    };
    let scaled = before != replicas;
    if scaled && !lifetime_tells_scale {
        return Some((reasons::SCALED, format!("Scaled Deployment {name} from {before} to {replicas} shell pod(s)")));
    }
    if scaled {
        return None;
    }
    match decision {
        Decision::Roll(why) if !matches!(why, Why::SpecChanged | Why::New) => Some((
            reasons::TEMPLATE_UPDATED,
            format!(
                "Applied this operator release's pod template to Deployment {name} ({}); its pods restart",
                why.words()
            ),
        )),
        _ => Some((reasons::UPDATED, format!("Updated Deployment {name} to match the spec"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_apply_is_told_once() {
        let roll = |why| Decision::Roll(why);
        // (what, before, replicas, decision, the lifetime tells the scale, the Event's reason)
        let cases = [
            ("created", None, 1, roll(Why::New), false, Some("Created")),
            ("made again by a start", None, 1, roll(Why::New), true, None),
            ("size changed", Some(1), 3, Decision::Current, false, Some("Scaled")),
            ("stopped by the lifetime", Some(1), 0, Decision::Current, true, None),
            ("started by the lifetime", Some(0), 2, Decision::Current, true, None),
            ("started with the new template", Some(0), 2, roll(Why::NoPods), true, None),
            ("stopped, taking the pending template", Some(1), 0, roll(Why::NoPods), true, None),
            ("stopped at a quiet moment with the new template", Some(1), 0, roll(Why::Quiet), true, None),
            ("size changed as the template rolls", Some(1), 2, roll(Why::Quiet), false, Some("Scaled")),
            ("template rolled on request", Some(1), 1, roll(Why::Requested), false, Some("TemplateUpdated")),
            ("the user's spec changed", Some(1), 1, roll(Why::SpecChanged), false, Some("Updated")),
            ("labels repaired", Some(1), 1, Decision::Current, false, Some("Updated")),
        ];
        for (what, before, replicas, decision, lifetime, want) in cases {
            let got = applied_event("web", before, replicas, &decision, lifetime);
            assert_eq!(got.as_ref().map(|(reason, _)| *reason), want, "{what}");
        }
    }
}
