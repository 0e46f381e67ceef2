//! The cluster: the control plane, kube-controller-manager and kube-scheduler on the host, the
//! cluster [`Network`], and its nodes ([`ClusterNode`]); started and stopped together, with
//! nodes that a test can kill and start again, and NetworkPolicies enforced on every node once
//! asked ([`Cluster::enforce_network_policies`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Node, NodeCondition, ServiceAccount};
use kube::Api;

use crate::components;
use crate::control_plane::{ControlPlane, HarnessError, Options, io_err, new_run_dir};
use crate::process::ManagedProcess;

use super::assets::{self, NodeAssets};
use super::cgroups;
use super::config::NodeConfig;
use super::footprint::{self, Footprint};
use super::lifecycle;
use super::network::{MAX_NODES, Network};
use super::network_policy;
use super::one_node::{Boot, ClusterNode};

const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long kube-router may take from its start to its first full sync (its informers' caches,
/// then the filter table written whole).
const ENFORCING_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What to start a cluster with.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// How many nodes (1 to [`MAX_NODES`]); the first is `myownshell-node`, node k ≥ 2 is
    /// `myownshell-node-<k>`.
    pub nodes: usize,
    /// OCI archives to import into every node besides the pause and shell images (e.g. the
    /// operator's).
    pub images: Vec<PathBuf>,
    /// More kube-apiserver flags, after the cluster's own (e.g. `--authentication-config` for an
    /// identity provider it trusts, `crate::oidc`).
    pub apiserver_args: Vec<String>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self { nodes: 1, images: Vec::new(), apiserver_args: Vec::new() }
    }
}

/// A running cluster. Dropping it stops everything and waits until the nodes' namespaces, the
/// network's and the nodes' cgroups are gone.
#[derive(Debug)]
pub struct Cluster {
    // Dropped in this order: the components, the nodes (each: its processes, its sandbox, its
    // cgroups), the network (with the host's link), the control plane.
    components: Vec<ManagedProcess>,
    /// Never empty: [`Cluster::start`] refuses zero nodes.
    nodes: Vec<ClusterNode>,
    network: Network,
    control_plane: ControlPlane,
    node_assets: NodeAssets,
    /// Every archive a node imports when it starts: the base images, the options' and those of
    /// [`Cluster::import_image`] since.
    images: Mutex<Vec<PathBuf>>,
    /// kube-router, once [`Cluster::enforce_network_policies`] was called: every node runs it,
    /// and a node that starts again starts it again.
    network_policy: Option<PathBuf>,
    startup: Duration,
}

fn node_count(nodes: usize) -> Result<u8, HarnessError> {
    u8::try_from(nodes)
        .ok()
        .filter(|n| (1..=MAX_NODES).contains(n))
        .ok_or_else(|| HarnessError::Start(format!("a cluster has 1 to {MAX_NODES} nodes, not {nodes}")))
}

fn ready_condition(node: &Node) -> Option<NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready").cloned()
}

impl Cluster {
    /// Start the network, the control plane and the nodes, import the images into every node,
    /// and wait until every node is Ready and the `default` ServiceAccount exists (pods can be
    /// created).
    pub async fn start(options: ClusterOptions) -> Result<Self, HarnessError> {
        let started = Instant::now();
        let nodes = node_count(options.nodes)?;
        let node_assets = assets::locate().map_err(|e| HarnessError::Assets(format!("the node cannot run: {e}")))?;
        let cp_assets = crate::assets::locate().map_err(HarnessError::Assets)?;
        cgroups::sweep_stale();
        let run_dir = new_run_dir()?;
        let network = Network::start(&run_dir.join("network.log"), nodes)?;
        let cp_options = Options {
            address: network.host_ip(),
            service_cidr: network.service_cidr(),
            node: true,
            apiserver_args: lifecycle::apiserver_args(nodes).into_iter().chain(options.apiserver_args).collect(),
        };
        let control_plane = ControlPlane::start_in(cp_assets, cp_options, run_dir.clone()).await?;
        let mut images: Vec<PathBuf> = assets::BASE_IMAGES.iter().map(|i| node_assets.images.join(i)).collect();
        images.extend(options.images);
        let addresses = network.addresses();
        let mut cluster = Self {
            components: Vec::new(),
            nodes: (1..=nodes).map(|n| ClusterNode::new(n, &run_dir, addresses)).collect(),
            network,
            control_plane,
            node_assets,
            images: Mutex::new(images),
            network_policy: None,
            startup: Duration::ZERO,
        };
        cluster.start_components(nodes)?;
        let since = SystemTime::now();
        for index in 0..cluster.nodes.len() {
            cluster.boot(index).await?;
        }
        let names = cluster.node_names();
        cluster.wait_ready(&names, since).await?;
        cluster.startup = started.elapsed();
        Ok(cluster)
    }

