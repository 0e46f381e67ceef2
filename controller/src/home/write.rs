//! The home's claim, written: created when missing, taken up when kept for this shell, grown
//! when `spec.home.size` grew; kept or deleted when the shell is deleted. Every write carries
//! the claim's uid, so a newer claim of the same name is never touched by mistake.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::{Api, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{HomeOnDelete, MyOwnShell, names};
use tracing::info;

use crate::context::Context;
use crate::error::Error;
use crate::events::{self, EventType, actions};
use crate::home::cached::{self, CachedClaim};
use crate::home::claim::{self, Ownership};

/// A shell's claim, as [`ensure`] left it.
pub(crate) struct Found {
    /// The claim.
    pub(crate) claim: Arc<CachedClaim>,
    /// Whose it is.
    pub(crate) ownership: Ownership,
    /// Why it could not grow to `spec.home.size`, if it could not (the shell runs on with the
    /// size it has).
    pub(crate) grow_error: Option<Error>,
}

/// The shell's claim after making sure it exists and, if it is the shell's, that it is taken up
/// and as large as asked. `None` for a shell without a home.
pub(crate) async fn ensure(shell: &MyOwnShell, ctx: &Context) -> Result<Option<Found>, Error> {
    if shell.spec.home.is_none() {
        return Ok(None);
    }
    let name = names::home_claim(&shell.name_any());
    let namespace = shell.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let found = match ctx.claims.get(&namespace, &name) {
        Some(claim) => claim,
        None => match create(shell, &api, ctx).await? {
            Some(claim) => return Ok(Some(Found { claim, ownership: Ownership::Ours, grow_error: None })),
            None => live(&api, &name).await?,
        },
    };
    let mut ownership = claim::of(found.meta(), shell);
    let (claim, grow_error) = match ownership {
        Ownership::Retained | Ownership::OursByReference => {
            let adopted = adopt(shell, &found, ownership, &api, ctx).await?;
            ownership = Ownership::Ours;
            (adopted, None)
        }
        Ownership::Ours => match grow(shell, &found, &api, ctx).await {
            Ok(grown) => (grown.unwrap_or(found), None),
            Err(e) => (found, Some(e)),
        },
        Ownership::Foreign => (found, None),
    };
    Ok(Some(Found { claim, ownership, grow_error }))
}

/// Create the claim; `None` if one of the name exists already.
async fn create(
    shell: &MyOwnShell,
    api: &Api<PersistentVolumeClaim>,
    ctx: &Context,
) -> Result<Option<Arc<CachedClaim>>, Error> {
    let name = names::home_claim(&shell.name_any());
    let desired = claim::desired(shell)?;
    ctx.metrics.wrote("claim_create");
    match api.create(&PostParams::default(), &desired).await {
        Ok(created) => Ok(Some(remember(&created, ctx))),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
        Err(source) => Err(Error::WriteHome { what: "creating", name, source }),
    }
}

/// The claim named `name` read from the apiserver (one that is not labelled as a home is not in
/// the watch).
async fn live(api: &Api<PersistentVolumeClaim>, name: &str) -> Result<Arc<CachedClaim>, Error> {
    let read = |source| Error::WriteHome { what: "reading", name: name.to_owned(), source };
    let claim = api.get(name).await.map_err(read)?;
    Ok(Arc::new(cached::from_typed(&claim).unwrap_or_default()))
}

/// Take up a home kept from an earlier shell of this name and owner (`Retained`), or mark a home
/// made before homes carried the shell's uid with it in place of its ownerReference
/// (`OursByReference`).
async fn adopt(
    shell: &MyOwnShell,
    found: &CachedClaim,
    ownership: Ownership,
    api: &Api<PersistentVolumeClaim>,
    ctx: &Context,
) -> Result<Arc<CachedClaim>, Error> {
    let name = names::home_claim(&shell.name_any());
    let mut patch = claim::adopt_patch(shell)?;
    patch["metadata"]["uid"] = serde_json::json!(found.uid());
    ctx.metrics.wrote("claim_adopt");
    let adopted = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::WriteHome { what: "taking up", name: name.clone(), source })?;
    if ownership == Ownership::OursByReference {
        info!(shell = %name, "marked the home with its shell's uid in place of its ownerReference");
        return Ok(remember(&adopted, ctx));
    }
    let note = format!("Took up the home {name} kept from an earlier shell of this name and owner, files and all");
    info!(shell = %name, "{note}");
    events::publish(&ctx.recorder, &ctx.metrics, shell, EventType::Normal, reasons::HOME_REUSED, actions::HOME, note);
    Ok(remember(&adopted, ctx))
}

