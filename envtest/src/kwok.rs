//! A cluster of fake nodes for benchmarks at scale: a fresh control plane, kube-controller-manager
//! and kube-scheduler (the same way as the real node's, see [`crate::components`], with client
//! rate limits raised so they are not the bottleneck), and kwok (sigs.k8s.io/kwok) as a plain
//! process playing the kubelet of N fake Nodes. Deployments get pods that are scheduled, become
//! Running and Ready, and go away when deleted, with no kubelet or container anywhere.
//!
//! kwok is configured only by the file `cargo xtask kwok` writes next to the binary: the
//! node-initialize stage (a fake node turns Ready once), pod-ready and pod-delete, and no
//! heartbeat stage and no node Leases. Nothing runs the node-lifecycle controller either, so a
//! node never goes NotReady: the cheapest setup, for load that is about pods, not node health.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::assets::{cache_root, is_executable};
use crate::components::{self, SchedulerConnection};
use crate::control_plane::{ControlPlane, HarnessError, io_err};
use crate::process::{ManagedProcess, ProcessSpec, is_alive};
use crate::wait::eventually;

/// The kwok release built and run (`cargo xtask kwok`).
pub const KWOK_VERSION: &str = "v0.8.0";
/// A directory holding [`KWOK_BINARY`] and [`KWOK_CONFIG`], instead of [`cache_dir`].
pub const KWOK_ENV: &str = "MYOWNSHELL_KWOK";
/// File name of the kwok binary.
pub const KWOK_BINARY: &str = "kwok";
/// File name of kwok's configuration (its stages and options), written with the binary.
pub const KWOK_CONFIG: &str = "kwok-config.yaml";
/// The annotation that makes a Node kwok's (`--manage-nodes-with-annotation-selector`); any
/// other node, such as a real one, is left alone.
pub const NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");
/// The label every fake node carries, to select or pin pods to them.
pub const NODE_LABEL: (&str, &str) = ("type", "kwok");
/// The Kubernetes binaries a kwok cluster runs besides the control plane.
pub const KUBE_BINARIES: [&str; 2] = ["kube-controller-manager", "kube-scheduler"];

/// Only what a Deployment of pods needs: Deployments, ReplicaSets, cascading and namespace
/// deletion, ServiceAccounts; and a claim's binding to a volume made for it, with the
/// protection that keeps either until unused (the controller bench's `--homes` plays the
/// provisioner). No node-lifecycle controller: with no heartbeats it would mark every fake node
/// unreachable after its grace period.
const CONTROLLERS: &str = "deployment-controller,replicaset-controller,garbage-collector-controller,\
namespace-controller,serviceaccount-controller,serviceaccount-token-controller,\
persistentvolume-binder-controller,persistentvolume-protection-controller,\
persistentvolumeclaim-protection-controller";
/// Client rate limits as kwokctl sets them: at the defaults (20 QPS for the controller-manager,
/// 50 for the scheduler) thousands of pods take many minutes for the limiter alone.
const API_QPS: u32 = 5000;
const API_BURST: u32 = 10000;
/// Deployments and ReplicaSets synced at once (default 5 each).
const CONCURRENT_SYNCS: u32 = 20;
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// `~/.cache/myownshell/kwok/<version>/`, where `cargo xtask kwok` builds kwok and writes its
/// configuration.
pub fn cache_dir() -> PathBuf {
    cache_root().join("kwok").join(KWOK_VERSION)
}

/// The directory kwok is taken from: [`KWOK_ENV`] if set, else [`cache_dir`].
pub fn kwok_dir() -> PathBuf {
    std::env::var_os(KWOK_ENV).filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(cache_dir)
}

/// A Kubernetes component binary: next to the kube-apiserver in use, else in the envtest cache
/// (where `cargo xtask kwok` builds it).
pub fn kube_binary(name: &str) -> Result<PathBuf, String> {
    let beside_apiserver =
        crate::assets::locate().ok().and_then(|a| a.kube_apiserver.parent().map(|dir| dir.join(name)));
    let cached = crate::assets::cache_dir().join(name);
    beside_apiserver.into_iter().chain([cached.clone()]).find(|p| is_executable(p)).ok_or_else(|| {
        format!(
            "{name} not found next to kube-apiserver or at {}; run `cargo xtask kwok` to build it",
            cached.display()
        )
    })
}

