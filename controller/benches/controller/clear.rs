//! The same-writes floor's objects taken away before the controller's phase, so that both
//! phases run on a cluster holding the same objects besides their own: the floor's.
//!
//! Left in place, the controller's phase ran beside 10,000 more shells, Deployments, pods (and,
//! with `--homes`, claims and volumes) than the same-writes floor's did. At 10,000 with homes,
//! kube-controller-manager (its garbage collector's and informers' work over every object) and
//! kube-apiserver took 1,658 of the phase's 2,282 CPU-seconds and the controller 43, and the
//! ratio read 1.58x: a comparison of two clusters more than of the controller with its floor.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use myownshell_api::MyOwnShell;
use myownshell_envtest::eventually;

use crate::DEADLINE;

/// Delete namespace `ns` and everything in it, and wait until it is gone: first its
/// MyOwnShells' finalizers taken off (no controller watches `ns`: the same-writes floor played
/// its part), then, with `--homes`, the volumes of its claims (`Retain`ed, and no deleter runs
/// for them: this benchmark plays the provisioner). How long it took.
pub(crate) async fn clear(client: &Client, ns: &str, concurrency: usize) -> Duration {
    let started = Instant::now();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let names: Vec<String> =
        shells.list(&ListParams::default()).await.unwrap().items.iter().map(|s| s.name_any()).collect();
    let unfinalized = serde_json::json!({"metadata": {"finalizers": null}});
    futures::stream::iter(names.iter().map(|name| {
        let (shells, patch) = (shells.clone(), Patch::Merge(&unfinalized));
        async move { shells.patch(name, &PatchParams::default(), &patch).await.map(drop) }
    }))
    .buffer_unordered(concurrency)
    .try_collect::<Vec<()>>()
    .await
    .unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(ns, &DeleteParams::background()).await.unwrap();
    eventually(&format!("namespace {ns} gone"), DEADLINE, || async {
        match namespaces.get_opt(ns).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(n) => Err(format!("{:?}", n.status.and_then(|s| s.conditions).unwrap_or_default())),
        }
    })
    .await
    .unwrap();
    if crate::homes::homes() {
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let of_ns = |v: &PersistentVolume| {
            v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|c| c.namespace.as_deref()) == Some(ns)
        };
        let listed = volumes.list(&ListParams::default()).await.unwrap().items;
        futures::stream::iter(listed.iter().filter(|v| of_ns(v)).map(|v| {
            let volumes = volumes.clone();
            async move { volumes.delete(&v.name_any(), &DeleteParams::default()).await.map(drop) }
        }))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    }
    started.elapsed()
}
