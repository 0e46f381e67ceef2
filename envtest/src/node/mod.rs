//! A real single-node cluster, started and torn down by the harness like the control plane:
//! containerd, kubelet and kube-proxy in a [`sandbox`] of their own namespaces,
//! kube-controller-manager and kube-scheduler beside the apiserver, all on the harness's PKI.
//! Pods run for real: images come from [`images`], never from a registry.
//!
//! How traffic flows. The host and the node are joined by one veth link; kube-apiserver binds
//! to the host's end, so kubelet and pods reach it, and the host routes the pod and Service
//! ranges to the node. kube-proxy (iptables mode) runs inside the node, where the pods are:
//! ClusterIPs work for pods (`kubernetes.default`, the metrics Services). The apiserver calls
//! webhooks at their endpoints (`--enable-aggregator-routing`) rather than through a ClusterIP:
//! it sits outside the node's namespace, like a control plane on its own machine, and endpoint
//! routing needs no kube-proxy on the apiserver's side, so an admission call does not depend on
//! a second packet path that nothing else exercises.

pub mod assets;
pub mod cgroups;
pub mod config;
pub mod footprint;
pub mod images;
pub mod sandbox;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::Api;
use myownshell_certs::pki::LeafSpec;

use crate::components;
use crate::control_plane::{ControlPlane, HarnessError, Options, io_err, new_run_dir};
use crate::process::{ManagedProcess, ProcessSpec};
use crate::wait::eventually;
use config::{NODE_NAME, NodeConfig};

const CERT_VALIDITY: Duration = Duration::from_secs(7 * 86_400);
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const SOCKET_TIMEOUT: Duration = Duration::from_secs(20);

/// What to start a cluster with.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// OCI archives to import besides the pause and shell images (e.g. the operator's).
    pub images: Vec<PathBuf>,
}

/// A running cluster with one node. Dropping it stops everything and waits until the node's
/// namespaces and cgroups are gone.
#[derive(Debug)]
pub struct Cluster {
    // Dropped in this order: the components, the node's processes, the sandbox (whose end kills
    // anything left in it), the control plane, the cgroups.
    components: Vec<ManagedProcess>,
    node_processes: Vec<ManagedProcess>,
    sandbox: sandbox::Sandbox,
    control_plane: ControlPlane,
    cgroups: cgroups::CgroupRoot,
    config: NodeConfig,
    startup: Duration,
}

fn write(path: &Path, contents: &str) -> Result<(), HarnessError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
    }
    std::fs::write(path, contents).map_err(io_err(format!("writing {}", path.display())))
}

impl Cluster {
    /// Start the control plane and the node, import the images, and wait until the node is
    /// Ready and the `default` ServiceAccount exists (pods can be created).
    pub async fn start(options: ClusterOptions) -> Result<Self, HarnessError> {
        let started = Instant::now();
        let node_assets = assets::locate().map_err(|e| HarnessError::Assets(format!("the node cannot run: {e}")))?;
        let cp_assets = crate::assets::locate().map_err(HarnessError::Assets)?;
        cgroups::sweep_stale();
        let run_dir = new_run_dir()?;
        let run_name = run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let node_dir = run_dir.join("node");
        std::fs::create_dir_all(&node_dir).map_err(io_err("creating the node directory"))?;

        let sandbox = sandbox::Sandbox::start(&node_dir)?;
        let cp_options = Options { address: sandbox.host_ip(), service_cidr: sandbox.service_cidr(), node: true };
        let control_plane = ControlPlane::start_in(cp_assets, cp_options, run_dir).await?;
        let cgroups = cgroups::CgroupRoot::create(&run_name).map_err(HarnessError::Start)?;
        let config = NodeConfig {
            dir: node_dir.clone(),
            node_ip: sandbox.node_ip(),
            pod_cidr: sandbox.pod_cidr(),
            cgroup_root: cgroups.kubelet_path(),
            cni_bin_dir: PathBuf::from(assets::CNI_BIN_DIR),
        };
        let mut cluster = Self {
            components: Vec::new(),
            node_processes: Vec::new(),
            sandbox,
            control_plane,
            cgroups,
            config,
            startup: Duration::ZERO,
        };
        cluster.write_files()?;
        cluster.start_components(&node_assets)?;
        cluster.start_containerd().await?;
        let mut archives: Vec<PathBuf> = assets::BASE_IMAGES.iter().map(|i| node_assets.images.join(i)).collect();
        archives.extend(options.images);
        for archive in &archives {
            images::import(&cluster.config.containerd_socket(), archive)
                .map_err(|e| HarnessError::Start(format!("importing {}: {e}", archive.display())))?;
        }
        cluster.start_node_agents(&node_assets)?;
        cluster.wait_ready().await?;
        cluster.startup = started.elapsed();
        Ok(cluster)
    }

