//! Read-your-writes memos: what this controller wrote and its watches have not delivered yet,
//! so a reconcile that runs in between neither repeats the write nor mistakes the echo of its
//! own write for someone else's change.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use myownshell_api::{MyOwnShell, MyOwnShellStatus};

use crate::cache::cached_deployment::CachedDeployment;
use crate::cache::cached_shell::{CachedShell, retype};
use crate::cache::object_map::ObjectMap;
use crate::cache::prune::prune_deployment;
use crate::cache::synced::Synced;

/// Statuses this controller wrote that the `MyOwnShell` watch has not delivered yet. Without it,
/// a reconcile triggered between a status write and its watch event (say, by the new
/// Deployment) would compare against the old status and write the same status again.
#[derive(Clone)]
pub struct StatusMemo {
    written: Arc<ObjectMap<MyOwnShell, Memo>>,
    /// The `MyOwnShell` watch cache: a write it already holds needs no memo.
    shells: Store<CachedShell>,
}

/// A status this controller wrote.
struct Memo {
    status: MyOwnShellStatus,
    /// Of the object the write returned: its watch event is our own echo.
    resource_version: Option<String>,
    at: Instant,
}

/// The resourceVersion whose watch event a status write to `reconciled` may skip, given the
/// object the write returned. A status patch that changes nothing is not written: the apiserver
/// returns the object as it is, maybe a newer version made by someone else. Its event may be
/// skipped only if it holds nothing this reconcile did not act on: the same object, generation
/// (a status write never bumps it; a spec change or a deletion does) and finalizers.
pub fn echo_version(reconciled: &MyOwnShell, written: &MyOwnShell) -> Option<String> {
    let (a, b) = (&reconciled.metadata, &written.metadata);
    let same = a.uid == b.uid
        && a.generation == b.generation
        && a.deletion_timestamp == b.deletion_timestamp
        && a.finalizers == b.finalizers;
    if same { b.resource_version.clone() } else { None }
}

/// Whether `seen` is the very version a write of ours returned.
fn same_version(written: Option<&String>, seen: Option<&String>) -> bool {
    written.is_some() && written == seen
}

impl StatusMemo {
    /// A memo older than this is not trusted: watch events arrive in milliseconds, so an
    /// older one means the write was overwritten or lost, and the cache decides again.
    pub const TTL: Duration = Duration::from_secs(30);

    /// The newest status known for `shell`: what we wrote, unless the cache already shows it
    /// (or the memo is too old), else the cached one.
    pub fn latest(&self, shell: &MyOwnShell) -> Option<MyOwnShellStatus> {
        let written = self.written.inspect(&ObjectRef::from_obj(shell), |memo| match memo {
            Some(memo) if Some(&memo.status) != shell.status.as_ref() && memo.at.elapsed() < Self::TTL => {
                (true, Some(memo.status.clone()))
            }
            // The cache shows it, or it is too old to trust: forget it.
            Some(_) => (false, None),
            None => (true, None),
        });
        written.or_else(|| shell.status.clone())
    }

    /// Memos over the watch cache `shells`.
    pub fn new(shells: Store<CachedShell>) -> Self {
        Self { written: Arc::default(), shells }
    }

    /// Remember `status`, written to `shell`; `resource_version` is that of the object the
    /// write returned. Nothing is remembered if the cache already holds that version: the
    /// watch may deliver a write before its response is read, and a memo then would only
    /// hide a later change by someone else.
    pub fn record(&self, shell: &MyOwnShell, status: MyOwnShellStatus, resource_version: Option<String>) {
        let key = ObjectRef::from_obj(shell);
        let cached = self.shells.get(&retype(&key)).and_then(|s| s.meta().resource_version.clone());
        if resource_version.is_some() && cached == resource_version {
            return;
        }
        self.written.insert(key, Memo { status, resource_version, at: Instant::now() });
    }

