//! The node's configuration files, as pure functions of one [`NodeConfig`] so they can be read
//! and unit-tested: containerd's `config.toml`, the CNI network, the KubeletConfiguration and
//! the KubeProxyConfiguration.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::control_plane::Ipv4Net;

/// The first node's name in the API (the only one's, in a cluster of one node).
pub const NODE_NAME: &str = "myownshell-node";

/// Node `number`'s (1-based) name: [`NODE_NAME`] for the first, `myownshell-node-<k>` for node
/// k ≥ 2 (as Kind names workers `kind-worker2`, …), so the first name never changes.
pub fn node_name(number: u8) -> String {
    if number <= 1 { NODE_NAME.to_owned() } else { format!("{NODE_NAME}-{number}") }
}

/// The sandbox (pause) image the CRI plugin runs for every pod; built locally, never pulled.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The bridge pods are attached to, inside the node's own network namespace.
const BRIDGE: &str = "cni0";

/// Everything the node's files depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// The node's name in the API (kubelet's `--hostname-override`, kube-proxy's).
    pub name: String,
    /// The node's directory (`node/` in the run directory for the first node, `node-<k>/` for
    /// node k).
    pub dir: PathBuf,
    /// The node's address on the cluster network (its InternalIP).
    pub node_ip: Ipv4Addr,
    /// Pod addresses, on the node's bridge.
    pub pod_cidr: Ipv4Net,
    /// The cgroup (in every v1 hierarchy) that holds all of the node's pods.
    pub cgroup_root: String,
    /// The CNI plugins' directory (`/usr/lib/cni` from Debian's containernetworking-plugins).
    pub cni_bin_dir: PathBuf,
}

impl NodeConfig {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    /// containerd's gRPC socket (kubelet's `containerRuntimeEndpoint`, `ctr -a`).
    pub fn containerd_socket(&self) -> PathBuf {
        self.path("containerd/containerd.sock")
    }
    /// containerd's state (`/run/containerd` on a machine: shims' sockets, task bundles), which
    /// a node that comes back after a power loss starts without.
    pub fn containerd_state(&self) -> PathBuf {
        self.path("containerd/state")
    }
    /// containerd's root: the content store and snapshots of the node's images (about 0.9 GiB).
    pub fn containerd_root(&self) -> PathBuf {
        containerd_root_in(&self.dir)
    }
    /// containerd's `--config` file.
    pub fn containerd_config(&self) -> PathBuf {
        self.path("containerd/config.toml")
    }
    /// The CNI configuration directory the CRI plugin reads.
    pub fn cni_conf_dir(&self) -> PathBuf {
        self.path("cni/net.d")
    }
    /// kubelet's `--config` file.
    pub fn kubelet_config(&self) -> PathBuf {
        self.path("kubelet/config.yaml")
    }
    /// kubelet's `--root-dir` (volumes, pod state).
    pub fn kubelet_root(&self) -> PathBuf {
        self.path("kubelet/root")
    }
    /// kube-proxy's `--config` file.
    pub fn kube_proxy_config(&self) -> PathBuf {
        self.path("kube-proxy/config.yaml")
    }
}

/// containerd's root in the node directory `node_dir`: what [`NodeConfig::containerd_root`] is,
/// for a run whose process is gone.
pub fn containerd_root_in(node_dir: &Path) -> PathBuf {
    node_dir.join("containerd/root")
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

/// containerd 1.6's `config.toml`: its own root, state and socket, so no two nodes (of one
/// run or of two) ever share a containerd; the CRI plugin with the local pause image, CNI from
/// this node's directory, and `restrict_oom_score_adj` (runc cannot lower `oom_score_adj` on
/// this kind of machine, and sandboxes then fail with "can't get final child's PID from pipe:
/// EOF").
pub fn containerd_toml(cfg: &NodeConfig) -> String {
    let dir = cfg.path("containerd");
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
plugin_dir = ""
disabled_plugins = ["io.containerd.grpc.v1.cri.v1alpha2", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  max_container_log_line_size = 16384

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{cni_bin}"
  conf_dir = "{cni_conf}"
"#,
        root = show(&cfg.containerd_root()),
        state = show(&cfg.containerd_state()),
        socket = show(&cfg.containerd_socket()),
        opt = show(&dir.join("opt")),
        pause = PAUSE_IMAGE,
        cni_bin = show(&cfg.cni_bin_dir),
        cni_conf = show(&cfg.cni_conf_dir()),
    )
}

/// The pod network: a bridge with host-local addresses from the node's pod range, the bridge as
/// gateway, and no masquerading: the host and the other nodes route the pod range to the node,
/// so pod addresses are seen as they are (the apiserver calls webhook pods at them, pods on other
/// nodes answer them).
pub fn cni_conflist(cfg: &NodeConfig) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "myownshell",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": cfg.pod_cidr.to_string() }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": show(&cfg.path("cni/ipam")),
                },
            },
            { "type": "portmap", "capabilities": { "portMappings": true } },
        ],
    })
    .to_string()
}