/// Grow the claim to `spec.home.size` once it is bound (the apiserver changes a claim's size
/// only then, and only where its class allows expansion: a refusal is the shell's `Degraded`
/// reason, with the apiserver's words).
async fn grow(
    shell: &MyOwnShell,
    found: &CachedClaim,
    api: &Api<PersistentVolumeClaim>,
    ctx: &Context,
) -> Result<Option<Arc<CachedClaim>>, Error> {
    let wanted = claim::wanted_size(shell);
    let grows = found.requested.as_ref().is_some_and(|r| claim::must_grow(r, &wanted));
    if !grows || found.phase != "Bound" || found.deleting_since.is_some() {
        return Ok(None);
    }
    let name = names::home_claim(&shell.name_any());
    let mut patch = claim::resize_patch(&wanted);
    patch["metadata"] = serde_json::json!({ "uid": found.uid() });
    ctx.metrics.wrote("claim_grow");
    let grown = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::WriteHome { what: "growing", name: name.clone(), source })?;
    info!(shell = %name, size = %wanted.0, "asked for a larger home");
    Ok(Some(remember(&grown, ctx)))
}

/// Keep what the apiserver answered until the watch brings it.
fn remember(claim: &PersistentVolumeClaim, ctx: &Context) -> Arc<CachedClaim> {
    let cached = cached::from_typed(claim).unwrap_or_default();
    ctx.claims.record(cached.clone());
    Arc::new(cached)
}

/// When the shell is deleted: keep its home (`onDelete: Retain`: no owner, so the garbage
/// collector leaves it, and the retained mark) or delete it, and say so in an Event. A claim
/// that is not the shell's is left alone. Done once: afterwards the claim is no longer the
/// shell's (kept) or is being deleted.
pub(crate) async fn release(shell: &MyOwnShell, ctx: &Context) -> Result<(), Error> {
    let Some(home) = &shell.spec.home else { return Ok(()) };
    let name = names::home_claim(&shell.name_any());
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &shell.namespace().unwrap_or_default());
    let read = |source| Error::WriteHome { what: "reading", name: name.clone(), source };
    let Some(live) = api.get_opt(&name).await.map_err(read)? else { return Ok(()) };
    let found = cached::from_typed(&live).unwrap_or_default();
    let ours = matches!(claim::of(found.meta(), shell), Ownership::Ours | Ownership::OursByReference);
    if !ours || found.deleting_since.is_some() {
        return Ok(());
    }
    let (reason, note) = if home.on_delete == Some(HomeOnDelete::Retain) {
        let mut patch = claim::release_patch();
        patch["metadata"]["uid"] = serde_json::json!(found.uid());
        ctx.metrics.wrote("claim_release");
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|source| Error::WriteHome {
            what: "keeping",
            name: name.clone(),
            source,
        })?;
        let note = format!(
            "Kept the home {name} (spec.home.onDelete: Retain), labelled myownshell.io/retained-home=true: a new shell of this name and owner takes it up"
        );
        (reasons::HOME_RETAINED, note)
    } else {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions { uid: found.uid().map(str::to_owned), resource_version: None }),
            ..DeleteParams::default()
        };
        ctx.metrics.wrote("claim_delete");
        match api.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return Ok(()),
            Err(source) => return Err(Error::WriteHome { what: "deleting", name, source }),
        }
        (reasons::DELETED, format!("Deleted the home {name} and its files (spec.home.onDelete: Delete)"))
    };
    info!(shell = %name, "{note}");
    events::publish(&ctx.recorder, &ctx.metrics, shell, EventType::Normal, reason, actions::HOME, note);
    Ok(())
}
