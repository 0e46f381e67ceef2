//! The controller's two watches and what they keep: pruned objects in the reflector stores, the
//! echoes of its own writes filtered out, a signal once each has its first list.
//!
//! Only what reconcile reads is cached: managedFields (often half of an object) and annotations
//! are dropped before objects reach the stores. Deployments are watched only if they carry the
//! managed-by label, so the controller never caches the rest of the cluster's Deployments, and
//! each is kept as its JSON text ([`CachedDeployment`]): a typed Deployment with its one
//! container takes about 8 KiB of heap, mostly empty optional fields and label maps, where
//! its text, less the apiserver's defaults the desired Deployment never sets, takes about
//! 1.7 KiB. A relist shares the text of every Deployment that comes back unchanged.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, TryStreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::ExponentialBackoff;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Resource};
use myownshell_api::MyOwnShell;
use serde::{Deserialize, Deserializer};
use tokio::sync::watch;

use crate::deployment::SPEC_HASH_ANNOTATION;
use crate::labels;
use crate::memo::{DeploymentCache, StatusMemo};

/// Drop what reconcile never reads from a cached `MyOwnShell`.
pub fn prune_shell(shell: &mut MyOwnShell) {
    let meta = shell.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
    meta.labels = None;
}

/// Drop what reconcile never reads from a cached Deployment. The spec stays, less the fields the
/// apiserver fills with its defaults and the desired Deployment never sets (a fifth of the
/// text): it is compared with the desired one to skip applies that would change nothing, and
/// that comparison looks only at the fields the desired one has (`deployment::needs_apply`).
pub fn prune_deployment(deployment: &mut Deployment) {
    let meta = deployment.meta_mut();
    meta.managed_fields = None;
    meta.creation_timestamp = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| k == SPEC_HASH_ANNOTATION);
    }
    let Some(spec) = deployment.spec.as_mut() else { return };
    spec.progress_deadline_seconds = None;
    spec.revision_history_limit = None;
    spec.strategy = None;
    let Some(pod) = spec.template.spec.as_mut() else { return };
    pod.dns_policy = None;
    pod.restart_policy = None;
    pod.scheduler_name = None;
    pod.termination_grace_period_seconds = None;
    for container in &mut pod.containers {
        container.image_pull_policy = None;
        container.termination_message_path = None;
        container.termination_message_policy = None;
    }
}

/// A Deployment as the watch cache keeps it: pruned ([`prune_deployment`]) and held as its JSON
/// text, with only the identity the store keys it by (name, namespace, uid, resourceVersion)
/// typed. [`CachedDeployment::deployment`] gives the Deployment back, exactly as pruned, for a
/// reconcile to read. It is decoded from the watch's JSON as a Deployment and converted at once,
/// so the typed object lives only while one event passes.
///
/// The text is shared: cloning a `CachedDeployment` (the reflector clones every object it
/// stores) copies no text, and a relist that brings a Deployment back unchanged keeps the text
/// already cached ([`CachedDeployment::share_unchanged`]), so a relist of N Deployments does not
/// hold two copies of every text while the new list replaces the old.
#[derive(Clone, Debug)]
pub struct CachedDeployment {
    metadata: ObjectMeta,
    json: Arc<str>,
}

impl CachedDeployment {
    /// `deployment`, pruned and stored as text.
    pub fn new(mut deployment: Deployment) -> Self {
        prune_deployment(&mut deployment);
        let m = &deployment.metadata;
        let metadata = ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..ObjectMeta::default()
        };
        // Serializing a Deployment cannot fail (string keys only); were it ever to, the empty
        // text decodes to nothing and reconcile reads the Deployment from the apiserver.
        let json = serde_json::to_string(&deployment).unwrap_or_default().into();
        Self { metadata, json }
    }

    /// Take the text of `cached` if it is this very version of this object (same uid and
    /// resourceVersion: the apiserver never changes a version once written), dropping this one's
    /// copy.
    pub fn share_unchanged(&mut self, cached: &Self) {
        let (a, b) = (&self.metadata, &cached.metadata);
        if a.resource_version.is_some() && a.uid == b.uid && a.resource_version == b.resource_version {
            self.json = cached.json.clone();
        }
    }

    /// The Deployment as cached (pruned), or `None` if its text does not decode.
    pub fn deployment(&self) -> Option<Deployment> {
        serde_json::from_str(&self.json).ok()
    }
}

