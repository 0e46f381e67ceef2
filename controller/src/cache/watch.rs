//! The controller's watches and what they keep: pruned `MyOwnShell`s and Deployments in the
//! reflector stores (the echoes of its own writes filtered out, a signal once each has its first
//! list); the shells' pods' health, the nodes' readiness, the namespaces being deleted and those
//! opened to shells in indexes of their own, each read from the watch's JSON into the little it
//! needs.
//!
//! Only what reconcile reads is cached: managedFields (often half of an object) and annotations
//! are dropped before objects reach the stores, and shells and Deployments are kept packed
//! ([`CachedShell`], [`CachedDeployment`]). Deployments are watched only if they carry the
//! managed-by label, so the controller never caches the rest of the cluster's Deployments.

use std::time::Duration;

use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::ExponentialBackoff;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Resource};
use myownshell_api::MyOwnShell;
use tokio::sync::watch;
use tracing::warn;

use crate::cache::cached_deployment::CachedDeployment;
use crate::cache::cached_shell::{CachedShell, retype};
use crate::cache::memo::{DeploymentCache, StatusMemo};
use crate::cache::namespaces::TerminatingNamespaces;
use crate::cache::open_namespaces::OpenNamespaces;
use crate::health::nodes::{CachedNode, NodeIndex};
use crate::health::pods::{CachedPod, PodIndex};
use crate::home::cached::{CachedClaim, ClaimIndex};
use crate::labels;

/// Delays between watch retries: 250 ms doubling to 5 s with jitter, back to the start after any
/// success (kube-runtime's backoff on `backon`). kube's default climbs to 30 s, which after an
/// apiserver restart (a failed connect, then "resource version too old" while etcd compacts)
/// left the controller blind for ~20 s; one controller relisting every 5 s at worst is no
/// burden to an apiserver, and the jitter keeps replicas from relisting in step.
pub fn watch_backoff() -> ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(WATCH_BACKOFF_MIN)
        .with_max_delay(WATCH_BACKOFF_MAX)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

/// The first delay of [`watch_backoff`].
pub const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(250);
/// The longest delay of [`watch_backoff`] (before jitter).
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The `MyOwnShell` watch: pruned objects (as [`CachedShell`]s) into `writer`, each applied
/// object out.
pub fn shell_stream(
    api: Api<CachedShell>,
    writer: reflector::store::Writer<CachedShell>,
    synced: watch::Sender<bool>,
    written: StatusMemo,
) -> impl Stream<Item = Result<CachedShell, watcher::Error>> + Send + 'static {
    let share = share_unchanged(writer.as_reader(), CachedShell::share_unchanged);
    watcher(api, watcher::Config::default().any_semantic())
        .backoff(watch_backoff())
        .modify(share)
        .reflect(writer)
        // The echo of our own status write changes nothing a reconcile would act on.
        .try_filter_map(skip_own_writes(synced, move |event| written.observe(event)))
        .applied_objects()
}

/// The watch of Deployments carrying our managed-by label: pruned objects (as
/// [`CachedDeployment`]s) into the cache, each touched object out (so a change or deletion of a
/// Deployment triggers a reconcile of the `MyOwnShell` of its name).
pub fn deployment_stream(
    api: Api<CachedDeployment>,
    cache: DeploymentCache,
    writer: reflector::store::Writer<CachedDeployment>,
    synced: watch::Sender<bool>,
) -> impl Stream<Item = Result<CachedDeployment, watcher::Error>> + Send + 'static {
    let config = watcher::Config::default().any_semantic().labels(&labels::managed_by_selector());
    let share = share_unchanged(writer.as_reader(), CachedDeployment::share_unchanged);
    watcher(api, config)
        .backoff(watch_backoff())
        .modify(share)
        .reflect(writer)
        // After `reflect`: the store already holds what the event carries.
        // The echo of our own apply: the reconcile that made it already used its response.
        .try_filter_map(skip_own_writes(synced, move |event| cache.observe(event)))
        .touched_objects()
}

/// The `modify` step of a packed cache's watch: an object the store already holds in this very
/// version takes the stored packed text (`share`), since a relist brings every object again,
/// most of them unchanged, and would otherwise hold two copies of each while it replaces the old.
fn share_unchanged<K>(cached: reflector::Store<K>, share: fn(&mut K, &K)) -> impl FnMut(&mut K)
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    move |object| {
        if let Some(old) = cached.get(&reflector::ObjectRef::from_obj(object)) {
            share(object, &old);
        }
    }
}

/// The watch of the shells' pods (those carrying our managed-by label) into `index`; out come
/// the shells whose pods' problems changed.
pub fn pod_triggers(
    api: Api<CachedPod>,
    index: Arc<PodIndex>,
) -> impl Stream<Item = ObjectRef<MyOwnShell>> + Send + 'static {
    let config = watcher::Config::default().any_semantic().labels(&labels::managed_by_selector());
    logged(watcher(api, config).backoff(watch_backoff()), "pods")
        .flat_map(move |event| futures::stream::iter(index.apply(&event)))
}

/// The watch of the nodes into `nodes`; out come the shells with a pod on a node whose
/// readiness changed.
pub fn node_triggers(
    api: Api<CachedNode>,
    nodes: Arc<NodeIndex>,
    pods: Arc<PodIndex>,
) -> impl Stream<Item = ObjectRef<MyOwnShell>> + Send + 'static {
    logged(watcher(api, watcher::Config::default().any_semantic()).backoff(watch_backoff()), "nodes").flat_map(
        move |event| futures::stream::iter(nodes.apply(&event).map(|node| pods.shells_on(&node)).unwrap_or_default()),
    )
}

