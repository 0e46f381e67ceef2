//! A `MyOwnShell` as the watch cache keeps it: pruned, serialized and compressed against
//! reference shells, as [`CachedDeployment`](crate::cache::cached_deployment::CachedDeployment)s
//! are.
//!
//! Why packed: with a home, the typed shells in the reflector store were the largest item of
//! the controller's heap, 2.6 KB a shell (heaptrack, `cargo xtask bench controller --objects
//! 2000 --homes --heap-profile`: the typed objects and their statuses' strings), and 10,000
//! shells with homes held the controller's RSS above 100 MiB. Packed, 2,000 shells took 1.9 MB
//! where they took 5.3. Every shell's status is written by
//! the same code ([`status::compute`]), so shells differ in their names, uids, times and a few
//! numbers: LZ4 with the text of reference shells as its dictionary ([`reference`]) keeps each
//! in a few hundred bytes. A reconcile unpacks its shell once (a few microseconds); the caps'
//! count of a class's peers and the class and namespace triggers read the fields kept typed.

use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::{Lookup, ObjectRef};
use myownshell_api::{MyOwnShell, MyOwnShellSpec, names};
use serde::{Deserialize, Deserializer};

use crate::cache::cached_deployment::{REFERENCE_UID, reference_deployment};
use crate::cache::packed::Packed;
use crate::cache::prune::prune_shell;
use crate::home::assess::assess;
use crate::home::cached::CachedClaim;
use crate::home::claim::Ownership;
use crate::life::{lifetime, rollout};
use crate::resource_as::identity;
use crate::write::status;

/// A `MyOwnShell` as the watch cache keeps it: pruned ([`prune_shell`]) and packed, with its
/// identity (name, namespace, uid, resourceVersion), class and owner typed.
/// [`CachedShell::shell`] gives the shell back, exactly as pruned, for a reconcile to read. It
/// is decoded from the watch's JSON as a `MyOwnShell` and packed at once, so the typed object
/// lives only while one event passes.
///
/// The packed text is shared: cloning a `CachedShell` copies none of it, and a relist that
/// brings a shell back unchanged keeps the one already cached ([`CachedShell::share_unchanged`]).
#[derive(Clone, Debug)]
pub struct CachedShell {
    metadata: ObjectMeta,
    /// `spec.className`: the class triggers and the caps' count of peers read it for every shell.
    class_name: Option<String>,
    /// `spec.owner`: the caps per user count the owner's shells.
    owner: Option<String>,
    /// The pruned shell's JSON, LZ4-compressed against [`reference`], its length first.
    packed: Packed,
}

impl CachedShell {
    /// The shell of the watch's JSON `text`, pruned and packed. The text itself is what is
    /// packed, not the typed shell's serialization, which would cut the sub-second times a user
    /// writes into the spec (`updateRequestedAt`) to seconds; it is decoded as a `MyOwnShell`
    /// too, for the fields kept typed and so that whatever is cached unpacks.
    pub fn from_json(mut text: serde_json::Value) -> Result<Self, serde_json::Error> {
        prune_shell(&mut text);
        let shell = MyOwnShell::deserialize(&text)?;
        let m = shell.metadata;
        let metadata = identity(m.name, m.namespace, m.uid, m.resource_version);
        let (class_name, owner) = (shell.spec.class_name, shell.spec.owner);
        // Serializing a JSON value cannot fail; were it ever to, the empty text decodes to
        // nothing and reconcile reads the shell from the apiserver.
        let json = serde_json::to_vec(&text).unwrap_or_default();
        Ok(Self { metadata, class_name, owner, packed: Packed::new(&json, reference()) })
    }