impl<'de> Deserialize<'de> for CachedDeployment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Deployment::deserialize(deserializer).map(Self::new)
    }
}

impl Resource for CachedDeployment {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Deployment::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        Deployment::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        Deployment::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        Deployment::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        Deployment::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

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

/// Whether a watch cache holds its first full list. kube's `Store::wait_until_ready` wakes only
/// one waiter (the Controller already is one), so the controller keeps its own signal.
#[derive(Clone)]
pub struct Synced(watch::Receiver<bool>);

impl Synced {
    /// A signal not yet synced, and the sender the watch marks it synced with (`true`, at its
    /// first `InitDone`). Dropping the sender unsynced makes [`Synced::wait`] return `false`.
    pub fn new() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Self(rx))
    }

    /// Resolves once synced (`true`), or `false` if the watch was dropped before that.
    pub async fn wait(&self) -> bool {
        let mut rx = self.0.clone();
        rx.wait_for(|synced| *synced).await.is_ok()
    }

    /// Whether the first list is in, without waiting.
    pub fn is_synced(&self) -> bool {
        *self.0.borrow()
    }
}
/// The `MyOwnShell` watch: pruned objects into `writer`, each applied object out.
pub fn shell_stream(
    api: Api<MyOwnShell>,
    writer: reflector::store::Writer<MyOwnShell>,
    synced: watch::Sender<bool>,
    written: StatusMemo,
) -> impl Stream<Item = Result<MyOwnShell, watcher::Error>> + Send + 'static {
    watcher(api, watcher::Config::default().any_semantic())
        .backoff(watch_backoff())
        .modify(prune_shell)
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
    let cached = writer.as_reader();
    watcher(api, config)
        .backoff(watch_backoff())
        // A relist brings every Deployment again, most of them unchanged.
        .modify(move |d| {
            if let Some(old) = cached.get(&reflector::ObjectRef::from_obj(d)) {
                d.share_unchanged(&old);
            }
        })
        .reflect(writer)
        // After `reflect`: the store already holds what the event carries.
        // The echo of our own apply: the reconcile that made it already used its response.
        .try_filter_map(skip_own_writes(synced, move |event| cache.observe(event)))
        .touched_objects()
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
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::runtime::utils::Backoff;
    use myownshell_api::MyOwnShellSpec;

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

    #[test]
    fn pruning_keeps_what_reconcile_reads() {
        let mut shell = MyOwnShell::new("web", MyOwnShellSpec { size: Some(2), ..MyOwnShellSpec::default() });
        shell.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        shell.metadata.annotations =
            Some(BTreeMap::from([("kubectl.kubernetes.io/last-applied-configuration".into(), "{…}".into())]));
        shell.metadata.finalizers = Some(vec!["myownshell.io/finalizer".into()]);
        shell.metadata.generation = Some(4);
        prune_shell(&mut shell);
        assert_eq!(shell.metadata.managed_fields, None);
        assert_eq!(shell.metadata.annotations, None);
        assert_eq!(
            shell.metadata.finalizers,
            Some(vec!["myownshell.io/finalizer".into()]),
            "the finalizer helper reads them"
        );
        assert_eq!(shell.metadata.generation, Some(4));
        assert_eq!(shell.spec.size, Some(2));

        let mut d = Deployment::default();
        d.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        d.metadata.annotations = Some(BTreeMap::from([
            (SPEC_HASH_ANNOTATION.into(), "abc".into()),
            ("deployment.kubernetes.io/revision".into(), "3".into()),
        ]));
        prune_deployment(&mut d);
        assert_eq!(d.metadata.managed_fields, None);
        assert_eq!(d.metadata.annotations, Some(BTreeMap::from([(SPEC_HASH_ANNOTATION.into(), "abc".into())])));
    }

    #[test]
    fn pruning_never_drops_a_field_the_desired_deployment_sets() {
        let full = MyOwnShellSpec {
            size: Some(3),
            image: Some("registry.example.com/tools:1".into()),
            command: Some(vec!["sleep".into(), "infinity".into()]),
            resources: Some(myownshell_api::defaults::resources()),
        };
        for spec in [MyOwnShellSpec::default(), full] {
            let mut shell = MyOwnShell::new("web", spec);
            shell.metadata.namespace = Some("ns".into());
            shell.metadata.uid = Some("u1".into());
            let want = crate::deployment::desired(&shell, None).unwrap();
            let mut pruned = want.clone();
            prune_deployment(&mut pruned);
            assert_eq!(pruned, want, "needs_apply would see a difference that is not there");
        }
    }

    #[test]
    fn a_cached_deployment_gives_back_the_pruned_deployment() {
        let mut shell = MyOwnShell::new("web", MyOwnShellSpec { size: Some(2), ..MyOwnShellSpec::default() });
        shell.metadata.namespace = Some("ns".into());
        shell.metadata.uid = Some("u1".into());
        let mut live = crate::deployment::desired(&shell, None).unwrap();
        live.metadata.uid = Some("d1".into());
        live.metadata.resource_version = Some("42".into());
        live.metadata.generation = Some(3);
        live.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        // The apiserver's defaults.
        let spec = live.spec.as_mut().unwrap();
        spec.revision_history_limit = Some(10);
        spec.progress_deadline_seconds = Some(600);
        let pod = spec.template.spec.as_mut().unwrap();
        pod.restart_policy = Some("Always".into());
        pod.termination_grace_period_seconds = Some(30);
        pod.containers[0].image_pull_policy = Some("IfNotPresent".into());
        live.metadata
            .annotations
            .get_or_insert_default()
            .insert("deployment.kubernetes.io/revision".into(), "1".into());
        live.status =
            Some(k8s_openapi::api::apps::v1::DeploymentStatus { ready_replicas: Some(1), ..Default::default() });

        // Decoded from the watch's JSON, as the watcher does.
        let cached: CachedDeployment = serde_json::from_value(serde_json::to_value(&live).unwrap()).unwrap();
        let mut pruned = live.clone();
        prune_deployment(&mut pruned);
        assert_eq!(pruned.spec.as_ref().and_then(|s| s.revision_history_limit), None, "a default dropped");
        assert_eq!(cached.deployment(), Some(pruned.clone()), "everything reconcile reads, nothing else");
        assert!(!crate::deployment::needs_apply(&crate::deployment::desired(&shell, None).unwrap(), Some(&pruned)));
        // The store keys it by its identity.
        let key = reflector::ObjectRef::from_obj(&cached);
        assert_eq!((key.name.as_str(), key.namespace.as_deref()), ("web", Some("ns")));
        assert_eq!(cached.meta().resource_version.as_deref(), Some("42"));
        assert_eq!(cached.meta().uid.as_deref(), Some("d1"));
        assert_eq!(CachedDeployment::plural(&()), "deployments");

        // A relist's copy of the same version shares the cached text; a new version does not.
        let mut again: CachedDeployment = serde_json::from_value(serde_json::to_value(&live).unwrap()).unwrap();
        assert!(!Arc::ptr_eq(&again.json, &cached.json));
        again.share_unchanged(&cached);
        assert!(Arc::ptr_eq(&again.json, &cached.json), "the same version: one text");
        assert_eq!(again.deployment(), cached.deployment());
        let mut changed = live.clone();
        changed.metadata.resource_version = Some("43".into());
        changed.spec.as_mut().unwrap().replicas = Some(5);
        let mut newer = CachedDeployment::new(changed);
        newer.share_unchanged(&cached);
        assert!(!Arc::ptr_eq(&newer.json, &cached.json), "a new version keeps its own text");
        assert_eq!(newer.deployment().and_then(|d| d.spec).and_then(|s| s.replicas), Some(5));
        assert_eq!(CachedDeployment::api_version(&()), "apps/v1");
    }
}