    fn kubeconfig_file(&self, name: &str, user: &str, groups: &[&str]) -> Result<PathBuf, HarnessError> {
        components::kubeconfig_file(&self.control_plane, &self.config.dir, name, user, groups)
    }

    fn write_files(&self) -> Result<(), HarnessError> {
        let cfg = &self.config;
        let pki = self.control_plane.pki_dir();
        write(&cfg.containerd_config(), &config::containerd_toml(cfg))?;
        write(&cfg.cni_conf_dir().join("10-myownshell.conflist"), &config::cni_conflist(cfg))?;
        write(&cfg.kubelet_config(), &config::kubelet_config(cfg, &pki.join("client-ca.crt")))?;
        let serving = self.control_plane.serving_ca().issue(&LeafSpec::server(
            NODE_NAME,
            vec![NODE_NAME.into()],
            vec![std::net::IpAddr::V4(cfg.node_ip)],
            CERT_VALIDITY,
        ))?;
        write(&cfg.dir.join("kubelet/pki/kubelet.crt"), &serving.cert_pem)?;
        write(&cfg.dir.join("kubelet/pki/kubelet.key"), &serving.key_pem)?;
        let proxy_kubeconfig = self.kubeconfig_file("kube-proxy", "system:kube-proxy", &[])?;
        write(&cfg.kube_proxy_config(), &config::kube_proxy_config(cfg, &proxy_kubeconfig))?;
        Ok(())
    }

    /// kube-controller-manager and kube-scheduler, on the host like the apiserver, each as its
    /// own identity (see [`components`]).
    fn start_components(&mut self, node_assets: &assets::NodeAssets) -> Result<(), HarnessError> {
        let kcm = self.kubeconfig_file("kube-controller-manager", components::CONTROLLER_MANAGER_USER, &[])?;
        let scheduler = self.kubeconfig_file("kube-scheduler", components::SCHEDULER_USER, &[])?;
        let kcm_spec = components::controller_manager(&self.control_plane, &node_assets.controller_manager, &kcm, &[])?;
        let scheduler_spec = components::scheduler(
            &self.control_plane,
            &node_assets.scheduler,
            components::SchedulerConnection::Kubeconfig(&scheduler),
        )?;
        for spec in [kcm_spec, scheduler_spec] {
            let name = spec.name.clone();
            self.components.push(ManagedProcess::spawn(spec).map_err(io_err(format!("starting {name}")))?);
        }
        Ok(())
    }

    async fn start_containerd(&mut self) -> Result<(), HarnessError> {
        let spec = ProcessSpec::new("containerd", "containerd", self.config.dir.join("containerd.log"))
            .arg(format!("--config={}", self.config.containerd_config().display()));
        let process =
            ManagedProcess::spawn(self.sandbox.inside(spec)).map_err(io_err("starting containerd in the node"))?;
        self.node_processes.push(process);
        let socket = self.config.containerd_socket();
        let log = self.config.dir.join("containerd.log");
        eventually("containerd's socket", SOCKET_TIMEOUT, || {
            let seen = if socket.exists() { Ok(()) } else { Err(crate::process::log_tail(&log, 5)) };
            async move { seen }
        })
        .await
        .map_err(HarnessError::Start)
    }

    /// kubelet and kube-proxy inside the node.
    fn start_node_agents(&mut self, node_assets: &assets::NodeAssets) -> Result<(), HarnessError> {
        let cfg = &self.config;
        let kubelet_kubeconfig =
            self.kubeconfig_file("kubelet", &format!("system:node:{NODE_NAME}"), &["system:nodes"])?;
        let kubelet = ProcessSpec::new("kubelet", &node_assets.kubelet, cfg.dir.join("kubelet.log")).args([
            format!("--config={}", cfg.kubelet_config().display()),
            format!("--kubeconfig={}", kubelet_kubeconfig.display()),
            format!("--root-dir={}", cfg.kubelet_root().display()),
            format!("--hostname-override={NODE_NAME}"),
            format!("--node-ip={}", cfg.node_ip),
            "--v=1".into(),
        ]);
        let proxy = ProcessSpec::new("kube-proxy", &node_assets.kube_proxy, cfg.dir.join("kube-proxy.log"))
            .args([format!("--config={}", cfg.kube_proxy_config().display()), "--v=1".into()]);
        for spec in [kubelet, proxy] {
            let name = spec.name.clone();
            let spec = self.sandbox.inside(spec);
            self.node_processes.push(ManagedProcess::spawn(spec).map_err(io_err(format!("starting {name}")))?);
        }
        Ok(())
    }

    fn exited(&mut self) -> Option<String> {
        for process in self.components.iter_mut().chain(self.node_processes.iter_mut()) {
            if let Some(status) = process.exit_status() {
                return Some(format!("{} exited ({status}):\n{}", process.name(), process.log_tail(20)));
            }
        }
        None
    }