    /// The watch caught up with (or went past) a write: forget it. Returns whether the event
    /// is exactly the version our write produced (a relist's objects never count as that).
    pub(crate) fn observe(&self, event: &watcher::Event<CachedShell>) -> bool {
        match event {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => {
                self.written.inspect(&retype(&ObjectRef::from_obj(s)), |memo| {
                    let Some(memo) = memo else { return (true, false) };
                    let echo = matches!(event, watcher::Event::Apply(_))
                        && same_version(memo.resource_version.as_ref(), s.meta().resource_version.as_ref());
                    // Our own version arriving means the cache has caught up, even where it does
                    // not equal what we sent (the apiserver keeps times to the second, drops
                    // fields its schema lacks): every later event is newer, and a status someone
                    // else writes after it must be seen as it is, not hidden behind the memo.
                    // The shell is unpacked only here, where a write of ours is outstanding.
                    let caught_up = echo || s.shell().is_some_and(|s| Some(&memo.status) == s.status.as_ref());
                    (!caught_up, echo)
                })
            }
            watcher::Event::Delete(s) => {
                self.written.remove(&retype(&ObjectRef::from_obj(s)));
                false
            }
            watcher::Event::Init | watcher::Event::InitDone => false,
        }
    }

    /// Objects with a remembered status write (one the watch has not shown yet).
    pub fn len(&self) -> usize {
        self.written.len()
    }

    /// Whether no status write is remembered: the watch has caught up with all of them.
    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }
}
/// Owned Deployments as last seen: the watch cache, overlaid with what this controller applied
/// and the watch has not delivered yet. Without the overlay, a reconcile that runs between an
/// apply and its watch event would see no Deployment, apply again and report a second "Created".
#[derive(Clone)]
pub struct DeploymentCache {
    store: Store<CachedDeployment>,
    synced: Synced,
    /// Deployments this controller applied, by name, until their watch event arrives.
    recent: Arc<ObjectMap<CachedDeployment, Arc<Deployment>>>,
}

/// The cache key of the Deployment `namespace/name`.
fn key(namespace: &str, name: &str) -> ObjectRef<CachedDeployment> {
    ObjectRef::new(name).within(namespace)
}

impl DeploymentCache {
    /// Over the reflector `store` of the Deployment watch; `synced` tells when that watch has
    /// its first list.
    pub fn new(store: Store<CachedDeployment>, synced: Synced) -> Self {
        Self { store, synced, recent: Arc::default() }
    }

