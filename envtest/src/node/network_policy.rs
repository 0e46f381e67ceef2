//! NetworkPolicy enforced on the nodes, as a cluster's network plugin enforces it: kube-router's
//! network policy controller, and nothing else of kube-router (no routing, no service proxy: the
//! harness's bridge and routes and kube-proxy stay as they are). Built from the Go module proxy
//! by `cargo xtask` into [`TOOL`]'s cache folder (like kwok and local-path-provisioner), and run by
//! [`super::Cluster::enforce_network_policies`] in each node's sandbox beside kubelet and
//! kube-proxy, as a managed process of that node: stopped, killed and started again with it.
//!
//! Test bed only: v2.1.0 is the only kube-router the module proxy serves here, and advisories are
//! published against it (the README names them); nothing shipped depends on it.
//!
//! What it does in a node: it watches pods, namespaces and NetworkPolicies (as the user
//! [`USER`], bound by [`install_rbac`] to the read-only [`CLUSTER_ROLE`]), and writes the
//! node's iptables filter table (chains `KUBE-ROUTER-{INPUT,FORWARD,OUTPUT}`, a chain per local
//! pod and per policy) and ipsets of peer addresses. Traffic to a pod of this node that no
//! policy admits is REJECTed, so a client is refused at once rather than left to time out;
//! traffic from the node's own addresses (kubelet's probes) always passes. Pods are this node's
//! when their `status.hostIP` is its InternalIP, so it needs no pod range. It runs the node's
//! `iptables` (Debian's, the nf_tables backend: the same one kube-proxy writes with) and
//! `ipset`, in the node's network namespace: every rule and set lives and dies there, so
//! nothing of it can outlive the node, and the host's tables are never touched.
//!
//! Its health and pprof server (one listener, on every address of the node) is off
//! (`--health-port=0`); the harness knows it is enforcing from the rules themselves
//! ([`synced`]).

use std::path::{Path, PathBuf};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Subject};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};

use super::config::NodeConfig;
use super::sandbox::run;
use crate::assets::CachedTool;
use crate::control_plane::{ControlPlane, HarnessError, Ipv4Net};

/// The kube-router release built and run.
pub const VERSION: &str = "v2.1.0";
/// A directory holding [`BINARY`], instead of [`TOOL`]'s cache folder.
pub const ENV: &str = "MYOWNSHELL_KUBE_ROUTER";
/// File name of the binary.
pub const BINARY: &str = "kube-router";
/// The user kube-router authenticates as (a client certificate from the harness's CA).
pub const USER: &str = "myownshell-envtest:kube-router";
/// What [`USER`] may do: read what kube-router's informers watch, nothing else.
pub const CLUSTER_ROLE: &str = "myownshell-envtest:kube-router";
/// The chain kube-router jumps to from `FORWARD`, where traffic to and from pods is filtered.
pub const FORWARD_CHAIN: &str = "KUBE-ROUTER-FORWARD";
/// The rule a full sync ends `FORWARD_CHAIN` with: traffic a policy admitted (marked
/// 0x20000) is accepted. Written only by a full sync's `iptables-restore` that went through.
const EXPLICIT_ACCEPT: &str = "--mark 0x20000/0x20000 -j ACCEPT";
/// The iptables chain prefixes and ipset name prefixes kube-router's network policy controller
/// writes: none of them may ever be seen outside a node (see [`host_traces`]).
pub const TRACE_PREFIXES: [&str; 5] = ["KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-", "KUBE-SRC-", "KUBE-DST-"];

/// Where the binary is found.
pub const TOOL: CachedTool = CachedTool {
    name: "kube-router",
    folder: "kube-router",
    version: VERSION,
    env: ENV,
    binary: BINARY,
    built_by: "`cargo xtask test`, `cargo xtask e2e` and `cargo xtask dev`",
};

/// The binary, or what is missing and how to get it.
pub fn locate() -> Result<PathBuf, String> {
    TOOL.locate()
}

/// kube-router's arguments in the node `cfg`: the network policy controller alone, as the node
/// named in the API, with the cluster's Service range (whose traffic it leaves to kube-proxy).
pub fn args(cfg: &NodeConfig, kubeconfig: &Path, service_cidr: Ipv4Net) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--hostname-override={}", cfg.name),
        "--run-firewall=true".into(),
        "--run-router=false".into(),
        "--run-service-proxy=false".into(),
        "--run-loadbalancer=false".into(),
        format!("--service-cluster-ip-range={service_cidr}"),
        "--health-port=0".into(),
        "--metrics-port=0".into(),
        "--v=1".into(),
    ]
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() }
}

