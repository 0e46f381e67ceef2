//! A real cluster of one or more nodes, started and torn down by the harness like the control
//! plane: each node's containerd, kubelet and kube-proxy in a [`sandbox`] of its own namespaces
//! ([`one_node`]), the nodes and the host on one [`network`], kube-controller-manager and
//! kube-scheduler beside the apiserver, all on the harness's PKI ([`Cluster`]). Pods run for
//! real: images come from [`images`], never from a registry. Nodes can be lost and come back
//! ([`Cluster::kill_node`], [`Cluster::start_node`]); [`lifecycle`] says how fast the cluster
//! notices. A cluster enforces NetworkPolicies once asked ([`Cluster::enforce_network_policies`]):
//! kube-router's policy controller in each node ([`network_policy`]).
//!
//! How traffic flows. The host and every node share one L2 segment, a bridge in the network's
//! own namespace; kube-apiserver binds to the host's address on it, so kubelets and pods reach
//! it, and the host routes each node's pod range to that node, and the Service range to the
//! first node. Nodes route each other's pod ranges directly, so traffic between nodes never
//! passes through the host. kube-proxy (iptables mode) runs inside each node, where the pods
//! are: ClusterIPs work for pods (`kubernetes.default`, the metrics Services), whichever node
//! the endpoint is on. The apiserver calls webhooks at their endpoints
//! (`--enable-aggregator-routing`) rather than through a ClusterIP: it sits outside the nodes,
//! like a control plane on its own machine, and endpoint routing needs no kube-proxy on the
//! apiserver's side, so an admission call does not depend on a second packet path that nothing
//! else exercises.

pub mod assets;
pub mod cgroups;
mod cluster;
pub mod config;
pub mod footprint;
pub mod images;
pub mod lifecycle;
pub mod local_path;
pub mod netns;
pub mod network;
pub mod network_policy;
pub mod one_node;
pub mod sandbox;

use std::path::PathBuf;
use std::sync::OnceLock;

pub use cluster::{Cluster, ClusterOptions};

/// The file in which the e2e test notes each phase's time (a `seconds<TAB>phase` line each), set
/// by `cargo xtask e2e`, which prints them after the suites (a passing test's output is not
/// shown).
pub const E2E_PHASES_ENV: &str = "MYOWNSHELL_E2E_PHASES";

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
            move || Cluster::start(ClusterOptions { images, ..ClusterOptions::default() }),
            |cluster: &Cluster| cluster.summary(),
        )
    });
    match result {
        Ok(cluster) => cluster,
        Err(e) => panic!("envtest cluster unavailable: {e}"),
    }
}