    /// `shell`, pruned and packed (its times as its serialization gives them: to the second).
    #[cfg(test)]
    pub fn new(shell: MyOwnShell) -> Self {
        Self::from_json(serde_json::to_value(shell).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The shell as cached (pruned), or `None` if it does not unpack (never, short of a bug:
    /// then reconcile reads the shell from the apiserver).
    pub fn shell(&self) -> Option<MyOwnShell> {
        self.packed.unpack(reference())
    }

    /// `spec.className`.
    pub fn class_name(&self) -> Option<&str> {
        self.class_name.as_deref()
    }

    /// `spec.owner`.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// Take the packed text of `cached` if it is this very version of this object
    /// ([`Packed::share_unchanged`]), dropping this one's copy.
    pub fn share_unchanged(&mut self, cached: &Self) {
        self.packed.share_unchanged(&self.metadata, &cached.packed, &cached.metadata);
    }

    /// Bytes the packed shell takes.
    pub fn packed_len(&self) -> usize {
        self.packed.len()
    }
}

impl<'de> Deserialize<'de> for CachedShell {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = serde_json::Value::deserialize(deserializer)?;
        Self::from_json(text).map_err(serde::de::Error::custom)
    }
}

crate::resource_as::resource_as!(CachedShell, MyOwnShell);

/// The same object's key as another type of the same resource: the cache's keys are
/// `ObjectRef<CachedShell>`, everything a reconcile keeps per shell is keyed by
/// `ObjectRef<MyOwnShell>`.
pub fn retype<A, B>(key: &ObjectRef<A>) -> ObjectRef<B>
where
    A: Lookup<DynamicType = ()>,
    B: Lookup<DynamicType = ()>,
{
    let mut to = ObjectRef::<B>::new(&key.name);
    to.namespace.clone_from(&key.namespace);
    to.extra.clone_from(&key.extra);
    to
}

/// The dictionary every cached shell is packed against: the JSON of a running shell with a home
/// (and an owner) and of one with the default spec, as the watch caches them (pruned, with the
/// identity the apiserver adds and the status [`status::compute`] writes once its Deployment
/// runs). Built once per process from the code that writes every status, so it follows the
/// status as that changes.
pub fn reference() -> &'static [u8] {
    static REFERENCE: LazyLock<Vec<u8>> = LazyLock::new(|| {
        let home = MyOwnShellSpec {
            home: Some(myownshell_api::Home::default()),
            owner: Some("alice".to_owned()),
            owner_uid: Some(REFERENCE_UID.to_owned()),
            ..MyOwnShellSpec::default()
        };
        let mut text = reference_text(home);
        text.extend(reference_text(MyOwnShellSpec::default()));
        text
    });
    &REFERENCE
}

/// The cached JSON of a running shell of `spec` (empty if its Deployment cannot be built).
fn reference_text(spec: MyOwnShellSpec) -> Vec<u8> {
    let with_home = spec.home.is_some();
    let Some(deployment) = reference_deployment(spec.clone()) else { return Vec::new() };
    let mut shell = MyOwnShell::new("shell", spec);
    let meta = &mut shell.metadata;
    meta.namespace = Some("default".to_owned());
    meta.uid = Some(REFERENCE_UID.to_owned());
    meta.resource_version = Some("1".to_owned());
    meta.generation = Some(1);
    meta.creation_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    meta.finalizers = Some(vec![names::FINALIZER.to_owned()]);
    let claim = CachedClaim {
        phase: "Bound".to_owned(),
        capacity: Some(Quantity("1Gi".to_owned())),
        node: Some("node".to_owned()),
        storage_class: Some("standard".to_owned()),
        ..CachedClaim::default()
    };
    let home = with_home.then(|| assess(&names::home_claim("shell"), Some((&claim, Ownership::Ours)), &|_| None));
    let plan = lifetime::plan(&shell, None, Timestamp::UNIX_EPOCH);
    let inputs = status::Inputs {
        deployment: Some(&deployment),
        plan: Some(&plan),
        template: Some(&rollout::Decision::Current),
        home: home.as_ref(),
        ..status::Inputs::default()
    };
    shell.status = Some(status::compute(&shell, None, &inputs, &Time(Timestamp::UNIX_EPOCH)));
    // As a JSON value, as the cache packs it: its keys sorted, as the apiserver writes a custom
    // resource's.
    let Ok(mut text) = serde_json::to_value(&shell) else { return Vec::new() };
    prune_shell(&mut text);
    serde_json::to_vec(&text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::Resource;
    use kube::runtime::reflector;
    use myownshell_api::MyOwnShellStatus;

    use super::*;

    /// A shell of `spec` as the watch delivers it once it runs: identity, managedFields, a
    /// status like the reference's but its own times, uids and claim.
    fn live(name: &str, spec: MyOwnShellSpec) -> MyOwnShell {
        let mut shell: MyOwnShell = serde_json::from_slice(&reference_text(spec)).unwrap();
        shell.metadata.name = Some(name.to_owned());
        shell.metadata.namespace = Some("team-a".to_owned());
        shell.metadata.uid = Some("1a2b3c4d-5e6f-4071-8293-a4b5c6d7e8f9".to_owned());
        shell.metadata.resource_version = Some("4567890".to_owned());
        shell.metadata.managed_fields =
            Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry::default()]);
        shell.metadata.annotations =
            Some([("kubectl.kubernetes.io/last-applied-configuration".into(), "{}".into())].into());
        let at = Time("2026-11-30T17:00:00Z".parse().unwrap());
        let status = shell.status.get_or_insert_with(MyOwnShellStatus::default);
        status.deployment_uid = Some("8e0b1c2d-3f4a-4b5c-8d6e-7f8091a2b3c4".to_owned());
        status.started_at = Some(at.clone());
        status.selector = status.selector.as_ref().map(|s| s.replace("shell", name));
        for condition in &mut status.conditions {
            condition.last_transition_time = at.clone();
            condition.message = condition.message.replace("shell", name);
        }
        if let Some(home) = status.home.as_mut() {
            home.claim_name = names::home_claim(name);
            home.node = Some("worker-7".to_owned());
        }
        shell
    }