    /// kube-controller-manager and kube-scheduler, on the host like the apiserver, each as its
    /// own identity (see [`components`]); the controller-manager with the node-loss settings of
    /// [`lifecycle`].
    fn start_components(&mut self, nodes: u8) -> Result<(), HarnessError> {
        let dir = self.control_plane.layout().dir.clone();
        let cp = &self.control_plane;
        let kcm =
            components::kubeconfig_file(cp, &dir, "kube-controller-manager", components::CONTROLLER_MANAGER_USER, &[])?;
        let scheduler = components::kubeconfig_file(cp, &dir, "kube-scheduler", components::SCHEDULER_USER, &[])?;
        let kcm_args = lifecycle::controller_manager_args(nodes);
        let kcm_spec = components::controller_manager(cp, &self.node_assets.controller_manager, &kcm, &kcm_args)?;
        let scheduler_spec = components::scheduler(
            cp,
            &self.node_assets.scheduler,
            components::SchedulerConnection::Kubeconfig(&scheduler),
        )?;
        for spec in [kcm_spec, scheduler_spec] {
            let name = spec.name.clone();
            self.components.push(ManagedProcess::spawn(spec).map_err(io_err(format!("starting {name}")))?);
        }
        Ok(())
    }

    fn images(&self) -> Vec<PathBuf> {
        self.images.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    async fn boot(&mut self, index: usize) -> Result<(), HarnessError> {
        let images = self.images();
        let boot = Boot {
            control_plane: &self.control_plane,
            network: &self.network,
            assets: &self.node_assets,
            images: &images,
            network_policy: self.network_policy.as_deref(),
        };
        match self.nodes.get_mut(index) {
            Some(node) => node.boot(&boot).await,
            None => Err(HarnessError::Start(format!("no node #{index}"))),
        }
    }

    fn index_of(&self, name: &str) -> Result<usize, String> {
        self.nodes
            .iter()
            .position(|n| n.name() == name)
            .ok_or_else(|| format!("no node {name} in this cluster (nodes: {})", self.node_names().join(", ")))
    }

    /// A process of the cluster that exited, with the tail of its log.
    fn exited(&mut self) -> Option<String> {
        for process in &mut self.components {
            if let Some(status) = process.exit_status() {
                return Some(format!("{} exited ({status}):\n{}", process.name(), process.log_tail(20)));
            }
        }
        self.nodes.iter_mut().find_map(ClusterNode::exited)
    }

    /// Wait until the nodes `names` say Ready with a heartbeat from `since` on (a node that
    /// comes back is not taken for Ready on the word of its previous life), and the `default`
    /// ServiceAccount exists.
    async fn wait_ready(&mut self, names: &[String], since: SystemTime) -> Result<(), HarnessError> {
        let since = since.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let since = i64::try_from(since).unwrap_or(i64::MAX);
        let client = self.control_plane.client()?;
        let api: Api<Node> = Api::all(client.clone());
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(exit) = self.exited() {
                return Err(HarnessError::Start(exit));
            }
            let mut waiting = Vec::new();
            for name in names {
                match api.get_opt(name).await {
                    Ok(Some(node)) => match ready_condition(&node) {
                        Some(c)
                            if c.status == "True"
                                && c.last_heartbeat_time.as_ref().is_some_and(|t| t.0.as_second() >= since) => {}
                        other => waiting.push(format!(
                            "{name} Ready: {:?}",
                            other.map(|c| (c.status, c.reason, c.message, c.last_heartbeat_time))
                        )),
                    },
                    other => waiting.push(format!("{name}: {:?}", other.map(|n| n.is_some()))),
                }
            }
            match accounts.get_opt("default").await {
                Ok(Some(_)) => {}
                other => waiting.push(format!("default ServiceAccount: {:?}", other.map(|a| a.is_some()))),
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let logs = self.log_tails_of(names);
                return Err(HarnessError::Start(format!(
                    "not Ready in {READY_TIMEOUT:?}; last seen: {}\n{}",
                    waiting.join("; "),
                    logs
                )));
            }
            tokio::time::sleep(crate::wait::POLL_INTERVAL).await;
        }
    }