/// Everything a kwok cluster runs besides the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KwokAssets {
    /// The kwok binary.
    pub kwok: PathBuf,
    /// kwok's configuration (stages and options).
    pub config: PathBuf,
    /// kube-controller-manager.
    pub controller_manager: PathBuf,
    /// kube-scheduler.
    pub scheduler: PathBuf,
}

/// Find kwok, its configuration and the two components, or say what is missing and how to get it.
pub fn locate() -> Result<KwokAssets, String> {
    let dir = kwok_dir();
    let (kwok, config) = (dir.join(KWOK_BINARY), dir.join(KWOK_CONFIG));
    if !is_executable(&kwok) || !config.is_file() {
        return Err(format!(
            "kwok {KWOK_VERSION} or its {KWOK_CONFIG} not found in {} (from {}); run `cargo xtask kwok` \
             to build them, or set {KWOK_ENV} to a directory holding both",
            dir.display(),
            if std::env::var_os(KWOK_ENV).is_some_and(|v| !v.is_empty()) { KWOK_ENV } else { "the kwok cache" },
        ));
    }
    let [controller_manager, scheduler] = KUBE_BINARIES.map(kube_binary);
    Ok(KwokAssets { kwok, config, controller_manager: controller_manager?, scheduler: scheduler? })
}

/// What to start a kwok cluster with.
#[derive(Debug, Clone)]
pub struct KwokOptions {
    /// Fake nodes, named `kwok-node-<i>`.
    pub nodes: usize,
    /// Pods each node takes (its `pods` capacity); the scheduler leaves the rest Pending.
    pub pods_per_node: u32,
    /// The binaries and kwok's configuration.
    pub assets: KwokAssets,
}

impl KwokOptions {
    /// `nodes` fake nodes of `pods_per_node` pods each, with the binaries [`locate`] finds.
    pub fn new(nodes: usize, pods_per_node: u32) -> Result<Self, HarnessError> {
        Ok(Self { nodes, pods_per_node, assets: locate().map_err(HarnessError::Assets)? })
    }
}

/// A running kwok cluster. Dropping it kills every process it started.
#[derive(Debug)]
pub struct KwokCluster {
    // Dropped first: the components, then the control plane they talk to.
    components: Vec<ManagedProcess>,
    control_plane: ControlPlane,
    nodes: Vec<String>,
    startup: Duration,
}

/// The name of fake node `i`.
pub fn node_name(i: usize) -> String {
    format!("kwok-node-{i}")
}

/// A fake node as kwok's docs describe it, without their taint: the cluster has only fake nodes,
/// so pods need no toleration and the operator's pod template stays as it is. The capacity is
/// set here because kwok's node-initialize stage keeps a capacity that is there.
fn fake_node(name: &str, pods_per_node: u32) -> Result<Node, HarnessError> {
    let resources = serde_json::json!({
        "cpu": "1000", "memory": "4Ti", "ephemeral-storage": "4Ti", "pods": pods_per_node.to_string(),
    });
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": { NODE_ANNOTATION.0: NODE_ANNOTATION.1, "node.alpha.kubernetes.io/ttl": "0" },
            "labels": {
                NODE_LABEL.0: NODE_LABEL.1,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "status": { "capacity": resources, "allocatable": resources },
    }))
    .map_err(|e| HarnessError::Start(format!("building node {name}: {e}")))
}

/// kube-scheduler's configuration: the flags for the client's rate are ignored once a file is given.
fn scheduler_config(kubeconfig: &Path) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         clientConnection:\n  kubeconfig: {}\n  qps: {API_QPS}\n  burst: {API_BURST}\n\
         leaderElection:\n  leaderElect: false\n",
        serde_json::Value::String(kubeconfig.display().to_string())
    )
}