    /// The Deployment `namespace/name`, newest known version (pruned).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Deployment>> {
        let key = key(namespace, name);
        let recent = self.recent.get(&key);
        recent.or_else(|| self.store.get(&key).and_then(|cached| cached.deployment()).map(Arc::new))
    }

    /// Remember a Deployment this controller just wrote (the apply response). Nothing is
    /// remembered if the watch cache already holds that version: the watch may deliver an apply
    /// before its response is read, and an overlay entry then would wait for an event that has
    /// come and gone (a typed Deployment of about 8 KiB each, kept until the object next changes).
    pub fn record_applied(&self, mut deployment: Deployment) -> Arc<Deployment> {
        prune_deployment(&mut deployment);
        let deployment = Arc::new(deployment);
        let (namespace, name) = (deployment.metadata.namespace.as_deref(), deployment.metadata.name.as_deref());
        let key = key(namespace.unwrap_or_default(), name.unwrap_or_default());
        let applied = deployment.metadata.resource_version.as_ref();
        let cached = self.store.get(&key).and_then(|d| d.meta().resource_version.clone());
        if applied.is_none() || cached.as_ref() != applied {
            self.recent.insert(key, deployment.clone());
        }
        deployment
    }

    /// Deployments in the overlay of recent applies (the watch has not delivered them yet).
    pub fn pending_applies(&self) -> usize {
        self.recent.len()
    }

    /// Once the watch reports on a Deployment, the store is at least as new as our own write.
    /// A relist replaces the store wholesale (deletions during a disconnect produce no event),
    /// so its end clears the overlay too. Returns whether the event is exactly the version our
    /// own apply returned.
    pub(crate) fn observe(&self, event: &watcher::Event<CachedDeployment>) -> bool {
        match event {
            watcher::Event::Apply(d) => {
                let applied = self.recent.remove(&ObjectRef::from_obj(d));
                applied.is_some_and(|a| {
                    same_version(a.metadata.resource_version.as_ref(), d.meta().resource_version.as_ref())
                })
            }
            watcher::Event::Delete(d) | watcher::Event::InitApply(d) => {
                self.recent.remove(&ObjectRef::from_obj(d));
                false
            }
            watcher::Event::InitDone => {
                self.recent.clear();
                false
            }
            watcher::Event::Init => false,
        }
    }

    /// Resolves once the first list of Deployments is in the store.
    pub async fn wait_until_ready(&self) -> bool {
        self.synced.wait().await
    }

    /// Deployments in the watch cache (the overlay of recent applies is not counted).
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the watch cache holds no Deployment.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }
}
#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use myownshell_api::MyOwnShellSpec;

    use super::*;

    #[test]
    fn the_status_memo_bridges_a_stale_cache_and_then_steps_aside() {
        let (store, _writer) = reflector::store::<CachedShell>();
        let memo = StatusMemo::new(store);
        let mut shell = MyOwnShell::new("web", MyOwnShellSpec::default());
        shell.metadata.namespace = Some("ns".into());
        let old = MyOwnShellStatus { replicas: 1, ..MyOwnShellStatus::default() };
        let new = MyOwnShellStatus { replicas: 2, ..MyOwnShellStatus::default() };
        shell.status = Some(old.clone());
        assert_eq!(memo.latest(&shell), Some(old.clone()), "nothing written: the cache");

        memo.record(&shell, new.clone(), Some("12".into()));
        assert_eq!(memo.latest(&shell), Some(new.clone()), "the cache is behind our write");

        let mut caught_up = shell.clone();
        caught_up.status = Some(new.clone());
        caught_up.metadata.resource_version = Some("12".into());
        assert!(memo.observe(&watcher::Event::Apply(CachedShell::new(caught_up.clone()))), "the echo of our write");
        assert!(memo.is_empty(), "the watch delivered our write");
        assert_eq!(memo.latest(&caught_up), Some(new.clone()));

        memo.record(&shell, new.clone(), Some("12".into()));
        assert_eq!(memo.latest(&caught_up), Some(new.clone()), "equal to the cache: the memo goes");
        assert!(memo.is_empty());

        memo.record(&shell, old.clone(), Some("13".into()));
        memo.observe(&watcher::Event::Delete(CachedShell::new(shell.clone())));
        assert!(memo.is_empty(), "deleted objects leave no memo");

        // The echo ends the memo even where the stored status differs from what was sent
        // (the apiserver truncates times): a false status written after it is seen as it is.
        memo.record(&shell, new.clone(), Some("20".into()));
        let mut normalised = versioned(&shell, "20");
        normalised.status = Some(MyOwnShellStatus { observed_generation: Some(1), ..new.clone() });
        assert!(memo.observe(&watcher::Event::Apply(CachedShell::new(normalised))), "the echo of our write");
        assert!(memo.is_empty(), "the cache caught up with our write");
        let mut lie = versioned(&shell, "21");
        lie.status = Some(MyOwnShellStatus { ready_replicas: 5, ..new.clone() });
        assert_eq!(memo.latest(&lie), lie.status, "someone else's later status is what reconcile compares");

        // Only the very version written is an echo; a relist never is.
        let cases = [
            ("a later version (someone else's change)", watcher::Event::Apply(cached(&shell, "15")), false),
            ("an earlier version", watcher::Event::Apply(cached(&shell, "13")), false),
            ("our version, in a relist", watcher::Event::InitApply(cached(&shell, "14")), false),
            ("our version", watcher::Event::Apply(cached(&shell, "14")), true),
        ];
        for (what, event, echo) in cases {
            memo.record(&shell, old.clone(), Some("14".into()));
            assert_eq!(memo.observe(&event), echo, "{what}");
        }
        memo.record(&shell, old, None);
        let unversioned = CachedShell::new(shell.clone());
        assert!(!memo.observe(&watcher::Event::Apply(unversioned)), "no version known: never an echo");
    }

    #[test]
    fn a_write_the_cache_already_holds_leaves_no_memo() {
        let (store, mut writer) = reflector::store::<CachedShell>();
        let memo = StatusMemo::new(store);
        let mut shell = MyOwnShell::new("web", MyOwnShellSpec::default());
        shell.metadata.namespace = Some("ns".into());
        shell.metadata.resource_version = Some("7".into());
        writer.apply_watcher_event(&watcher::Event::Apply(CachedShell::new(shell.clone())));
        memo.record(&shell, MyOwnShellStatus::default(), Some("7".into()));
        assert!(memo.is_empty(), "the watch delivered the write before its response was read");
        memo.record(&shell, MyOwnShellStatus::default(), Some("8".into()));
        assert_eq!(memo.len(), 1, "the cache is behind the write");
    }

    #[test]
    fn a_status_write_skips_its_echo_only_if_the_returned_object_holds_nothing_new() {
        let mut reconciled = MyOwnShell::new("web", MyOwnShellSpec::default());
        reconciled.metadata.uid = Some("u1".into());
        reconciled.metadata.generation = Some(3);
        reconciled.metadata.finalizers = Some(vec!["myownshell.io/finalizer".into()]);
        reconciled.metadata.resource_version = Some("10".into());
        let returned = |change: fn(&mut MyOwnShell)| {
            let mut w = reconciled.clone();
            w.metadata.resource_version = Some("11".into());
            change(&mut w);
            w
        };
        /// (what, the change between the reconciled and the returned object, the echo version)
        type Case = (&'static str, fn(&mut MyOwnShell), Option<&'static str>);
        let cases: [Case; 6] = [
            ("our write", |_| {}, Some("11")),
            ("someone's annotation change", |w| w.metadata.annotations = Some(Default::default()), Some("11")),
            ("a spec change (a no-op patch returned the newer object)", |w| w.metadata.generation = Some(4), None),
            ("a deletion", |w| w.metadata.deletion_timestamp = reconciled_deleting(), None),
            ("our finalizer removed by hand", |w| w.metadata.finalizers = None, None),
            ("a new object of the same name", |w| w.metadata.uid = Some("u2".into()), None),
        ];
        for (what, change, want) in cases {
            assert_eq!(echo_version(&reconciled, &returned(change)).as_deref(), want, "{what}");
        }
    }

    fn reconciled_deleting() -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
    }

    fn versioned(shell: &MyOwnShell, resource_version: &str) -> MyOwnShell {
        let mut s = shell.clone();
        s.metadata.resource_version = Some(resource_version.into());
        s
    }

    /// [`versioned`], as the watch cache keeps it.
    fn cached(shell: &MyOwnShell, resource_version: &str) -> CachedShell {
        CachedShell::new(versioned(shell, resource_version))
    }

    #[test]
    fn only_the_applied_version_of_a_deployment_is_our_echo() {
        let (store, mut writer) = reflector::store::<CachedDeployment>();
        let (_tx, synced) = Synced::new();
        let cache = DeploymentCache::new(store, synced);
        let deployment = |rv: &str| {
            let mut d = Deployment::default();
            d.metadata.name = Some("web".into());
            d.metadata.namespace = Some("ns".into());
            d.metadata.resource_version = Some(rv.into());
            d
        };
        let cached = |rv: &str| CachedDeployment::new(deployment(rv));
        cache.record_applied(deployment("7"));
        assert_eq!(cache.get("ns", "web").and_then(|d| d.metadata.resource_version.clone()).as_deref(), Some("7"));
        assert!(cache.observe(&watcher::Event::Apply(cached("7"))), "the echo of our apply");
        assert!(!cache.observe(&watcher::Event::Apply(cached("7"))), "seen once: the overlay is gone");
        assert!(cache.get("ns", "web").is_none(), "not in the watch cache either");
        writer.apply_watcher_event(&watcher::Event::Apply(cached("8")));
        assert_eq!(
            cache.get("ns", "web").and_then(|d| d.metadata.resource_version.clone()).as_deref(),
            Some("8"),
            "decoded from the watch cache"
        );
        cache.record_applied(deployment("9"));
        assert!(!cache.observe(&watcher::Event::Apply(cached("10"))), "status update by the deployment controller");
        cache.record_applied(deployment("11"));
        assert!(!cache.observe(&watcher::Event::Delete(cached("11"))), "a deletion always triggers");
        assert_eq!(cache.pending_applies(), 0);

        // The watch delivered the apply before its response was read: nothing to bridge, and
        // nothing left behind waiting for an event that already came.
        writer.apply_watcher_event(&watcher::Event::Apply(cached("12")));
        assert!(!cache.observe(&watcher::Event::Apply(cached("12"))), "no apply recorded yet");
        let applied = cache.record_applied(deployment("12"));
        assert_eq!(applied.metadata.resource_version.as_deref(), Some("12"), "the response is returned");
        assert_eq!(cache.pending_applies(), 0, "the cache already holds that version");
        assert_eq!(cache.get("ns", "web").and_then(|d| d.metadata.resource_version.clone()).as_deref(), Some("12"));
    }
}
