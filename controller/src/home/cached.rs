//! The shells' home claims as the controller keeps them ([`CachedClaim`], in a [`ClaimIndex`]),
//! from a watch of the PersistentVolumeClaims carrying the shells' managed-by label.
//!
//! Each claim is read straight from the watch's JSON into what ownership and status need: no
//! typed claim, no managedFields, no label or annotation maps (only the few strings the
//! ownership rule reads: [`ClaimMeta`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use myownshell_api::{MyOwnShell, names};
use parking_lot::RwLock;
use serde::{Deserialize, Deserializer};
use tokio::sync::watch;

use crate::cache::synced::Synced;
use crate::resource_as::identity;

use crate::home::claim::ClaimMeta;

/// The annotation the scheduler writes on a claim of a class that binds on first use: the node
/// the volume was provisioned for (local volumes cannot leave it).
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// A home claim as the watch keeps it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedClaim {
    pub(crate) metadata: ObjectMeta,
    /// What [`crate::home::claim::of`] reads: its controller, the shell its labels name, the
    /// retained mark, the owner annotations.
    pub(crate) meta: ClaimMeta,
    /// When its deletion was asked for.
    pub deleting_since: Option<Time>,
    /// `spec.storageClassName` (after the apiserver defaulted it).
    pub storage_class: Option<String>,
    /// `spec.resources.requests.storage`.
    pub requested: Option<Quantity>,
    /// `status.phase`.
    pub phase: String,
    /// `status.capacity.storage`.
    pub capacity: Option<Quantity>,
    /// The node its volume was provisioned for ([`SELECTED_NODE_ANNOTATION`]).
    pub node: Option<String>,
    /// The volume grew; the file system grows when a pod next mounts it (`FileSystemResizePending`).
    pub resize_pending: bool,
}