impl KwokCluster {
    /// Start a control plane, the components and kwok, create the fake nodes, and wait until
    /// every node is Ready and schedulable and the controller-manager is working (it has made
    /// the `default` ServiceAccount).
    pub async fn start(options: KwokOptions) -> Result<Self, HarnessError> {
        let started = Instant::now();
        let control_plane = ControlPlane::start().await?;
        let mut cluster = Self { components: Vec::new(), control_plane, nodes: Vec::new(), startup: Duration::ZERO };
        cluster.start_processes(&options.assets)?;
        cluster.create_nodes(options.nodes, options.pods_per_node).await?;
        cluster.wait_ready().await?;
        cluster.startup = started.elapsed();
        Ok(cluster)
    }

    fn start_processes(&mut self, assets: &KwokAssets) -> Result<(), HarnessError> {
        let cp = &self.control_plane;
        let dir = cp.layout().dir.join("kwok");
        let kcm =
            components::kubeconfig_file(cp, &dir, "kube-controller-manager", components::CONTROLLER_MANAGER_USER, &[])?;
        let scheduler = components::kubeconfig_file(cp, &dir, "kube-scheduler", components::SCHEDULER_USER, &[])?;
        let scheduler_config_path = dir.join("kube-scheduler.yaml");
        std::fs::write(&scheduler_config_path, scheduler_config(&scheduler))
            .map_err(io_err(format!("writing {}", scheduler_config_path.display())))?;
        let kcm_flags = [
            format!("--controllers={CONTROLLERS}"),
            format!("--kube-api-qps={API_QPS}"),
            format!("--kube-api-burst={API_BURST}"),
            format!("--concurrent-deployment-syncs={CONCURRENT_SYNCS}"),
            format!("--concurrent-replicaset-syncs={CONCURRENT_SYNCS}"),
        ];
        let connection = SchedulerConnection::Config { config: &scheduler_config_path, kubeconfig: &scheduler };
        // kwok as the admin: it writes the status of any pod on its nodes and deletes them. No
        // `--node-port`/`--server-address`: no logs/exec server to run. Warnings and errors
        // only: at INFO it logs a line for every pod it patches and every pod it deletes.
        let kwok = ProcessSpec::new("kwok", &assets.kwok, cp.layout().dir.join("kwok.log")).args([
            format!("--kubeconfig={}", cp.kubeconfig_path().display()),
            format!("--config={}", assets.config.display()),
            format!("--manage-nodes-with-annotation-selector={}={}", NODE_ANNOTATION.0, NODE_ANNOTATION.1),
            "--v=WARN".into(),
        ]);
        let specs = [
            components::controller_manager(cp, &assets.controller_manager, &kcm, &kcm_flags)?,
            components::scheduler(cp, &assets.scheduler, connection)?,
            kwok,
        ];
        for spec in specs {
            let name = spec.name.clone();
            self.components.push(ManagedProcess::spawn(spec).map_err(io_err(format!("starting {name}")))?);
        }
        Ok(())
    }

    async fn create_nodes(&mut self, count: usize, pods_per_node: u32) -> Result<(), HarnessError> {
        let api: Api<Node> = Api::all(self.control_plane.client()?);
        for i in 0..count {
            let name = node_name(i);
            api.create(&PostParams::default(), &fake_node(&name, pods_per_node)?).await?;
            self.nodes.push(name);
        }
        Ok(())
    }

    /// The first component that is not running any more, with the end of its log.
    fn exited(&self) -> Option<String> {
        self.components.iter().find(|p| !is_alive(p.pid())).map(|p| format!("{} exited:\n{}", p.name(), p.log_tail(20)))
    }

