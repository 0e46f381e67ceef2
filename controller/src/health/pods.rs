//! The shells' pods, as far as their health goes ([`PodHealth`]), by shell ([`PodIndex`]).
//!
//! Each pod is read straight from the watch's JSON into what the diagnosis needs (its node, its
//! scheduling verdict, its containers' states), never into a typed `Pod`: serde skips the rest
//! of the object unread. About 300 bytes a pod stay in memory. Only pods carrying the shells'
//! managed-by label are watched. A pod is the shell's whose Deployment made it: its ReplicaSet
//! (its controller) is named `<shell>-<pod-template-hash>`.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use myownshell_api::MyOwnShell;
use parking_lot::RwLock;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

use crate::health::diagnose::{self, ContainerHealth, Ended, PodHealth};
use crate::resource_as::identity;

/// A shell's pod as the watch keeps it: its identity, the shell it belongs to, its health.
#[derive(Clone, Debug)]
pub struct CachedPod {
    metadata: ObjectMeta,
    /// The shell whose Deployment made it (`None`: none can be told).
    pub shell: Option<String>,
    /// What its status says.
    pub health: PodHealth,
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
    owner_references: Vec<OwnerWire>,
    #[serde(default)]
    deletion_timestamp: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct OwnerWire {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    controller: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SpecWire {
    #[serde(default)]
    node_name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StatusWire {
    #[serde(default)]
    conditions: Vec<ConditionWire>,
    #[serde(default)]
    init_container_statuses: Vec<ContainerWire>,
    #[serde(default)]
    container_statuses: Vec<ContainerWire>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ConditionWire {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ContainerWire {
    #[serde(default)]
    name: String,
    #[serde(default)]
    restart_count: i32,
    #[serde(default)]
    state: StateWire,
    #[serde(default)]
    last_state: StateWire,
}

#[derive(Deserialize, Default)]
struct StateWire {
    #[serde(default)]
    waiting: Option<WaitingWire>,
    #[serde(default)]
    terminated: Option<TerminatedWire>,
}

#[derive(Deserialize, Default)]
struct WaitingWire {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TerminatedWire {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    exit_code: i32,
    #[serde(default)]
    finished_at: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl TerminatedWire {
    fn ended(self) -> Ended {
        Ended {
            reason: self.reason.unwrap_or_default(),
            exit_code: self.exit_code,
            finished_at: self.finished_at.and_then(|t| t.parse::<Timestamp>().ok()),
            message: self.message.unwrap_or_default(),
        }
    }
}

impl ContainerWire {
    fn health(self) -> ContainerHealth {
        ContainerHealth {
            name: self.name,
            restarts: self.restart_count,
            waiting: self.state.waiting.map(|w| (w.reason.unwrap_or_default(), w.message.unwrap_or_default())),
            terminated: self.state.terminated.map(TerminatedWire::ended),
            last_terminated: self.last_state.terminated.map(TerminatedWire::ended),
        }
    }
}

/// The shell a pod belongs to: its controller is ReplicaSet `<shell>-<pod-template-hash>`.
fn shell_of(meta: &MetaWire) -> Option<String> {
    let hash = meta.labels.get("pod-template-hash")?;
    let owner = meta.owner_references.iter().find(|o| o.controller == Some(true) && o.kind == "ReplicaSet")?;
    owner.name.strip_suffix(hash.as_str())?.strip_suffix('-').map(str::to_owned)
}

impl From<Wire> for CachedPod {
    fn from(wire: Wire) -> Self {
        let shell = shell_of(&wire.metadata);
        let m = wire.metadata;
        let unschedulable = wire
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
            .map(|c| c.message.clone().unwrap_or_default());
        let containers = wire.status.init_container_statuses.into_iter().chain(wire.status.container_statuses);
        let health = PodHealth {
            name: m.name.clone().unwrap_or_default(),
            node: wire.spec.node_name,
            deleting: m.deletion_timestamp.is_some(),
            unschedulable,
            containers: containers.map(ContainerWire::health).collect(),
        };
        let metadata = identity(m.name, m.namespace, m.uid, m.resource_version);
        Self { metadata, shell, health }
    }
}

impl<'de> Deserialize<'de> for CachedPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Wire::deserialize(deserializer).map(Self::from)
    }
}

crate::resource_as::resource_as!(CachedPod, k8s_openapi::api::core::v1::Pod);

/// A shell, by namespace and name.
type Shell = (String, String);

/// Every shell pod's health, by shell.
#[derive(Default)]
pub struct PodIndex {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    pods: HashMap<Shell, ShellPods>,
    /// A relist being gathered; it replaces `pods` whole at its end.
    relist: Option<HashMap<Shell, ShellPods>>,
}

/// One shell's pods, sorted by name (a shell has `size` pods, at most 50, mostly one or two).
/// A sorted `Vec`, not a `BTreeMap`: a map of one pod allocates a whole node of eleven slots
/// (about 1.4 KB), the `Vec` one slot (about 100 bytes); at 10,000 shells, 13 MiB of RSS.
type ShellPods = Vec<PodHealth>;

/// Where pod `name` is in `pods`, or where it would go.
fn position(pods: &ShellPods, name: &str) -> Result<usize, usize> {
    pods.binary_search_by(|p| p.name.as_str().cmp(name))
}

fn find<'a>(pods: &'a ShellPods, name: &str) -> Option<&'a PodHealth> {
    position(pods, name).ok().map(|i| &pods[i])
}

fn key(pod: &CachedPod) -> Option<(Shell, String)> {
    let (namespace, name) = (pod.metadata.namespace.clone()?, pod.metadata.name.clone()?);
    Some(((namespace, pod.shell.clone()?), name))
}

/// Store `pod`; whether what is wrong with it changed ([`diagnose::problem`]; a pod not seen
/// before had nothing wrong).
fn put(map: &mut HashMap<Shell, ShellPods>, pod: &CachedPod, now: Timestamp) -> bool {
    // `key` has the pod's name too; `health.name` is the same name, the one the list sorts by.
    let Some((shell, _)) = key(pod) else { return false };
    let pods = map.entry(shell).or_default();
    let health = pod.health.clone();
    let before = match position(pods, &health.name) {
        Ok(i) => Some(std::mem::replace(&mut pods[i], health)),
        Err(i) => {
            // Exactly one more slot: a plain push reserves four at first, and most shells keep one.
            pods.reserve_exact(1);
            pods.insert(i, health);
            None
        }
    };
    before.and_then(|b| diagnose::problem(&b, now)) != diagnose::problem(&pod.health, now)
}

/// Remove the pod `shell`/`name`; whether it had a problem (its shell may now be well).
fn remove(map: &mut HashMap<Shell, ShellPods>, shell: &Shell, name: &str, now: Timestamp) -> bool {
    let Some(pods) = map.get_mut(shell) else { return false };
    let removed = position(pods, name).ok().map(|i| pods.remove(i));
    let had_problem = removed.is_some_and(|p| diagnose::problem(&p, now).is_some());
    if pods.is_empty() {
        map.remove(shell);
    }
    had_problem
}

fn shell_ref((namespace, name): &Shell) -> ObjectRef<MyOwnShell> {
    ObjectRef::new(name).within(namespace)
}

impl PodIndex {
    /// Take in one watch event; the shells to reconcile: those whose pods' problems changed. A
    /// healthy pod's status changes (created, started, ready) reconcile nothing: the Deployment's
    /// status tells those. A relist reconciles only the shells whose pods it finds changed.
    pub fn apply(&self, event: &watcher::Event<CachedPod>) -> Vec<ObjectRef<MyOwnShell>> {
        let now = Timestamp::now();
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        match event {
            watcher::Event::Init => {
                inner.relist = Some(HashMap::new());
                Vec::new()
            }
            watcher::Event::InitApply(pod) => {
                let Some(relist) = inner.relist.as_mut() else { return Vec::new() };
                put(relist, pod, now);
                let Some((shell, name)) = key(pod) else { return Vec::new() };
                let before = inner.pods.get(&shell).and_then(|pods| find(pods, &name));
                let changed = before.and_then(|b| diagnose::problem(b, now)) != diagnose::problem(&pod.health, now);
                changed.then(|| shell_ref(&shell)).into_iter().collect()
            }
            watcher::Event::InitDone => {
                let Some(relist) = inner.relist.take() else { return Vec::new() };
                // Pods gone while the watch was away: their shells look again if they had a problem.
                let gone = inner
                    .pods
                    .iter()
                    .filter(|(shell, pods)| {
                        pods.iter().any(|p| {
                            diagnose::problem(p, now).is_some()
                                && relist.get(*shell).is_none_or(|now_there| find(now_there, &p.name).is_none())
                        })
                    })
                    .map(|(shell, _)| shell_ref(shell))
                    .collect();
                inner.pods = relist;
                gone
            }
            watcher::Event::Apply(pod) => {
                let changed = put(&mut inner.pods, pod, now);
                changed.then(|| key(pod).map(|(shell, _)| shell_ref(&shell))).flatten().into_iter().collect()
            }
            watcher::Event::Delete(pod) => {
                let Some((shell, name)) = key(pod) else { return Vec::new() };
                remove(&mut inner.pods, &shell, &name, now).then(|| shell_ref(&shell)).into_iter().collect()
            }
        }
    }

    /// The health of shell `namespace/name`'s pods.
    pub fn of(&self, namespace: &str, name: &str) -> Vec<PodHealth> {
        let inner = self.inner.read();
        inner.pods.get(&(namespace.to_owned(), name.to_owned())).cloned().unwrap_or_default()
    }

    /// The shells with a pod on `node`.
    pub fn shells_on(&self, node: &str) -> Vec<ObjectRef<MyOwnShell>> {
        let inner = self.inner.read();
        inner
            .pods
            .iter()
            .filter(|(_, pods)| pods.iter().any(|p| p.node.as_deref() == Some(node)))
            .map(|((ns, shell), _)| ObjectRef::new(shell).within(ns))
            .collect()
    }

    /// How many pods it holds.
    pub fn len(&self) -> usize {
        self.inner.read().pods.values().map(Vec::len).sum()
    }

    /// Whether it holds no pod.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, waiting: Option<&str>) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "namespace": "team", "uid": "u1", "resourceVersion": "7",
                "labels": {"app.kubernetes.io/instance": "web", "pod-template-hash": "7d9f8c6b4"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-db-7d9f8c6b4", "uid": "rs", "controller": true}],
                "managedFields": [{"manager": "kube-controller-manager"}],
                "annotations": {"big": "x".repeat(1000)}
            },
            "spec": {"nodeName": "node-a", "containers": [{"name": "shell", "image": "busybox"}]},
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{
                    "name": "shell", "ready": false, "restartCount": 2, "image": "busybox", "imageID": "",
                    "state": waiting.map_or(json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}), |w| json!({"waiting": {"reason": w, "message": "why"}})),
                    "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-01-01T00:00:00Z"}}
                }]
            }
        })
    }

    #[test]
    fn a_pod_is_read_into_its_health_and_its_shell() {
        let cached: CachedPod =
            serde_json::from_value(pod("web-db-7d9f8c6b4-x2x4z", Some("ImagePullBackOff"))).unwrap();
        assert_eq!(cached.shell.as_deref(), Some("web-db"), "the ReplicaSet's name less the template hash");
        assert_eq!(cached.metadata.resource_version.as_deref(), Some("7"));
        let c = &cached.health.containers[0];
        assert_eq!(c.waiting, Some(("ImagePullBackOff".into(), "why".into())));
        assert_eq!(
            (c.restarts, c.last_terminated.as_ref().map(|e| (e.reason.as_str(), e.exit_code))),
            (2, Some(("OOMKilled", 137)))
        );
        assert_eq!(cached.health.node.as_deref(), Some("node-a"));
        let mut orphan = pod("lost", None);
        orphan["metadata"]["ownerReferences"] = json!([]);
        assert_eq!(serde_json::from_value::<CachedPod>(orphan).unwrap().shell, None);
    }

    #[test]
    fn the_index_follows_the_watch_and_tells_only_changes() {
        let index = PodIndex::default();
        let read = |v| serde_json::from_value::<CachedPod>(v).unwrap();
        let web = ObjectRef::<MyOwnShell>::new("web-db").within("team");
        index.apply(&watcher::Event::Init);
        assert!(index.apply(&watcher::Event::InitApply(read(pod("p1", None)))).is_empty(), "a healthy pod");
        assert_eq!(index.apply(&watcher::Event::InitApply(read(pod("p2", Some("ErrImagePull"))))), vec![web.clone()]);
        index.apply(&watcher::Event::InitDone);
        assert_eq!(index.of("team", "web-db").len(), 2);
        assert!(index.apply(&watcher::Event::Apply(read(pod("p1", None)))).is_empty(), "nothing new");
        assert_eq!(index.apply(&watcher::Event::Apply(read(pod("p1", Some("CrashLoopBackOff"))))), vec![web.clone()]);
        assert_eq!(
            index.apply(&watcher::Event::Apply(read(pod("p1", Some("CrashLoopBackOff"))))),
            vec![],
            "the same problem"
        );
        assert_eq!(index.shells_on("node-a"), vec![web.clone()]);
        assert_eq!(
            index.apply(&watcher::Event::Delete(read(pod("p1", None)))),
            vec![web.clone()],
            "a failing pod went"
        );

        // A relist that no longer finds the failing pod p2 tells its shell; one that finds the
        // same pods reconciles nothing.
        index.apply(&watcher::Event::Init);
        assert!(index.apply(&watcher::Event::InitApply(read(pod("p3", None)))).is_empty());
        assert_eq!(index.apply(&watcher::Event::InitDone), vec![web.clone()]);
        index.apply(&watcher::Event::Init);
        assert!(index.apply(&watcher::Event::InitApply(read(pod("p3", None)))).is_empty());
        assert!(index.apply(&watcher::Event::InitDone).is_empty());
        assert_eq!(index.len(), 1);
        assert!(index.apply(&watcher::Event::Delete(read(pod("p3", None)))).is_empty(), "a healthy pod went");
        assert!(index.is_empty());
    }

    #[test]
    fn a_shells_pods_are_kept_by_name_once_each() {
        let index = PodIndex::default();
        let read = |v| serde_json::from_value::<CachedPod>(v).unwrap();
        for name in ["p3", "p1", "p2", "p1"] {
            index.apply(&watcher::Event::Apply(read(pod(name, None))));
        }
        let names = |index: &PodIndex| index.of("team", "web-db").into_iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names(&index), ["p1", "p2", "p3"], "sorted, the second p1 replaced the first");
        index.apply(&watcher::Event::Delete(read(pod("p2", None))));
        index.apply(&watcher::Event::Delete(read(pod("p9", None))));
        assert_eq!(names(&index), ["p1", "p3"]);
    }
}