impl CachedClaim {
    /// What the ownership rule reads.
    pub fn meta(&self) -> &ClaimMeta {
        &self.meta
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Its uid.
    pub fn uid(&self) -> Option<&str> {
        self.metadata.uid.as_deref()
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Wire {
    #[serde(default)]
    metadata: MetaWire,
    #[serde(default)]
    spec: SpecWire,
    #[serde(default)]
    status: StatusWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MetaWire {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    owner_references: Vec<OwnerWire>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
}

#[derive(Deserialize, Default)]
struct OwnerWire {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    controller: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SpecWire {
    #[serde(default)]
    storage_class_name: Option<String>,
    #[serde(default)]
    resources: ResourcesWire,
}

#[derive(Deserialize, Default)]
struct ResourcesWire {
    #[serde(default)]
    requests: BTreeMap<String, Quantity>,
}

#[derive(Deserialize, Default)]
struct StatusWire {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    capacity: BTreeMap<String, Quantity>,
    #[serde(default)]
    conditions: Vec<ConditionWire>,
}

#[derive(Deserialize, Default)]
struct ConditionWire {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
}

impl<'de> Deserialize<'de> for CachedClaim {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Wire { metadata: mut meta, mut spec, mut status } = Wire::deserialize(deserializer)?;
        let node = meta.annotations.remove(SELECTED_NODE_ANNOTATION);
        let controller = meta.owner_references.iter().find(|o| o.controller == Some(true));
        let controller = controller.map(|o| (o.kind.as_str(), o.uid.as_str()));
        let claim_meta = ClaimMeta::read(controller, &meta.labels, &meta.annotations);
        let resize_pending =
            status.conditions.iter().any(|c| c.type_ == "FileSystemResizePending" && c.status == "True");
        Ok(Self {
            metadata: identity(meta.name, meta.namespace, meta.uid, meta.resource_version),
            meta: claim_meta,
            deleting_since: meta.deletion_timestamp,
            storage_class: spec.storage_class_name,
            requested: spec.resources.requests.remove("storage"),
            phase: status.phase.unwrap_or_else(|| "Pending".to_owned()),
            capacity: status.capacity.remove("storage"),
            node,
            resize_pending,
        })
    }
}

crate::resource_as::resource_as!(CachedClaim, k8s_openapi::api::core::v1::PersistentVolumeClaim);

/// The home claims by namespace and claim name (`myownshell-home-<shell>`).
pub struct ClaimIndex {
    inner: RwLock<Inner>,
    /// Marks [`ClaimIndex::wait_synced`] at the first list.
    mark_synced: watch::Sender<bool>,
    synced: Synced,
}

type Key = (String, String);

#[derive(Default)]
struct Inner {
    claims: HashMap<Key, Arc<CachedClaim>>,
    /// The claims seen so far in a relist being gathered.
    relist: Option<HashSet<Key>>,
}

impl Default for ClaimIndex {
    fn default() -> Self {
        let (mark_synced, synced) = Synced::new();
        Self { inner: RwLock::default(), mark_synced, synced }
    }
}

/// The shell whose home the claim `key` is (every claim kept here is one: see `apply`).
fn shell_of(key: &Key) -> ObjectRef<MyOwnShell> {
    ObjectRef::new(names::shell_of_home_claim(&key.1).unwrap_or_default()).within(&key.0)
}

impl ClaimIndex {
    /// Take in one watch event; the shells whose claims changed (a relist also drops, and
    /// names, the claims deleted while the watch was away).
    pub fn apply(&self, event: &watcher::Event<CachedClaim>) -> Vec<ObjectRef<MyOwnShell>> {
        let mut inner = self.inner.write();
        let (claim, gone) = match event {
            watcher::Event::Init => {
                inner.relist = Some(HashSet::new());
                return Vec::new();
            }
            watcher::Event::InitDone => {
                self.mark_synced.send_replace(true);
                let Some(seen) = inner.relist.take() else { return Vec::new() };
                let vanished: Vec<Key> = inner.claims.keys().filter(|k| !seen.contains(*k)).cloned().collect();
                for key in &vanished {
                    inner.claims.remove(key);
                }
                return vanished.iter().map(shell_of).collect();
            }
            watcher::Event::Apply(c) | watcher::Event::InitApply(c) => (c, false),
            watcher::Event::Delete(c) => (c, true),
        };
        let Some(namespace) = claim.metadata.namespace.clone() else { return Vec::new() };
        // A claim with our labels but not named as a home is none of a shell's business.
        if names::shell_of_home_claim(claim.name()).is_none() {
            return Vec::new();
        }
        let key = (namespace, claim.name().to_owned());
        if let Some(seen) = inner.relist.as_mut() {
            seen.insert(key.clone());
        }
        let changed = if gone {
            inner.claims.remove(&key).is_some()
        } else {
            inner.claims.insert(key.clone(), Arc::new(claim.clone())).is_none_or(|old| *old != *claim)
        };
        if changed { vec![shell_of(&key)] } else { Vec::new() }
    }

    /// Record a claim this controller just wrote (the watch brings it a moment later).
    pub fn record(&self, claim: CachedClaim) {
        if let Some(namespace) = claim.metadata.namespace.clone() {
            self.inner.write().claims.insert((namespace, claim.name().to_owned()), Arc::new(claim));
        }
    }

    /// The home claim named `name` in `namespace`, as last seen.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<CachedClaim>> {
        self.inner.read().claims.get(&(namespace.to_owned(), name.to_owned())).cloned()
    }

    /// How many claims are kept.
    pub fn len(&self) -> usize {
        self.inner.read().claims.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves once the first list is in (before it, a missing claim may only be unseen).
    pub async fn wait_synced(&self) {
        // The sender lives as long as `self`: this never returns unsynced.
        self.synced.wait().await;
    }
}

/// A claim as [`CachedClaim`] from a typed one (the answer to a create or a get).
pub fn from_typed(claim: &k8s_openapi::api::core::v1::PersistentVolumeClaim) -> Option<CachedClaim> {
    serde_json::to_value(claim).ok().and_then(|v| serde_json::from_value(v).ok())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_claim_is_read_into_what_status_needs() {
        let claim: CachedClaim = serde_json::from_value(json!({
            "metadata": {
                "name": "alice", "namespace": "team", "uid": "c-1",
                "labels": {"app.kubernetes.io/name": "myownshell"},
                "annotations": {"myownshell.io/owner": "alice", SELECTED_NODE_ANNOTATION: "node-a", "other": "dropped"},
                "ownerReferences": [{"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "name": "alice", "uid": "s-1", "controller": true}],
                "managedFields": [{"manager": "x"}]
            },
            "spec": {"storageClassName": "local-path", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}, "conditions": [{"type": "FileSystemResizePending", "status": "True"}]}
        }))
        .unwrap();
        let owner = ClaimMeta {
            controller: Some(("MyOwnShell".into(), "s-1".into())),
            owner: Some("alice".into()),
            ..ClaimMeta::default()
        };
        assert_eq!(claim.meta(), &owner, "an instance label only with all of the operator's labels");
        assert_eq!(claim.node.as_deref(), Some("node-a"));
        assert_eq!((claim.phase.as_str(), claim.capacity.clone()), ("Bound", Some(Quantity("2Gi".into()))));
        assert_eq!(claim.requested, Some(Quantity("1Gi".into())));
        assert!(claim.resize_pending);
        let fresh: CachedClaim = serde_json::from_value(json!({"metadata": {"name": "b"}})).unwrap();
        assert_eq!(fresh.phase, "Pending", "a claim the apiserver has not given a phase yet is pending");
    }

    #[test]
    fn the_index_names_the_shell_whose_claim_changed() {
        let index = ClaimIndex::default();
        let claim: CachedClaim = serde_json::from_value(
            json!({"metadata": {"name": "myownshell-home-alice", "namespace": "team"}, "status": {"phase": "Pending"}}),
        )
        .unwrap();
        let alice = vec![ObjectRef::new("alice").within("team")];
        assert_eq!(index.apply(&watcher::Event::Apply(claim.clone())), alice);
        assert_eq!(index.apply(&watcher::Event::Apply(claim.clone())), vec![], "unchanged");
        assert!(index.get("team", "myownshell-home-alice").is_some());
        let stray: CachedClaim =
            serde_json::from_value(json!({"metadata": {"name": "alice", "namespace": "team"}})).unwrap();
        assert_eq!(index.apply(&watcher::Event::Apply(stray)), vec![], "not named as a home");
        assert_eq!(index.apply(&watcher::Event::Delete(claim.clone())), alice);
        assert!(index.is_empty());
        index.apply(&watcher::Event::Apply(claim));
        assert_eq!(index.apply(&watcher::Event::Init), vec![]);
        assert_eq!(index.apply(&watcher::Event::InitDone), alice, "deleted while the watch was away");
        assert!(index.is_empty());
    }
}
