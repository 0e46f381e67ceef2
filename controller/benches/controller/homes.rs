//! `--homes`: every shell of the run has a home, and this benchmark plays the volume
//! provisioner's part, as kwok plays the kubelet's.
//!
//! The homes' StorageClass ([`CLASS`]) binds at once (`Immediate`) and names a provisioner
//! nobody runs; for each claim of that class this benchmark creates a PersistentVolume bound in
//! advance to it (`claimRef` with the claim's uid), as an external provisioner does, and
//! kube-controller-manager's PersistentVolume controller binds the pair. The volume is a
//! `hostPath` no pod ever mounts (kwok's pods run nothing) and is `Retain`ed: no deleter runs
//! for it either. The PersistentVolumes and the binding's writes fall on `persistentvolumes`
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
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

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

/// Create a volume bound in advance to each new claim of [`CLASS`] (a relist sees the claims
/// again: a volume already made is a conflict, and left).
async fn provision(client: Client) {
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client);
    let mut events = watcher(claims, watcher::Config::default()).default_backoff().applied_objects().boxed();
    while let Some(event) = events.next().await {
        let Ok(claim) = event else { continue };
        let spec = claim.spec.clone().unwrap_or_default();
        if spec.storage_class_name.as_deref() != Some(CLASS) || spec.volume_name.is_some() {
            continue;
        }
        let volumes = volumes.clone();
        tokio::spawn(async move {
            match volumes.create(&PostParams::default(), &volume_for(&claim)).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => eprintln!("(no volume for claim {}: {e})", claim.name_any()),
            }
        });
    }
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