    /// `shell` as [`prune_shell`] leaves it.
    fn pruned(shell: &MyOwnShell) -> MyOwnShell {
        let mut text = serde_json::to_value(shell).unwrap();
        prune_shell(&mut text);
        serde_json::from_value(text).unwrap()
    }

    /// Decoded from the watch's JSON, as the watcher does.
    fn from_watch(shell: &MyOwnShell) -> CachedShell {
        serde_json::from_value(serde_json::to_value(shell).unwrap()).unwrap()
    }

    #[test]
    fn a_cached_shell_gives_back_the_pruned_shell() {
        let classed = MyOwnShellSpec {
            class_name: Some("students".to_owned()),
            owner: Some("bob".to_owned()),
            size: Some(2),
            ..MyOwnShellSpec::default()
        };
        for (case, spec) in [("default", MyOwnShellSpec::default()), ("classed", classed.clone())] {
            let live = live("web", spec.clone());
            let cached = from_watch(&live);
            let pruned = pruned(&live);
            assert_eq!(pruned.metadata.managed_fields, None, "{case}: pruned");
            assert_eq!(cached.shell(), Some(pruned), "{case}: everything reconcile reads");
            let key = reflector::ObjectRef::from_obj(&cached);
            assert_eq!((key.name.as_str(), key.namespace.as_deref()), ("web", Some("team-a")), "{case}");
            assert_eq!(cached.meta().resource_version.as_deref(), Some("4567890"), "{case}");
            assert_eq!(cached.meta().uid, live.metadata.uid, "{case}");
            assert_eq!(cached.class_name(), spec.class_name.as_deref(), "{case}");
            assert_eq!(cached.owner(), spec.owner.as_deref(), "{case}");
        }
        assert_eq!(<CachedShell as Resource>::plural(&()), "myownshells");
        assert_eq!(<CachedShell as Resource>::api_version(&()), <MyOwnShell as Resource>::api_version(&()));
    }