    /// Kill node `name` as a machine losing power (see [`ClusterNode`]): SIGKILL to everything
    /// in its sandbox, its namespaces, link and cgroups gone; no graceful kubelet shutdown. Its
    /// Node object stays and goes NotReady when the node-lifecycle controller notices (see
    /// [`lifecycle`] for how fast).
    pub fn kill_node(&mut self, name: &str) -> Result<(), String> {
        let index = self.index_of(name)?;
        let network = &self.network;
        match self.nodes.get_mut(index) {
            Some(node) => node.kill(network),
            None => Err(format!("no node {name}")),
        }
    }

    /// Start node `name` again after [`Cluster::kill_node`]: a fresh sandbox with the same
    /// name, addresses, pod range and directory; the images imported again; and wait until its
    /// kubelet has re-registered and the node says Ready.
    pub async fn start_node(&mut self, name: &str) -> Result<(), HarnessError> {
        let index = self.index_of(name).map_err(HarnessError::Start)?;
        let since = SystemTime::now();
        self.boot(index).await?;
        let names = [name.to_owned()];
        self.wait_ready(&names, since).await?;
        if self.network_policy.is_some() {
            self.wait_enforcing(&names).await?;
        }
        Ok(())
    }

    /// Enforce NetworkPolicies from now on, as a cluster's network plugin does: kube-router's
    /// network policy controller in every running node (and in each node started again later),
    /// with the read-only RBAC it needs; returns once each has written the node's filter table
    /// whole (see [`network_policy`]). The binary comes from [`network_policy::locate`]. A
    /// second call does nothing.
    pub async fn enforce_network_policies(&mut self) -> Result<(), HarnessError> {
        if self.network_policy.is_some() {
            return Ok(());
        }
        let binary = network_policy::locate().map_err(HarnessError::Assets)?;
        network_policy::install_rbac(&self.control_plane).await?;
        let mut names = Vec::new();
        for node in self.nodes.iter_mut().filter(|n| n.is_running()) {
            node.enforce(&self.control_plane, &self.network, &binary)?;
            names.push(node.name().to_owned());
        }
        self.network_policy = Some(binary);
        self.wait_enforcing(&names).await
    }

    /// Whether [`Cluster::enforce_network_policies`] was called.
    pub fn enforces_network_policies(&self) -> bool {
        self.network_policy.is_some()
    }

    /// The log tails of the nodes named `names`, one after another, for a failure message.
    fn log_tails_of(&self, names: &[String]) -> String {
        let logs: Vec<String> =
            self.nodes.iter().filter(|n| names.iter().any(|m| m == n.name())).map(ClusterNode::log_tails).collect();
        logs.join("\n")
    }

