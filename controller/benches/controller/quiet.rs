//! Waiting for the cluster, not only the controller, to settle between phases.
//!
//! After a churn of `size` 1 <-> 2, every status shows its generation within seconds, and the
//! controller's reconcile counter stops, long before kube-controller-manager has scaled every
//! ReplicaSet and kwok has made or removed every pod: each of those later changes is a pod event,
//! a Deployment status change and a status write of the controller's. A phase that counts writes
//! (a restart must write nothing) and starts while they go on counts them as its own. So each
//! phase starts once nothing in the namespaces has changed for [`QUIET_FOR`]: no MyOwnShell,
//! Deployment, Pod or Event has a new resourceVersion, as metadata watches see it. The floor's
//! namespace is watched too: kube-controller-manager's event broadcaster writes its Events one
//! at a time, and 500 starts of the floor's left about 750 of theirs to be written during the
//! next phase (counted as the controller's stops' until this waited for them).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use myownshell_api::MyOwnShell;

use crate::DEADLINE;

/// How long nothing may change for the cluster to count as settled: longer than a kubelet's
/// (kwok's) pod status round and kube-controller-manager's resync of a Deployment's status.
pub(crate) const QUIET_FOR: Duration = Duration::from_secs(5);

struct Seen {
    versions: HashMap<String, String>,
    /// When, and which object.
    last_change: (Instant, String),
}

/// Metadata watches over a namespace, telling when anything in it last changed.
pub(crate) struct Quiet {
    seen: Arc<Mutex<Seen>>,
    watches: Vec<tokio::task::JoinHandle<()>>,
}

impl Quiet {
    /// Start watching `namespaces` (MyOwnShells, Deployments, Pods, Events).
    pub(crate) fn watch(client: &Client, namespaces: &[&str]) -> Self {
        // Until the first lists are in, the watches' start is the last change.
        let started = (Instant::now(), String::from("the watches' first lists"));
        let seen = Arc::new(Mutex::new(Seen { versions: HashMap::new(), last_change: started }));
        let mut watches = Vec::new();
        for ns in namespaces {
            watches.extend([
                spawn(Api::<PartialObjectMeta<MyOwnShell>>::namespaced(client.clone(), ns), "myownshell", &seen),
                spawn(Api::<PartialObjectMeta<Deployment>>::namespaced(client.clone(), ns), "deployment", &seen),
                spawn(Api::<PartialObjectMeta<Pod>>::namespaced(client.clone(), ns), "pod", &seen),
                spawn(Api::<PartialObjectMeta<Event>>::namespaced(client.clone(), ns), "event", &seen),
            ]);
        }
        Self { seen, watches }
    }

    /// Wait until nothing has changed for [`QUIET_FOR`]; print how long that took.
    pub(crate) async fn settle(&self, before: &str) {
        let start = Instant::now();
        loop {
            let (quiet_since, what) = self.seen.lock().unwrap().last_change.clone();
            if quiet_since.elapsed() >= QUIET_FOR {
                let took = start.elapsed();
                println!(
                    "  before {before}: the cluster quiet (nothing changed for {QUIET_FOR:?}) after waiting {took:.1?}"
                );
                return;
            }
            assert!(start.elapsed() < DEADLINE, "the cluster never settled before {before}: {what} still changing");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Wait until nothing has changed for [`QUIET_FOR`], but not past `until`: whether it was
    /// quiet by then.
    pub(crate) async fn settled_before(&self, until: Instant) -> bool {
        loop {
            if self.seen.lock().unwrap().last_change.0.elapsed() >= QUIET_FOR {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        self.watches.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

/// Record every new resourceVersion of `api`'s objects (a relist that finds them unchanged
/// records nothing).
fn spawn<K>(api: Api<PartialObjectMeta<K>>, kind: &'static str, seen: &Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let seen = seen.clone();
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let (object, deleted) = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => (o, false),
                Ok(watcher::Event::Delete(o)) => (o, true),
                Ok(_) => continue,
                // The watcher starts over by itself (an apiserver restart).
                Err(_) => continue,
            };
            let (ns, name) = (object.metadata.namespace.unwrap_or_default(), object.metadata.name.unwrap_or_default());
            let key = format!("{kind}/{ns}/{name}");
            let version = object.metadata.resource_version.unwrap_or_default();
            let mut seen = seen.lock().unwrap();
            let changed = if deleted {
                seen.versions.remove(&key).is_some()
            } else {
                seen.versions.insert(key.clone(), version.clone()).as_ref() != Some(&version)
            };
            if changed {
                seen.last_change = (Instant::now(), key);
            }
        }
    })
}
