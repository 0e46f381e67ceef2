//! One node of a cluster: its [`Sandbox`], plugged into the cluster [`Network`], with its own
//! containerd, kubelet and kube-proxy (and, where the cluster enforces NetworkPolicies,
//! kube-router's policy controller: [`super::network_policy`]), files, pod range and cgroup
//! root. Started, killed as a machine losing power, and started again as that machine coming
//! back: same name, addresses, pod range and disk (its directory: containerd's images,
//! kubelet's root), but fresh namespaces, processes, cgroups and `/run`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use myownshell_certs::pki::LeafSpec;

use crate::components;
use crate::control_plane::{ControlPlane, HarnessError, io_err};
use crate::process::{ManagedProcess, ProcessSpec};
use crate::wait::eventually;

use super::assets::{CNI_BIN_DIR, NodeAssets};
use super::cgroups::{self, CgroupRoot};
use super::config::{self, NodeConfig};
use super::footprint::NodeFootprint;
use super::images;
use super::network::{Addresses, Network};
use super::network_policy;
use super::sandbox::Sandbox;

const CERT_VALIDITY: Duration = Duration::from_secs(7 * 86_400);
const SOCKET_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// One node, running or not.
#[derive(Debug)]
pub struct ClusterNode {
    number: u8,
    config: NodeConfig,
    cgroup: String,
    running: Option<Running>,
}

/// What exists of a node while it runs.
#[derive(Debug)]
struct Running {
    // Dropped in this order: the processes, the sandbox (whose end kills anything left in it),
    // the cgroups.
    processes: Vec<ManagedProcess>,
    sandbox: Sandbox,
    cgroups: CgroupRoot,
}

/// What a node needs from its cluster to start.
pub(crate) struct Boot<'a> {
    pub control_plane: &'a ControlPlane,
    pub network: &'a Network,
    pub assets: &'a NodeAssets,
    /// OCI archives to import (the base images, the cluster's extra ones).
    pub images: &'a [PathBuf],
    /// kube-router, when the cluster enforces NetworkPolicies.
    pub network_policy: Option<&'a Path>,
}

fn write(path: &Path, contents: &str) -> Result<(), HarnessError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
    }
    std::fs::write(path, contents).map_err(io_err(format!("writing {}", path.display())))
}

fn start_err(e: String) -> HarnessError {
    HarnessError::Start(e)
}

impl ClusterNode {
    /// Node `number` (1-based) of the run in `run_dir`, not started yet. The first node's files
    /// go to `node/` as they always did, node k's to `node-<k>/`.
    pub(crate) fn new(number: u8, run_dir: &Path, addresses: Addresses) -> Self {
        let run_name = run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let dir = if number <= 1 { run_dir.join("node") } else { run_dir.join(format!("node-{number}")) };
        let cgroup = cgroups::root_name(&run_name, number);
        let config = NodeConfig {
            name: config::node_name(number),
            dir,
            node_ip: addresses.node_ip(number),
            pod_cidr: addresses.pod_cidr(number),
            cgroup_root: format!("/{cgroup}"),
            cni_bin_dir: PathBuf::from(CNI_BIN_DIR),
        };
        Self { number, config, cgroup, running: None }
    }