    /// Wait until kube-router has done a full sync in each of the nodes `names`.
    async fn wait_enforcing(&mut self, names: &[String]) -> Result<(), HarnessError> {
        let deadline = Instant::now() + ENFORCING_TIMEOUT;
        loop {
            if let Some(exit) = self.exited() {
                return Err(HarnessError::Start(exit));
            }
            let waiting: Vec<String> = self
                .nodes
                .iter()
                .filter(|n| names.iter().any(|m| m == n.name()))
                .filter_map(|n| n.enforcing().err())
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let logs = self.log_tails_of(names);
                return Err(HarnessError::Start(format!(
                    "NetworkPolicies not enforced in {ENFORCING_TIMEOUT:?}: {}\n{}",
                    waiting.join("; "),
                    logs
                )));
            }
            tokio::time::sleep(crate::wait::POLL_INTERVAL).await;
        }
    }

    /// The control plane (clients, kubectl, kubeconfig).
    pub fn control_plane(&self) -> &ControlPlane {
        &self.control_plane
    }

    /// The cluster network (slot, addresses).
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// The nodes, in order (the first is `myownshell-node`).
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// The nodes' names, in order.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name().to_owned()).collect()
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|n| n.name() == name)
    }

    /// The first node's files and addresses.
    pub fn node_config(&self) -> &NodeConfig {
        // `start` refuses zero nodes.
        self.nodes[0].config()
    }

    /// Process ids of everything the cluster started on the host side (etcd, kube-apiserver,
    /// the components, the network's holder, and each running node's sandbox and the
    /// nsenter parents of its processes).
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = self.control_plane.pids();
        pids.extend(self.components.iter().map(ManagedProcess::pid));
        pids.push(self.network.pid());
        pids.extend(self.nodes.iter().flat_map(ClusterNode::pids));
        pids
    }

    /// What this cluster has on the host now, to check later that none of it is left.
    pub fn footprint(&self) -> Footprint {
        let recorded_at = footprint::ticks_now();
        let network_namespace = std::fs::read_link(format!("/proc/{}/ns/net", self.network.pid()))
            .map(|l| l.to_string_lossy().into_owned())
            .unwrap_or_default();
        let routes = self
            .network
            .addresses()
            .host_routes(self.network.nodes())
            .into_iter()
            .map(|(cidr, _)| cidr.to_string())
            .collect();
        Footprint {
            pids: self.pids(),
            network_namespace,
            link: self.network.link_name(),
            link_index: footprint::link_index(&self.network.link_name()),
            recorded_at,
            routes,
            run_dir: self.control_plane.layout().dir.clone(),
            nodes: self.nodes.iter().filter_map(|n| n.footprint(recorded_at)).collect(),
        }
    }

    /// Import another OCI archive into every running node's containerd; a node that is down
    /// gets it when it starts again.
    pub fn import_image(&self, archive: &Path) -> Result<(), String> {
        {
            let mut images = self.images.lock().unwrap_or_else(PoisonError::into_inner);
            if !images.iter().any(|i| i == archive) {
                images.push(archive.to_owned());
            }
        }
        self.nodes.iter().try_for_each(|node| node.import(archive))
    }

    /// How long [`Cluster::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// One line describing this cluster.
    pub fn summary(&self) -> String {
        let first = self.node_config();
        let nodes = if self.nodes.len() == 1 {
            format!(
                "node {} at {} (pods {}, Services {})",
                first.name,
                first.node_ip,
                first.pod_cidr,
                self.network.service_cidr()
            )
        } else {
            let each: Vec<String> = self
                .nodes
                .iter()
                .map(|n| format!("{} at {} (pods {})", n.name(), n.config().node_ip, n.config().pod_cidr))
                .collect();
            format!(
                "{} nodes: {}; Services {}; {}",
                self.nodes.len(),
                each.join(", "),
                self.network.service_cidr(),
                lifecycle::describe(self.network.nodes())
            )
        };
        let policies = if self.network_policy.is_some() {
            format!("; NetworkPolicies enforced by kube-router {}", network_policy::VERSION)
        } else {
            String::new()
        };
        format!(
            "cluster ready in {:.1?}: {nodes}, kube-apiserver at {}{policies}; logs in {}",
            self.startup,
            self.control_plane.url(),
            self.control_plane.layout().dir.display()
        )
    }

    /// Stop everything, and report anything that would be left behind.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop_all()
    }

    /// [`Self::stop`], for it and for a drop: the nodes' images are removed either way.
    fn stop_all(&mut self) -> Result<(), String> {
        for process in &mut self.components {
            let _ = process.stop(STOP_GRACE);
        }
        let mut errors = Vec::new();
        for node in &mut self.nodes {
            if let Err(e) = node.stop(&self.network).and_then(|()| node.discard_images()) {
                errors.push(e);
            }
        }
        if let Err(e) = self.network.stop() {
            errors.push(e);
        }
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // After a `stop` this finds everything stopped already and does nothing more.
        let _ = self.stop_all();
    }
}