fn rule(api_group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![api_group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// [`CLUSTER_ROLE`]: get, list and watch on what kube-router starts an informer for (with the
/// router and the proxy off it still starts them all, and waits for every cache to sync):
/// pods, namespaces, nodes (its own Node for its address), NetworkPolicies, Services,
/// Endpoints and EndpointSlices. It writes nothing.
pub fn cluster_role() -> ClusterRole {
    let read = ["get", "list", "watch"];
    ClusterRole {
        metadata: named(CLUSTER_ROLE),
        rules: Some(vec![
            rule("", &["pods", "namespaces", "nodes", "services", "endpoints"], &read),
            rule("networking.k8s.io", &["networkpolicies"], &read),
            rule("discovery.k8s.io", &["endpointslices"], &read),
        ]),
        ..ClusterRole::default()
    }
}

/// [`CLUSTER_ROLE`] bound to [`USER`].
pub fn cluster_role_binding() -> ClusterRoleBinding {
    let subject = Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: "User".into(),
        name: USER.into(),
        ..Subject::default()
    };
    crate::rbac::cluster_role_binding(CLUSTER_ROLE, CLUSTER_ROLE, subject)
}

/// Apply [`cluster_role`] and [`cluster_role_binding`] (server-side, so again is a no-op).
pub(crate) async fn install_rbac(cp: &ControlPlane) -> Result<(), HarnessError> {
    let client = cp.client()?;
    let params = PatchParams::apply("myownshell-envtest").force();
    Api::<ClusterRole>::all(client.clone()).patch(CLUSTER_ROLE, &params, &Patch::Apply(cluster_role())).await?;
    Api::<ClusterRoleBinding>::all(client).patch(CLUSTER_ROLE, &params, &Patch::Apply(cluster_role_binding())).await?;
    Ok(())
}

/// `iptables -S CHAIN` in the network namespace of `pid` (and its mount namespace, for the
/// node's private `/run`).
fn chain_in(pid: u32, chain: &str) -> Result<String, String> {
    let pid = pid.to_string();
    run("nsenter", &["-t", &pid, "-m", "-n", "--", "iptables", "-w", "5", "-S", chain])
}

/// Whether kube-router has gone through one full sync in the node whose sandbox's pid 1 is
/// `init_pid`: its `FORWARD` chain ends with the accept of admitted traffic, which only a
/// restore of the whole filter table writes. The error says what is there instead.
pub fn synced(init_pid: u32) -> Result<(), String> {
    let rules = chain_in(init_pid, FORWARD_CHAIN)?;
    if rules.lines().any(|l| l.contains(EXPLICIT_ACCEPT)) {
        Ok(())
    } else {
        Err(format!("{FORWARD_CHAIN} has no full sync yet:\n{rules}"))
    }
}

/// kube-router's chains and ipsets in the host's own network namespace (where the harness never
/// runs it): each name that starts with one of [`TRACE_PREFIXES`]. Empty is the only right
/// answer; an error if the host's tables cannot be read.
pub fn host_traces() -> Result<Vec<String>, String> {
    let mut traces = Vec::new();
    let tables = run("iptables-save", &["-t", "filter"])?;
    traces.extend(
        tables
            .lines()
            .filter_map(|l| l.strip_prefix(':'))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|chain| TRACE_PREFIXES.iter().any(|p| chain.starts_with(p)))
            .map(|chain| format!("iptables chain {chain}")),
    );
    let sets = run("ipset", &["list", "-n"])?;
    traces.extend(
        sets.lines()
            .map(str::trim)
            .filter(|set| TRACE_PREFIXES.iter().any(|p| set.starts_with(p)))
            .map(|set| format!("ipset {set}")),
    );
    Ok(traces)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn cfg() -> NodeConfig {
        NodeConfig {
            name: "myownshell-node-2".into(),
            dir: PathBuf::from("/t/run-1-0/node-2"),
            node_ip: Ipv4Addr::new(10, 213, 3, 3),
            pod_cidr: Ipv4Net { network: Ipv4Addr::new(10, 216, 3, 0), prefix: 24 },
            cgroup_root: "/myownshell-node-1-0-2".into(),
            cni_bin_dir: PathBuf::from("/usr/lib/cni"),
        }
    }

    #[test]
    fn only_the_network_policy_controller_runs_as_its_node() {
        let services = Ipv4Net { network: Ipv4Addr::new(10, 215, 3, 0), prefix: 24 };
        let args = args(&cfg(), Path::new("/k/kube-router.kubeconfig"), services);
        for want in [
            "--kubeconfig=/k/kube-router.kubeconfig",
            "--hostname-override=myownshell-node-2",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--run-loadbalancer=false",
            "--service-cluster-ip-range=10.215.3.0/24",
            "--health-port=0",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} missing from {args:?}");
        }
    }

    #[test]
    fn its_role_reads_what_its_informers_watch_and_writes_nothing() {
        let role = cluster_role();
        let rules = role.rules.unwrap();
        let mut resources: Vec<String> = rules.iter().flat_map(|r| r.resources.clone().unwrap_or_default()).collect();
        resources.sort();
        assert_eq!(
            resources,
            ["endpoints", "endpointslices", "namespaces", "networkpolicies", "nodes", "pods", "services"]
        );
        assert!(rules.iter().all(|r| r.verbs == ["get", "list", "watch"]), "{rules:?}");
        let binding = cluster_role_binding();
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!((subject.kind.as_str(), subject.name.as_str()), ("User", USER));
        assert_eq!(binding.role_ref.name, CLUSTER_ROLE);
    }
}