    /// Every node Ready (kwok's node-initialize stage) and untainted. The apiserver's
    /// TaintNodesByCondition admission taints each new node `not-ready:NoSchedule`; the
    /// node-lifecycle controller, which would lift it, does not run here, so the harness lifts it
    /// once kwok has made the node Ready.
    async fn wait_ready(&self) -> Result<(), HarnessError> {
        let client = self.control_plane.client()?;
        let nodes: Api<Node> = Api::all(client.clone());
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let selector = ListParams::default().labels(&format!("{}={}", NODE_LABEL.0, NODE_LABEL.1));
        let untaint = Patch::Merge(serde_json::json!({ "spec": { "taints": null } }));
        let result = eventually("the fake nodes Ready and the controller-manager working", READY_TIMEOUT, || async {
            if let Some(exit) = self.exited() {
                return Ok(Err(exit));
            }
            let listed = nodes.list(&selector).await.map_err(|e| e.to_string())?;
            let mut waiting = self.nodes.len().saturating_sub(listed.items.len());
            for node in listed {
                let name = node.metadata.name.clone().unwrap_or_default();
                let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| !t.is_empty());
                match (is_ready(&node), tainted) {
                    (true, false) => {}
                    (true, true) => {
                        nodes.patch(&name, &PatchParams::default(), &untaint).await.map_err(|e| e.to_string())?;
                        waiting += 1;
                    }
                    (false, _) => waiting += 1,
                }
            }
            let account = accounts.get_opt("default").await.map_err(|e| e.to_string())?.is_some();
            if waiting == 0 && account {
                Ok(Ok(()))
            } else {
                Err(format!(
                    "{waiting} of {} nodes not Ready and untainted; default ServiceAccount: {account}",
                    self.nodes.len()
                ))
            }
        })
        .await;
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) | Err(e) => Err(HarnessError::Start(format!(
                "{e}\n--- kwok ---\n{}\n--- kube-controller-manager ---\n{}",
                crate::process::log_tail(&self.control_plane.layout().dir.join("kwok.log"), 15),
                crate::process::log_tail(&self.control_plane.layout().dir.join("kube-controller-manager.log"), 10),
            ))),
        }
    }

    /// The control plane (clients, kubectl, kubeconfig).
    pub fn control_plane(&self) -> &ControlPlane {
        &self.control_plane
    }

    /// The fake nodes' names.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Name and process id of kube-controller-manager, kube-scheduler and kwok, e.g. to read
    /// their CPU time ([`crate::process::cpu_time`]); etcd's and kube-apiserver's are
    /// [`ControlPlane::pids`].
    pub fn pids(&self) -> Vec<(&str, u32)> {
        self.components.iter().map(|p| (p.name(), p.pid())).collect()
    }

    /// How long [`KwokCluster::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// One line describing this cluster.
    pub fn summary(&self) -> String {
        format!(
            "kwok cluster ready in {:.1?}: {} fake nodes, kube-apiserver at {}; logs in {}",
            self.startup,
            self.nodes.len(),
            self.control_plane.url(),
            self.control_plane.layout().dir.display()
        )
    }

    /// Stop the components (SIGTERM, then SIGKILL), then the control plane.
    pub fn stop(mut self) -> Result<(), String> {
        let mut errors = Vec::new();
        for mut process in self.components.drain(..) {
            if let Err(e) = process.stop(STOP_GRACE) {
                errors.push(format!("stopping {}: {e}", process.name()));
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
    }
}

fn is_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fake_node_is_kwoks_untainted_and_sized() {
        let node = fake_node("kwok-node-3", 110).unwrap();
        let annotations = node.metadata.annotations.unwrap();
        assert_eq!(annotations.get(NODE_ANNOTATION.0).map(String::as_str), Some(NODE_ANNOTATION.1));
        assert_eq!(node.metadata.labels.unwrap().get(NODE_LABEL.0).map(String::as_str), Some(NODE_LABEL.1));
        assert!(node.spec.is_none_or(|s| s.taints.is_none()));
        let status = node.status.unwrap();
        assert_eq!(status.capacity.unwrap()["pods"].0, "110");
        assert_eq!(status.allocatable.unwrap()["cpu"].0, "1000");
    }

    #[test]
    fn the_scheduler_config_names_the_kubeconfig_and_the_rates() {
        let config = scheduler_config(Path::new("/run/kube scheduler.kubeconfig"));
        assert!(config.contains("kubeconfig: \"/run/kube scheduler.kubeconfig\"\n"), "{config}");
        assert!(config.contains("qps: 5000\n  burst: 10000\n"), "{config}");
        assert!(config.contains("leaderElect: false"), "{config}");
    }
}
