//! Which nodes are not ready, and why ([`NodeIndex`]): a shell whose pod runs on a node that is
//! down says so. Nodes are read straight from the watch's JSON into their `Ready` condition
//! (a node's status lists every image it holds: none of it is kept).

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use parking_lot::RwLock;
use serde::{Deserialize, Deserializer};

use crate::resource_as::identity;

/// A node as the watch keeps it: its name, and why it is not ready (`None`: ready).
#[derive(Clone, Debug)]
pub struct CachedNode {
    metadata: ObjectMeta,
    /// `Ready` is not `True`: its reason and message.
    pub not_ready: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Wire {
    #[serde(default)]
    metadata: MetaWire,
    #[serde(default)]
    status: StatusWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MetaWire {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

#[derive(Deserialize, Default)]
struct StatusWire {
    #[serde(default)]
    conditions: Vec<ConditionWire>,
}

#[derive(Deserialize, Default)]
struct ConditionWire {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "lastTransitionTime")]
    since: Option<String>,
}

impl<'de> Deserialize<'de> for CachedNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let ready = wire.status.conditions.into_iter().find(|c| c.type_ == "Ready");
        let not_ready = match ready {
            Some(c) if c.status == "True" => None,
            Some(c) => Some(format!(
                "Ready is {} since {} ({}: {})",
                c.status,
                c.since.as_deref().unwrap_or("an unknown time"),
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default()
            )),
            None => Some("it has not reported Ready yet".to_owned()),
        };
        let metadata = identity(wire.metadata.name, None, wire.metadata.uid, wire.metadata.resource_version);
        Ok(Self { metadata, not_ready })
    }
}

crate::resource_as::resource_as!(CachedNode, k8s_openapi::api::core::v1::Node);

/// Why each node that is not ready is not.
#[derive(Default)]
pub struct NodeIndex {
    not_ready: RwLock<HashMap<String, String>>,
}

impl NodeIndex {
    /// Take in one watch event; the node whose readiness changed, if any. (A relist keeps what
    /// it had until each node is seen again: a node deleted meanwhile stays "not ready", which
    /// is what its pods are.)
    pub fn apply(&self, event: &watcher::Event<CachedNode>) -> Option<String> {
        let (node, not_ready) = match event {
            watcher::Event::Apply(n) | watcher::Event::InitApply(n) => (n, n.not_ready.clone()),
            watcher::Event::Delete(n) => (n, Some("it was deleted".to_owned())),
            watcher::Event::Init | watcher::Event::InitDone => return None,
        };
        let name = node.metadata.name.clone()?;
        let mut map = self.not_ready.write();
        let before = map.get(&name).cloned();
        match &not_ready {
            Some(why) => map.insert(name.clone(), why.clone()),
            None => map.remove(&name),
        };
        (before.is_some() != not_ready.is_some()).then_some(name)
    }

    /// Why `node` is not ready; `None`: it is (or is unknown).
    pub fn not_ready(&self, node: &str) -> Option<String> {
        self.not_ready.read().get(node).cloned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(ready: &str) -> CachedNode {
        serde_json::from_value(json!({
            "metadata": {"name": "node-a"},
            "status": {
                "images": [{"names": ["busybox"], "sizeBytes": 1}],
                "conditions": [{"type": "Ready", "status": ready, "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.", "lastTransitionTime": "2026-11-28T01:00:00Z"}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn readiness_and_its_changes() {
        let index = NodeIndex::default();
        assert_eq!(index.apply(&watcher::Event::Apply(node("True"))), None, "ready, as assumed");
        assert_eq!(index.apply(&watcher::Event::Apply(node("Unknown"))), Some("node-a".into()));
        assert_eq!(
            index.not_ready("node-a").as_deref(),
            Some(
                "Ready is Unknown since 2026-11-28T01:00:00Z (NodeStatusUnknown: Kubelet stopped posting node status.)"
            )
        );
        assert_eq!(index.apply(&watcher::Event::Apply(node("Unknown"))), None, "no change");
        assert_eq!(index.apply(&watcher::Event::Apply(node("True"))), Some("node-a".into()));
        assert_eq!(index.not_ready("node-a"), None);
    }
}
