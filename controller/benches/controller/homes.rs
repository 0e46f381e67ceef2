//! `--homes`: every shell of the run has a home, and this benchmark plays the volume
//! provisioner's part, as kwok plays the kubelet's.
//!
//! The homes' StorageClass ([`CLASS`]) binds at once (`Immediate`) and names a provisioner
//! nobody runs; for each claim of that class this benchmark creates a PersistentVolume bound in
//! advance to it (`claimRef` with the claim's uid), as an external provisioner does, and then
//! completes the binding as kube-controller-manager's PersistentVolume controller would (the
//! volume's phase, the claim's `volumeName`, its bind annotations and phase), which checks the
//! pair after. Left to that controller, binding was the bottleneck of the whole run: it binds one
//! claim at a time, 12 to 30 a second on this machine, so 10,000 homes took a phase past the
//! benchmark's 600 s deadline (the floor's phase did not converge, as in issue 30's attempt).
//! The volume is a `hostPath` no pod ever mounts (kwok's pods run nothing) and is `Retain`ed: no
//! deleter runs for it either. The PersistentVolumes and the binding's writes fall on `persistentvolumes`
//! and `persistentvolumeclaims`, which the phases' write counts leave out like ReplicaSets
//! and pods; the claim itself is one of the controller's writes per new shell, and the
//! same-writes floor makes it too ([`crate::Request::Claim`]).

use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

/// The homes' StorageClass.
pub(crate) const CLASS: &str = "bench-homes";

/// Whether this run's shells have homes (`--homes`): one flag for the whole process, read by
/// [`crate::shell`], which a dozen places call to build or name an object.
static HOMES: AtomicBool = AtomicBool::new(false);

/// Whether this run's shells have homes.
pub(crate) fn homes() -> bool {
    HOMES.load(Ordering::Relaxed)
}

/// Give this run's shells homes: the StorageClass made, and every claim of it given a volume
/// for as long as the benchmark runs.
pub(crate) async fn provide(client: &Client) -> tokio::task::JoinHandle<()> {
    HOMES.store(true, Ordering::Relaxed);
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(CLASS.to_owned()), ..ObjectMeta::default() },
        provisioner: "bench.myownshell.io/homes".to_owned(),
        reclaim_policy: Some("Retain".to_owned()),
        volume_binding_mode: Some("Immediate".to_owned()),
        ..StorageClass::default()
    };
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();
    tokio::spawn(provision(client.clone()))
}

/// Create a volume bound in advance to each new claim of [`CLASS`], and bind the two. A claim
/// whose volume or binding failed is tried again when next seen: at its next change, or at the
/// new list after a broken watch ([`crate::afresh`]). A volume already made is a conflict, and
/// the claim (still unbound as seen) is bound to it: binding twice writes the same.
async fn provision(client: Client) {
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let mut events = crate::afresh(claims);
    while let Some(event) = events.next().await {
        let (watcher::Event::Apply(claim) | watcher::Event::InitApply(claim)) = event else { continue };
        let spec = claim.spec.clone().unwrap_or_default();
        if spec.storage_class_name.as_deref() != Some(CLASS) || spec.volume_name.is_some() {
            continue;
        }
        let (volumes, client) = (volumes.clone(), client.clone());
        tokio::spawn(async move {
            let volume = volume_for(&claim);
            match volumes.create(&PostParams::default(), &volume).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return eprintln!("(no volume for claim {}: {e})", claim.name_any()),
            }
            if let Err(e) = bind(&client, &claim, &volume).await {
                eprintln!("(claim {} not bound: {e})", claim.name_any());
            }
        });
    }
}

/// What kube-controller-manager's PersistentVolume controller writes to bind `claim` to
/// `volume` (its `bindVolumeToClaim`, `bindClaimToVolume`, `updateClaimStatus`): the volume
/// Bound, the claim given the volume and marked bound by a controller, the claim Bound.
async fn bind(client: &Client, claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Result<(), kube::Error> {
    let name = volume.name_any();
    let ns = claim.namespace().unwrap_or_default();
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let merge = |v: serde_json::Value| Patch::Merge(v);
    volumes.patch_status(&name, &PatchParams::default(), &merge(json!({"status": {"phase": "Bound"}}))).await?;
    let claimed = json!({
        "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"volumeName": name},
    });
    claims.patch(&claim.name_any(), &PatchParams::default(), &merge(claimed)).await?;
    let spec = volume.spec.clone().unwrap_or_default();
    let bound = json!({"status": {"phase": "Bound", "accessModes": spec.access_modes, "capacity": spec.capacity}});
    claims.patch_status(&claim.name_any(), &PatchParams::default(), &merge(bound)).await?;
    Ok(())
}

/// The volume for `claim`: its size and access modes, bound to it by uid.
fn volume_for(claim: &PersistentVolumeClaim) -> PersistentVolume {
    let spec = claim.spec.clone().unwrap_or_default();
    let capacity = spec.resources.and_then(|r| r.requests).unwrap_or_default();
    let uid = claim.uid().unwrap_or_default();
    PersistentVolume {
        metadata: ObjectMeta { name: Some(format!("bench-home-{uid}")), ..ObjectMeta::default() },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes,
            capacity: Some(capacity),
            claim_ref: Some(ObjectReference {
                namespace: claim.namespace(),
                name: Some(claim.name_any()),
                uid: Some(uid.clone()),
                ..ObjectReference::default()
            }),
            host_path: Some(HostPathVolumeSource { path: format!("/tmp/bench-home-{uid}"), type_: None }),
            persistent_volume_reclaim_policy: Some("Retain".to_owned()),
            storage_class_name: Some(CLASS.to_owned()),
            volume_mode: spec.volume_mode,
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}
