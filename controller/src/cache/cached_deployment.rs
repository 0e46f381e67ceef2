//! A Deployment as the watch cache keeps it: pruned, serialized, and compressed against a
//! reference Deployment, so that 10,000 of them fit in a few MiB.
//!
//! Why packed: a typed Deployment with its one container takes about 8 KiB of heap (mostly
//! empty optional fields and label maps); its JSON text, less the apiserver's defaults the
//! desired Deployment never sets, about 1.6 KiB, which at 10,000 objects was 17 MB, the
//! largest item of the controller's heap (heaptrack, `cargo xtask bench controller --objects
//! 10000 --heap-profile`). But every Deployment this controller owns is built by the same
//! function: they differ in their names, uids and a few numbers. LZ4 with the text of two
//! such Deployments, with a home and without, as its dictionary ([`reference`]) stores each in
//! about 260 to 280 bytes, and gives it back in well under a microsecond, once per reconcile. A
//! Deployment unlike the reference (another image, command or status) packs less tightly;
//! nothing else changes.

use std::sync::LazyLock;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use myownshell_api::{MyOwnShell, MyOwnShellSpec};
use serde::{Deserialize, Deserializer};

use crate::cache::packed::Packed;
use crate::cache::prune::prune_deployment;
use crate::resource_as::identity;

/// A Deployment as the watch cache keeps it: pruned ([`prune_deployment`]) and packed, with
/// only the identity the store keys it by (name, namespace, uid, resourceVersion) typed.
/// [`CachedDeployment::deployment`] gives the Deployment back, exactly as pruned, for a
/// reconcile to read. It is decoded from the watch's JSON as a Deployment and packed at once,
/// so the typed object lives only while one event passes.
///
/// The packed text is shared: cloning a `CachedDeployment` (the reflector clones every object
/// it stores) copies none of it, and a relist that brings a Deployment back unchanged keeps the
/// one already cached ([`CachedDeployment::share_unchanged`]), so a relist of N Deployments
/// does not hold two copies of every one while the new list replaces the old.
#[derive(Clone, Debug)]
pub struct CachedDeployment {
    metadata: ObjectMeta,
    /// The pruned Deployment's JSON, LZ4-compressed against [`reference`], its length first.
    packed: Packed,
}

impl CachedDeployment {
    /// `deployment`, pruned and packed.
    pub fn new(mut deployment: Deployment) -> Self {
        prune_deployment(&mut deployment);
        let m = &deployment.metadata;
        let metadata = identity(m.name.clone(), m.namespace.clone(), m.uid.clone(), m.resource_version.clone());
        // Serializing a Deployment cannot fail (string keys only); were it ever to, the empty
        // text decodes to nothing and reconcile reads the Deployment from the apiserver.
        let json = serde_json::to_vec(&deployment).unwrap_or_default();
        Self { metadata, packed: Packed::new(&json, reference()) }
    }

    /// Take the packed text of `cached` if it is this very version of this object
    /// ([`Packed::share_unchanged`]), dropping this one's copy.
    pub fn share_unchanged(&mut self, cached: &Self) {
        self.packed.share_unchanged(&self.metadata, &cached.packed, &cached.metadata);
    }

    /// The Deployment as cached (pruned), or `None` if it does not unpack (never, short of a
    /// bug: then reconcile reads the Deployment from the apiserver).
    pub fn deployment(&self) -> Option<Deployment> {
        self.packed.unpack(reference())
    }

    /// Bytes the packed Deployment takes.
    pub fn packed_len(&self) -> usize {
        self.packed.len()
    }
}

/// The dictionary every cached Deployment is packed against: the JSON of the Deployments of a
/// `MyOwnShell` with a home and of one with the default spec, as the watch caches them once the
/// Deployment controller has rolled them out (pruned, with the identity and status the
/// apiserver adds). Built once per process from the same code that builds every desired
/// Deployment, so it follows the desired Deployment as that changes; packing and unpacking use
/// the same bytes. Both, because a home adds a volume, its mount and `Recreate` that the
/// default's text lacks: a shell's Deployment with a home (2.7 KB of text) packed to 621 bytes
/// against the default's alone, and packs to 276 against both; one without a home to 260 (was
/// 244). That is 3.4 MB less at 10,000 shells with homes, 0.2 MB more without (the dictionary,
/// a few KB, is well within LZ4's 64 KiB window).
pub fn reference() -> &'static [u8] {
    static REFERENCE: LazyLock<Vec<u8>> = LazyLock::new(|| {
        let home = MyOwnShellSpec { home: Some(myownshell_api::Home::default()), ..MyOwnShellSpec::default() };
        let mut text = reference_text(home);
        text.extend(reference_text(MyOwnShellSpec::default()));
        text
    });
    &REFERENCE
}