/// The watch of the shells' home claims (those carrying our managed-by label) into `claims`; out
/// come the shells whose claims changed.
pub fn claim_triggers(
    api: Api<CachedClaim>,
    claims: Arc<ClaimIndex>,
) -> impl Stream<Item = ObjectRef<MyOwnShell>> + Send + 'static {
    let config = watcher::Config::default().any_semantic().labels(&labels::managed_by_selector());
    logged(watcher(api, config).backoff(watch_backoff()), "claims")
        .flat_map(move |event| futures::stream::iter(claims.apply(&event)))
}

/// Keep `terminating` and `open` up to date from the watch of the namespaces' metadata (`only`: of
/// that one namespace), as a stream of the shells to reconcile because their namespace was opened
/// to shells or closed to them (found in `shells`, the controller's store).
pub fn namespace_triggers(
    api: Api<PartialObjectMeta<Namespace>>,
    only: Option<String>,
    terminating: Arc<TerminatingNamespaces>,
    open: Arc<OpenNamespaces>,
    shells: reflector::Store<CachedShell>,
) -> impl Stream<Item = ObjectRef<MyOwnShell>> + Send + 'static {
    let mut config = watcher::Config::default().any_semantic();
    if let Some(name) = only {
        config = config.fields(&format!("metadata.name={name}"));
    }
    logged(watcher(api, config).backoff(watch_backoff()), "namespaces").flat_map(move |event| {
        terminating.apply(&event);
        let changed: std::collections::HashSet<String> = open.apply(&event).into_iter().collect();
        let of_changed: Vec<ObjectRef<MyOwnShell>> = if changed.is_empty() {
            Vec::new()
        } else {
            let in_changed = |s: &Arc<CachedShell>| s.meta().namespace.as_ref().is_some_and(|ns| changed.contains(ns));
            shells.state().iter().filter(|s| in_changed(s)).map(|s| retype(&ObjectRef::from_obj(&**s))).collect()
        };
        futures::stream::iter(of_changed)
    })
}

/// The shells to reconcile because their class's caps changed (a raised cap lets a waiting
/// shell start), from the watch of `MyOwnShellClass`es, which keeps `caps`.
pub fn class_triggers(
    api: Api<myownshell_api::MyOwnShellClass>,
    caps: Arc<crate::cache::classes::ClassIndex>,
    shells: reflector::Store<CachedShell>,
) -> impl Stream<Item = ObjectRef<MyOwnShell>> + Send + 'static {
    let config = watcher::Config::default().any_semantic();
    logged(watcher(api, config).backoff(watch_backoff()), "shell classes").flat_map(move |event| {
        let changed = caps.apply(&event);
        let of_changed: Vec<ObjectRef<MyOwnShell>> = if changed.is_empty() {
            Vec::new()
        } else {
            let of_class = |s: &Arc<CachedShell>| s.class_name().is_some_and(|c| changed.iter().any(|n| n == c));
            shells.state().iter().filter(|s| of_class(s)).map(|s| retype(&ObjectRef::from_obj(&**s))).collect()
        };
        futures::stream::iter(of_changed)
    })
}

/// A watch's events, its errors logged (the backoff paces the retries).
fn logged<K: Send + 'static>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    what: &'static str,
) -> impl Stream<Item = watcher::Event<K>> + Send + 'static {
    events.filter_map(move |result| {
        std::future::ready(match result {
            Ok(event) => Some(event),
            Err(e) => {
                warn!(error = %e, watch = what, "watch failed; retrying");
                None
            }
        })
    })
}

/// The filter of a watch after `reflect`: drops the events `own_write` recognises as the echo
/// of this controller's own write, and marks the watch synced at its first `InitDone`.
fn skip_own_writes<K>(
    synced: watch::Sender<bool>,
    own_write: impl Fn(&watcher::Event<K>) -> bool,
) -> impl FnMut(watcher::Event<K>) -> std::future::Ready<Result<Option<watcher::Event<K>>, watcher::Error>> {
    move |event| {
        let own = own_write(&event);
        if matches!(event, watcher::Event::InitDone) {
            synced.send_replace(true);
        }
        std::future::ready(Ok((!own).then_some(event)))
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::utils::Backoff;

    use super::*;

    #[test]
    fn watch_backoff_grows_to_a_cap_with_jitter_and_resets() {
        let mut b = watch_backoff();
        let delays: Vec<Duration> = b.by_ref().take(8).collect();
        // backon's jitter adds up to one more delay on top of each.
        assert!(delays[0] >= WATCH_BACKOFF_MIN && delays[0] <= WATCH_BACKOFF_MIN * 2, "{delays:?}");
        assert!(delays.iter().all(|d| *d <= WATCH_BACKOFF_MAX * 2), "capped: {delays:?}");
        assert!(delays[7] >= WATCH_BACKOFF_MAX, "reaches the cap: {delays:?}");
        b.reset();
        let first = b.next().unwrap_or_default();
        assert!(first >= WATCH_BACKOFF_MIN && first <= WATCH_BACKOFF_MIN * 2, "after a reset: {first:?}");
    }
}