    /// The node's name in the API.
    pub fn name(&self) -> &str {
        &self.config.name
    }
    /// Its number in the cluster, from 1.
    pub fn number(&self) -> u8 {
        self.number
    }
    /// Its files and addresses (they stay while it is down).
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }
    /// Whether it runs (it does not between [`super::Cluster::kill_node`] and
    /// [`super::Cluster::start_node`]).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }
    /// Its sandbox, while it runs.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        self.running.as_ref().map(|r| &r.sandbox)
    }

    /// Start the node: cgroups, sandbox, its link, its files, containerd, the images, kubelet
    /// and kube-proxy. Returns once they are started; the cluster waits for the node to be
    /// Ready. What `/run` holds on a machine (containerd's state and socket) is removed first,
    /// so a node coming back starts as after a reboot.
    pub(crate) async fn boot(&mut self, boot: &Boot<'_>) -> Result<(), HarnessError> {
        if self.running.is_some() {
            return Err(HarnessError::Start(format!("{} is already running", self.name())));
        }
        self.forget_volatile_state()?;
        let cgroups = CgroupRoot::create(&self.cgroup).map_err(start_err)?;
        let sandbox = Sandbox::start(&self.config.dir)?;
        let mut running = Running { processes: Vec::new(), sandbox, cgroups };
        let link = boot.network.attach(self.number, running.sandbox.init_pid()).map_err(start_err)?;
        running.sandbox.configure(&link).map_err(start_err)?;
        let kubelet_kubeconfig = self.write_files(boot.control_plane)?;
        running.start_containerd(&self.config).await?;
        let socket = self.config.containerd_socket();
        for archive in boot.images {
            images::import(&socket, archive).map_err(|e| {
                HarnessError::Start(format!("importing {} into {}: {e}", archive.display(), self.name()))
            })?;
        }
        running.start_agents(&self.config, &kubelet_kubeconfig, boot.assets)?;
        self.running = Some(running);
        if let Some(binary) = boot.network_policy {
            self.enforce(boot.control_plane, boot.network, binary)?;
        }
        Ok(())
    }

    /// Start kube-router's network policy controller in the running node (see
    /// [`network_policy`]), as a process of the node: it stops, dies and starts again with it.
    pub(crate) fn enforce(&mut self, cp: &ControlPlane, network: &Network, binary: &Path) -> Result<(), HarnessError> {
        let kubeconfig = self.kubeconfig_file(cp, "kube-router", network_policy::USER, &[])?;
        let cfg = &self.config;
        let Some(running) = self.running.as_mut() else {
            return Err(HarnessError::Start(format!("{} is not running", cfg.name)));
        };
        let args = network_policy::args(cfg, &kubeconfig, network.service_cidr());
        let spec = ProcessSpec::new("kube-router", binary, cfg.dir.join("kube-router.log")).args(args);
        let process = ManagedProcess::spawn(running.sandbox.inside(spec))
            .map_err(io_err(format!("starting kube-router in {}", cfg.name)))?;
        running.processes.push(process);
        Ok(())
    }

    /// Whether the node's kube-router has gone through a full sync ([`network_policy::synced`]);
    /// the error says why not.
    pub(crate) fn enforcing(&self) -> Result<(), String> {
        let sandbox = self.sandbox().ok_or_else(|| format!("{} is not running", self.name()))?;
        network_policy::synced(sandbox.init_pid()).map_err(|e| format!("{}: {e}", self.name()))
    }

    fn forget_volatile_state(&self) -> Result<(), HarnessError> {
        let state = self.config.containerd_state();
        if state.exists() {
            std::fs::remove_dir_all(&state).map_err(io_err(format!("removing {}", state.display())))?;
        }
        let socket = self.config.containerd_socket();
        for stale in [socket.clone(), socket.with_extension("sock.ttrpc")] {
            if stale.exists() {
                std::fs::remove_file(&stale).map_err(io_err(format!("removing {}", stale.display())))?;
            }
        }
        Ok(())
    }

    fn kubeconfig_file(
        &self,
        cp: &ControlPlane,
        name: &str,
        user: &str,
        groups: &[&str],
    ) -> Result<PathBuf, HarnessError> {
        components::kubeconfig_file(cp, &self.config.dir, name, user, groups)
    }

    /// The node's configuration files, certificates and kubeconfigs; returns kubelet's
    /// kubeconfig.
    fn write_files(&self, cp: &ControlPlane) -> Result<PathBuf, HarnessError> {
        let cfg = &self.config;
        let pki = cp.pki_dir();
        write(&cfg.containerd_config(), &config::containerd_toml(cfg))?;
        write(&cfg.cni_conf_dir().join("10-myownshell.conflist"), &config::cni_conflist(cfg))?;
        write(&cfg.kubelet_config(), &config::kubelet_config(cfg, &pki.join("client-ca.crt")))?;
        let serving = cp.serving_ca().issue(&LeafSpec::server(
            &cfg.name,
            vec![cfg.name.clone()],
            vec![std::net::IpAddr::V4(cfg.node_ip)],
            CERT_VALIDITY,
        ))?;
        write(&cfg.dir.join("kubelet/pki/kubelet.crt"), &serving.cert_pem)?;
        write(&cfg.dir.join("kubelet/pki/kubelet.key"), &serving.key_pem)?;
        let proxy_kubeconfig = self.kubeconfig_file(cp, "kube-proxy", "system:kube-proxy", &[])?;
        write(&cfg.kube_proxy_config(), &config::kube_proxy_config(cfg, &proxy_kubeconfig))?;
        let kubelet_user = format!("system:node:{}", cfg.name);
        self.kubeconfig_file(cp, "kubelet", &kubelet_user, &["system:nodes"])
    }

    /// Kill the node as a machine losing power: SIGKILL to its sandbox's pid 1 (the kernel kills
    /// everything else in it at once) and to the host-side parents, then wait until its network
    /// namespace is released and remove its cgroups. kubelet gets no chance to say goodbye: the
    /// Node object stays, and the node-lifecycle controller finds it silent.
    pub(crate) fn kill(&mut self, network: &Network) -> Result<(), String> {
        let mut running = self.running.take().ok_or_else(|| format!("{} is not running", self.name()))?;
        running.sandbox.kill()?;
        for process in &mut running.processes {
            let _ = process.kill();
        }
        network.wait_detached(self.number)?;
        running.cgroups.remove()
    }

    /// Stop the node (SIGTERM first, for the cluster's own stop), and wait as [`Self::kill`]
    /// does. Nothing to do if it is not running.
    pub(crate) fn stop(&mut self, network: &Network) -> Result<(), String> {
        let Some(mut running) = self.running.take() else { return Ok(()) };
        for process in &mut running.processes {
            let _ = process.stop(STOP_GRACE);
        }
        running.sandbox.stop()?;
        network.wait_detached(self.number)?;
        running.cgroups.remove()
    }

    /// Remove the images the stopped node's containerd held (its root), keeping its logs: about
    /// 0.9 GiB a node that a post-mortem never reads, and with several nodes a run, what filled
    /// CI's disk ("no space left on device").
    pub(crate) fn discard_images(&self) -> Result<(), String> {
        if self.running.is_some() {
            return Err(format!("{} still runs: its images are kept", self.name()));
        }
        let root = self.config.containerd_root();
        match std::fs::remove_dir_all(&root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("removing {}: {e}", root.display())),
        }
    }

    /// A process of the node that exited, with the tail of its log.
    pub(crate) fn exited(&mut self) -> Option<String> {
        let running = self.running.as_mut()?;
        running.processes.iter_mut().find_map(|process| {
            process
                .exit_status()
                .map(|status| format!("{} exited ({status}):\n{}", process.name(), process.log_tail(20)))
        })
    }

    /// Host pids of the node: its processes' nsenter parents and its sandbox.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let Some(running) = &self.running else { return Vec::new() };
        let mut pids: Vec<u32> = running.processes.iter().map(ManagedProcess::pid).collect();
        pids.push(running.sandbox.init_pid());
        pids
    }

    /// The node's traces, while it runs, as of `recorded_at` (see [`NodeFootprint`]).
    pub(crate) fn footprint(&self, recorded_at: u64) -> Option<NodeFootprint> {
        let sandbox = self.sandbox()?;
        Some(NodeFootprint {
            name: self.config.name.clone(),
            pid_namespace: sandbox.namespace("pid"),
            net_namespace: sandbox.namespace("net"),
            pod_cidr: self.config.pod_cidr.to_string(),
            cgroup: self.cgroup.clone(),
            recorded_at,
        })
    }

    /// Import an OCI archive into the node's containerd, if it runs (a node that is down gets
    /// it when it starts again).
    pub(crate) fn import(&self, archive: &Path) -> Result<(), String> {
        if !self.is_running() {
            return Ok(());
        }
        images::import(&self.config.containerd_socket(), archive).map_err(|e| format!("{}: {e}", self.name()))
    }

    /// The last lines of its kubelet's and containerd's logs (and kube-router's, if it has
    /// one), for failures.
    pub(crate) fn log_tails(&self) -> String {
        let mut tails = format!(
            "--- {name}: kubelet ---\n{}\n--- {name}: containerd ---\n{}",
            crate::process::log_tail(&self.config.dir.join("kubelet.log"), 25),
            crate::process::log_tail(&self.config.dir.join("containerd.log"), 10),
            name = self.name(),
        );
        let kube_router = self.config.dir.join("kube-router.log");
        if kube_router.exists() {
            tails.push_str(&format!(
                "\n--- {}: kube-router ---\n{}",
                self.name(),
                crate::process::log_tail(&kube_router, 15)
            ));
        }
        tails
    }
}