/// The cached Deployment's JSON of a shell of `spec` (empty if it cannot be built).
fn reference_text(spec: MyOwnShellSpec) -> Vec<u8> {
    let Some(mut deployment) = reference_deployment(spec) else { return Vec::new() };
    prune_deployment(&mut deployment);
    serde_json::to_vec(&deployment).unwrap_or_default()
}

/// The uid of the reference objects ([`reference_deployment`], the cached shells' reference).
pub(crate) const REFERENCE_UID: &str = "00000000-0000-0000-0000-000000000000";

/// The Deployment of a shell `shell` of `spec` in `default`, as the apiserver returns it once the
/// Deployment controller rolled it out (identity, one ready pod, its conditions), not pruned;
/// `None` if it cannot be built.
pub(crate) fn reference_deployment(spec: MyOwnShellSpec) -> Option<Deployment> {
    let mut shell = MyOwnShell::new("shell", spec);
    shell.metadata.namespace = Some("default".to_owned());
    shell.metadata.uid = Some(REFERENCE_UID.to_owned());
    // `desired` fails only without name, namespace or uid, all set above; without a reference
    // the Deployments are packed on their own, less tightly.
    let mut deployment = crate::deployment::desired(&shell, None).ok()?;
    deployment.metadata.uid = Some(REFERENCE_UID.to_owned());
    deployment.metadata.resource_version = Some("1".to_owned());
    deployment.metadata.generation = Some(1);
    let time = Time(Timestamp::UNIX_EPOCH);
    let condition = |type_: &str, reason: &str, message: &str| DeploymentCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_transition_time: Some(time.clone()),
        last_update_time: Some(time.clone()),
    };
    deployment.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(1),
        updated_replicas: Some(1),
        ready_replicas: Some(1),
        available_replicas: Some(1),
        conditions: Some(vec![
            condition("Available", "MinimumReplicasAvailable", "Deployment has minimum availability."),
            condition("Progressing", "NewReplicaSetAvailable", "ReplicaSet \"shell-0\" has successfully progressed."),
        ]),
        ..DeploymentStatus::default()
    });
    Some(deployment)
}

impl<'de> Deserialize<'de> for CachedDeployment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Deployment::deserialize(deserializer).map(Self::new)
    }
}