    #[test]
    fn a_shell_like_the_reference_packs_to_a_fraction_of_its_text() {
        assert!(!reference().is_empty(), "the reference builds");
        let home = MyOwnShellSpec {
            home: Some(myownshell_api::Home::default()),
            owner: Some("alice@example.com".to_owned()),
            ..MyOwnShellSpec::default()
        };
        // (case, spec, most bytes packed).
        for (case, spec, most) in [("default", MyOwnShellSpec::default(), 300), ("home", home, 400)] {
            let live = pruned(&live("shell-for-alice", spec));
            let text = serde_json::to_vec(&live).unwrap().len();
            let cached = CachedShell::new(live.clone());
            let packed = cached.packed_len();
            assert!(packed <= most && packed * 4 < text, "{case}: {packed} bytes packed of {text}");
            assert_eq!(cached.shell(), Some(live), "{case}: unpacks to the same shell");
        }
    }

    #[test]
    fn the_watch_text_is_kept_to_the_nanosecond() {
        // `kubectl myownshell update` writes the time of the request, sub-second digits and all;
        // reconcile compares it with when the template was applied. Packing the typed shell's
        // own serialization cut it to the second, and a request made in the same second as the
        // last apply was taken for an old one (the class envtest's update never rolled out).
        let asked = "2026-11-30T17:00:00.123456789Z";
        let mut text = serde_json::to_value(live("web", MyOwnShellSpec::default())).unwrap();
        text["spec"]["updateRequestedAt"] = serde_json::json!(asked);
        let cached: CachedShell = serde_json::from_value(text).unwrap();
        let shell = cached.shell().unwrap();
        assert_eq!(shell.spec.update_requested_at, Some(Time(asked.parse().unwrap())));
        let wrong = serde_json::json!({"metadata": {"name": "web"}, "spec": {"size": "two"}});
        let refused = serde_json::from_value::<CachedShell>(wrong).unwrap_err().to_string();
        assert!(refused.contains("invalid type"), "a shell that would not unpack is refused: {refused}");
    }

    #[test]
    fn an_unchanged_version_shares_the_packed_text() {
        let live = live("web", MyOwnShellSpec::default());
        let cached = from_watch(&live);
        let mut again = from_watch(&live);
        assert!(!Arc::ptr_eq(&again.packed.0, &cached.packed.0));
        again.share_unchanged(&cached);
        assert!(Arc::ptr_eq(&again.packed.0, &cached.packed.0), "the same version: one text");
        let mut changed = live.clone();
        changed.metadata.resource_version = Some("4567891".to_owned());
        changed.spec.size = Some(0);
        let mut newer = CachedShell::new(changed);
        newer.share_unchanged(&cached);
        assert!(!Arc::ptr_eq(&newer.packed.0, &cached.packed.0), "a new version keeps its own text");
        assert_eq!(newer.shell().and_then(|s| s.spec.size), Some(0));
    }

    #[test]
    fn text_that_does_not_unpack_is_no_shell() {
        let mut cached = from_watch(&live("web", MyOwnShellSpec::default()));
        cached.packed = Packed(Arc::from(&b"\x05\0\0\0junk"[..]));
        assert_eq!(cached.shell(), None);
        cached.packed = Packed(Arc::from(&[][..]));
        assert_eq!(cached.shell(), None);
    }

    #[test]
    fn a_key_keeps_its_object_across_types() {
        let key = ObjectRef::<MyOwnShell>::new("web").within("team-a");
        let cached: ObjectRef<CachedShell> = retype(&key);
        assert_eq!((cached.name.as_str(), cached.namespace.as_deref()), ("web", Some("team-a")));
        assert_eq!(retype::<CachedShell, MyOwnShell>(&cached), key);
    }
}