    async fn wait_ready(&mut self) -> Result<(), HarnessError> {
        let client = self.control_plane.client()?;
        let nodes: Api<Node> = Api::all(client.clone());
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(exit) = self.exited() {
                return Err(HarnessError::Start(exit));
            }
            let last = match (nodes.get_opt(NODE_NAME).await, accounts.get_opt("default").await) {
                (Ok(Some(node)), Ok(Some(_))) => {
                    let ready = node
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .into_iter()
                        .find(|c| c.type_ == "Ready");
                    match ready {
                        Some(c) if c.status == "True" => return Ok(()),
                        other => format!("node Ready: {:?}", other.map(|c| (c.status, c.reason, c.message))),
                    }
                }
                (node, account) => format!(
                    "node: {:?}, default ServiceAccount: {:?}",
                    node.map(|n| n.is_some()),
                    account.map(|a| a.is_some())
                ),
            };
            if Instant::now() > deadline {
                return Err(HarnessError::Start(format!(
                    "the node did not become Ready in {READY_TIMEOUT:?}; last seen: {last}\n--- kubelet ---\n{}\n--- containerd ---\n{}",
                    crate::process::log_tail(&self.config.dir.join("kubelet.log"), 25),
                    crate::process::log_tail(&self.config.dir.join("containerd.log"), 10),
                )));
            }
            tokio::time::sleep(crate::wait::POLL_INTERVAL).await;
        }
    }

    /// The control plane (clients, kubectl, kubeconfig).
    pub fn control_plane(&self) -> &ControlPlane {
        &self.control_plane
    }

    /// The node's sandbox (addresses, slot).
    pub fn sandbox(&self) -> &sandbox::Sandbox {
        &self.sandbox
    }

    /// The node's files and addresses.
    pub fn node_config(&self) -> &NodeConfig {
        &self.config
    }

    /// The node's cgroup root.
    pub fn cgroup_root(&self) -> String {
        self.cgroups.kubelet_path()
    }

    /// Process ids of everything the cluster started on the host side (etcd, kube-apiserver,
    /// the components, and the nsenter/unshare parents of the node's processes).
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = self.control_plane.pids();
        pids.extend(self.components.iter().chain(self.node_processes.iter()).map(ManagedProcess::pid));
        pids.push(self.sandbox.init_pid());
        pids
    }

    /// What this cluster has on the host now, to check later that none of it is left.
    pub fn footprint(&self) -> footprint::Footprint {
        let init = self.sandbox.init_pid();
        let ns = |kind: &str| {
            std::fs::read_link(format!("/proc/{init}/ns/{kind}"))
                .map(|l| l.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        footprint::Footprint {
            pids: self.pids(),
            pid_namespace: ns("pid"),
            net_namespace: ns("net"),
            link: self.sandbox.link_name(),
            pod_cidr: self.config.pod_cidr.to_string(),
            run_dir: self.control_plane.layout().dir.clone(),
            cgroup: self.cgroups.kubelet_path().trim_start_matches('/').to_owned(),
        }
    }

    /// Import another OCI archive into the node's containerd.
    pub fn import_image(&self, archive: &Path) -> Result<(), String> {
        images::import(&self.config.containerd_socket(), archive)
    }

    /// How long [`Cluster::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// One line describing this cluster.
    pub fn summary(&self) -> String {
        format!(
            "cluster ready in {:.1?}: node {NODE_NAME} at {} (pods {}, Services {}), kube-apiserver at {}; logs in {}",
            self.startup,
            self.config.node_ip,
            self.config.pod_cidr,
            self.sandbox.service_cidr(),
            self.control_plane.url(),
            self.control_plane.layout().dir.display()
        )
    }

    /// Stop everything, and report anything that would be left behind.
    pub fn stop(mut self) -> Result<(), String> {
        for mut process in self.components.drain(..).chain(self.node_processes.drain(..)) {
            let _ = process.stop(Duration::from_secs(5));
        }
        self.sandbox.stop()?;
        self.cgroups.remove()
    }
}

/// The cluster shared by every test in this test binary, started on first use with the images
/// named in `MYOWNSHELL_NODE_IMAGES` (colon-separated archives; `cargo xtask test` and `e2e`
/// set it to the operator image). If it cannot start, every test that asks for it fails with
/// the same reason: no test skips.
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
    let result = SHARED.get_or_init(|| {
        let images: Vec<PathBuf> = std::env::var_os("MYOWNSHELL_NODE_IMAGES")
            .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
            .unwrap_or_default();
        crate::control_plane::start_shared(
            "cluster",
            move || Cluster::start(ClusterOptions { images }),
            |cluster: &Cluster| cluster.summary(),
        )
    });
    match result {
        Ok(cluster) => cluster,
        Err(e) => panic!("envtest cluster unavailable: {e}"),
    }
}