crate::resource_as::resource_as!(CachedDeployment, k8s_openapi::api::apps::v1::Deployment);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::Resource;
    use kube::runtime::reflector;
    use myownshell_api::ShellResources;

    use super::*;

    /// `shell`'s Deployment as the apiserver returns it: identity, defaults, status.
    fn live(shell: &MyOwnShell, uid: &str, resource_version: &str) -> Deployment {
        let mut live = crate::deployment::desired(shell, None).unwrap();
        live.metadata.uid = Some(uid.into());
        live.metadata.resource_version = Some(resource_version.into());
        live.metadata.generation = Some(3);
        live.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        let spec = live.spec.as_mut().unwrap();
        spec.revision_history_limit = Some(10);
        spec.progress_deadline_seconds = Some(600);
        let pod = spec.template.spec.as_mut().unwrap();
        pod.restart_policy = Some("Always".into());
        pod.containers[0].image_pull_policy = Some("IfNotPresent".into());
        live.metadata
            .annotations
            .get_or_insert_default()
            .insert("deployment.kubernetes.io/revision".into(), "1".into());
        live.status = Some(DeploymentStatus { ready_replicas: Some(1), ..Default::default() });
        live
    }

    fn shell(name: &str, spec: MyOwnShellSpec) -> MyOwnShell {
        let mut shell = MyOwnShell::new(name, spec);
        shell.metadata.namespace = Some("team-a".into());
        shell.metadata.uid = Some("1a2b3c4d-5e6f-4071-8293-a4b5c6d7e8f9".into());
        shell
    }

    /// Decoded from the watch's JSON, as the watcher does.
    fn from_watch(d: &Deployment) -> CachedDeployment {
        serde_json::from_value(serde_json::to_value(d).unwrap()).unwrap()
    }

    #[test]
    fn a_cached_deployment_gives_back_the_pruned_deployment() {
        let custom = MyOwnShellSpec {
            size: Some(3),
            image: Some("registry.example.com/tools:1".into()),
            command: Some(vec!["sh".into(), "-c".into(), "sleep 1d".into()]),
            resources: Some(ShellResources {
                requests: Some([("cpu".to_owned(), Quantity(".5".into()))].into()),
                limits: None,
            }),
            ..MyOwnShellSpec::default()
        };
        for (case, spec) in [("default", MyOwnShellSpec::default()), ("custom", custom)] {
            let shell = shell("web", spec);
            let live = live(&shell, "8e0b1c2d-3f4a-4b5c-8d6e-7f8091a2b3c4", "42");
            let cached = from_watch(&live);
            let mut pruned = live.clone();
            prune_deployment(&mut pruned);
            assert_eq!(pruned.spec.as_ref().and_then(|s| s.revision_history_limit), None, "{case}: a default dropped");
            assert_eq!(cached.deployment(), Some(pruned.clone()), "{case}: everything reconcile reads");
            let desired = crate::deployment::desired(&shell, None).unwrap();
            assert!(!crate::deployment::needs_apply(&desired, Some(&pruned)), "{case}");
            // The store keys it by its identity.
            let key = reflector::ObjectRef::from_obj(&cached);
            assert_eq!((key.name.as_str(), key.namespace.as_deref()), ("web", Some("team-a")), "{case}");
            assert_eq!(cached.meta().resource_version.as_deref(), Some("42"), "{case}");
            assert_eq!(cached.meta().uid.as_deref(), Some("8e0b1c2d-3f4a-4b5c-8d6e-7f8091a2b3c4"), "{case}");
        }
        assert_eq!(CachedDeployment::plural(&()), "deployments");
        assert_eq!(CachedDeployment::api_version(&()), "apps/v1");
    }

    #[test]
    fn a_deployment_like_the_reference_packs_to_a_fraction_of_its_text() {
        assert!(!reference().is_empty(), "the reference builds");
        let home = MyOwnShellSpec { home: Some(myownshell_api::Home::default()), ..MyOwnShellSpec::default() };
        // (case, spec, most bytes packed): a home's volume and mount pack as tightly as the rest
        // (621 bytes against a reference without a home).
        for (case, spec, most) in [("default", MyOwnShellSpec::default(), 300), ("home", home, 350)] {
            let shell = shell("shell-for-alice", spec);
            let mut live = live(&shell, "8e0b1c2d-3f4a-4b5c-8d6e-7f8091a2b3c4", "4567890");
            prune_deployment(&mut live);
            let text = serde_json::to_vec(&live).unwrap().len();
            let cached = CachedDeployment::new(live.clone());
            let packed = cached.packed_len();
            assert!(packed <= most && packed * 4 < text, "{case}: {packed} bytes packed of {text}");
            assert_eq!(cached.deployment(), Some(live), "{case}: unpacks to the same Deployment");
        }
    }

    #[test]
    fn an_unchanged_version_shares_the_packed_text() {
        let shell = shell("web", MyOwnShellSpec { size: Some(2), ..MyOwnShellSpec::default() });
        let live = live(&shell, "d1", "42");
        let cached = from_watch(&live);
        // A relist's copy of the same version shares the cached text; a new version does not.
        let mut again = from_watch(&live);
        assert!(!Arc::ptr_eq(&again.packed.0, &cached.packed.0));
        again.share_unchanged(&cached);
        assert!(Arc::ptr_eq(&again.packed.0, &cached.packed.0), "the same version: one text");
        assert_eq!(again.deployment(), cached.deployment());
        let mut changed = live.clone();
        changed.metadata.resource_version = Some("43".into());
        changed.spec.as_mut().unwrap().replicas = Some(5);
        let mut newer = CachedDeployment::new(changed);
        newer.share_unchanged(&cached);
        assert!(!Arc::ptr_eq(&newer.packed.0, &cached.packed.0), "a new version keeps its own text");
        assert_eq!(newer.deployment().and_then(|d| d.spec).and_then(|s| s.replicas), Some(5));
    }

    #[test]
    fn text_that_does_not_unpack_is_no_deployment() {
        let mut cached = from_watch(&live(&shell("web", MyOwnShellSpec::default()), "d1", "42"));
        cached.packed = Packed(Arc::from(&b"\x05\0\0\0junk"[..]));
        assert_eq!(cached.deployment(), None);
        cached.packed = Packed(Arc::from(&[][..]));
        assert_eq!(cached.deployment(), None);
    }
}