impl Running {
    async fn start_containerd(&mut self, cfg: &NodeConfig) -> Result<(), HarnessError> {
        let log = cfg.dir.join("containerd.log");
        let spec = ProcessSpec::new("containerd", "containerd", &log)
            .arg(format!("--config={}", cfg.containerd_config().display()));
        let process = ManagedProcess::spawn(self.sandbox.inside(spec))
            .map_err(io_err(format!("starting containerd in {}", cfg.name)))?;
        self.processes.push(process);
        let socket = cfg.containerd_socket();
        eventually(&format!("containerd's socket in {}", cfg.name), SOCKET_TIMEOUT, || {
            let seen = if socket.exists() { Ok(()) } else { Err(crate::process::log_tail(&log, 5)) };
            async move { seen }
        })
        .await
        .map_err(HarnessError::Start)
    }

    /// kubelet and kube-proxy inside the node.
    fn start_agents(&mut self, cfg: &NodeConfig, kubeconfig: &Path, assets: &NodeAssets) -> Result<(), HarnessError> {
        let kubelet = ProcessSpec::new("kubelet", &assets.kubelet, cfg.dir.join("kubelet.log")).args([
            format!("--config={}", cfg.kubelet_config().display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--root-dir={}", cfg.kubelet_root().display()),
            format!("--hostname-override={}", cfg.name),
            format!("--node-ip={}", cfg.node_ip),
            "--v=1".into(),
        ]);
        let proxy = ProcessSpec::new("kube-proxy", &assets.kube_proxy, cfg.dir.join("kube-proxy.log"))
            .args([format!("--config={}", cfg.kube_proxy_config().display()), "--v=1".into()]);
        for spec in [kubelet, proxy] {
            let name = spec.name.clone();
            let spec = self.sandbox.inside(spec);
            self.processes
                .push(ManagedProcess::spawn(spec).map_err(io_err(format!("starting {name} in {}", cfg.name)))?);
        }
        Ok(())
    }
}