/// The KubeletConfiguration. cgroup v1 is allowed explicitly (kubelet 1.35 refuses it
/// otherwise), with the cgroupfs driver under this node's own cgroup root; x509 client
/// certificates from the harness's client CA plus webhook token authentication, webhook
/// authorization; no read-only port; image garbage collection and disk-pressure eviction
/// are off, because every image here is imported once and could not be pulled again.
/// `syncFrequency` is 10 s where a cluster's default is a minute: the kubelet writes a changed
/// Secret or ConfigMap into a pod's volume when it next syncs the pod, so a renewed certificate
/// (the e2e's cert-manager phase) reached its webhook a minute and more after cert-manager wrote
/// it; what the tests check (nothing refused meanwhile, the new one served) is the same, reached
/// in seconds.
pub fn kubelet_config(cfg: &NodeConfig, client_ca: &Path) -> String {
    let pki = cfg.path("kubelet/pki");
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {node_ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: {pki}/kubelet.crt
tlsPrivateKeyFile: {pki}/kubelet.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {client_ca}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{socket}
podLogsDir: {logs}
resolvConf: ""
staticPodPath: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 0%
  nodefs.inodesFree: 0%
  imagefs.available: 0%
  imagefs.inodesFree: 0%
rotateCertificates: false
serverTLSBootstrap: false
registerNode: true
maxPods: 110
syncFrequency: 10s
"#,
        node_ip = cfg.node_ip,
        pki = show(&pki),
        client_ca = show(client_ca),
        cgroup_root = cfg.cgroup_root,
        socket = show(&cfg.containerd_socket()),
        logs = show(&cfg.path("kubelet/pod-logs")),
    )
}

/// kube-proxy in iptables mode, inside the node's network namespace (its rules live and die
/// there). conntrack limits are global sysctls a namespace cannot set: left alone.
/// `clusterCIDR` is this node's own pod range, which makes it what `detectLocalMode: NodeCIDR`
/// would be (that mode needs `spec.podCIDR`, which nothing here sets): traffic to a Service from
/// this node's pods keeps its source address, whichever node the chosen endpoint is on, and
/// traffic from anywhere else (the host) is masqueraded, so replies come back through this
/// node's conntrack.
pub fn kube_proxy_config(cfg: &NodeConfig, kubeconfig: &Path) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
hostnameOverride: {name}
mode: iptables
clusterCIDR: {pod_cidr}
bindAddress: {node_ip}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
        kubeconfig = show(kubeconfig),
        name = cfg.name,
        pod_cidr = cfg.pod_cidr,
        node_ip = cfg.node_ip,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> NodeConfig {
        NodeConfig {
            name: NODE_NAME.into(),
            dir: PathBuf::from("/t/run-1-0/node"),
            node_ip: Ipv4Addr::new(10, 213, 3, 2),
            pod_cidr: Ipv4Net { network: Ipv4Addr::new(10, 214, 3, 0), prefix: 24 },
            cgroup_root: "/myownshell-node-1-0".into(),
            cni_bin_dir: PathBuf::from("/usr/lib/cni"),
        }
    }

    #[test]
    fn containerd_keeps_everything_in_the_node_directory() {
        let toml = containerd_toml(&cfg());
        for want in [
            "root = \"/t/run-1-0/node/containerd/root\"",
            "state = \"/t/run-1-0/node/containerd/state\"",
            "address = \"/t/run-1-0/node/containerd/containerd.sock\"",
            "sandbox_image = \"registry.k8s.io/pause:3.10\"",
            "restrict_oom_score_adj = true",
            "conf_dir = \"/t/run-1-0/node/cni/net.d\"",
            "bin_dir = \"/usr/lib/cni\"",
            "SystemdCgroup = false",
        ] {
            assert!(toml.contains(want), "{want} missing from\n{toml}");
        }
    }

    #[test]
    fn pods_get_addresses_from_the_node_range_without_masquerading() {
        let json: serde_json::Value = serde_json::from_str(&cni_conflist(&cfg())).unwrap();
        let bridge = &json["plugins"][0];
        assert_eq!(bridge["type"], "bridge");
        assert_eq!(bridge["ipMasq"], false);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.214.3.0/24");
        assert_eq!(bridge["ipam"]["dataDir"], "/t/run-1-0/node/cni/ipam");
    }

    #[test]
    fn kubelet_runs_on_cgroup_v1_under_its_own_root_and_authenticates_callers() {
        let yaml = kubelet_config(&cfg(), Path::new("/t/run-1-0/pki/client-ca.crt"));
        let doc: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(doc["failCgroupV1"], false);
        assert_eq!(doc["cgroupDriver"], "cgroupfs");
        assert_eq!(doc["cgroupRoot"], "/myownshell-node-1-0");
        assert_eq!(doc["address"], "10.213.3.2");
        assert_eq!(doc["readOnlyPort"], 0);
        assert_eq!(doc["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(doc["authentication"]["x509"]["clientCAFile"], "/t/run-1-0/pki/client-ca.crt");
        assert_eq!(doc["authorization"]["mode"], "Webhook");
        assert_eq!(doc["containerRuntimeEndpoint"], "unix:///t/run-1-0/node/containerd/containerd.sock");
        assert_eq!(doc["syncFrequency"], "10s");
    }

    #[test]
    fn kube_proxy_knows_the_pod_range() {
        let yaml = kube_proxy_config(&cfg(), Path::new("/k"));
        let doc: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(doc["mode"], "iptables");
        assert_eq!(doc["clusterCIDR"], "10.214.3.0/24");
        assert_eq!(doc["hostnameOverride"], NODE_NAME);
        let second = kube_proxy_config(&NodeConfig { name: node_name(2), ..cfg() }, Path::new("/k"));
        let doc: serde_json::Value = serde_saphyr::from_str(&second).unwrap();
        assert_eq!(doc["hostnameOverride"], "myownshell-node-2");
        assert_eq!(doc["conntrack"]["maxPerCore"], 0);
    }
}
