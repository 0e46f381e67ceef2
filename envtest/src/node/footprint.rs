//! What a cluster with a node leaves on the host while it runs, recorded so that a test can
//! check, after the cluster stopped or its process was SIGKILLed, that none of it is left:
//! processes (the host-side ones, and anything in the node's pid namespace: containerd,
//! kubelet, kube-proxy, shims, containers), the node's network namespace (with the bridge, the
//! pods' veths and kube-proxy's iptables rules in it), the host's end of the link and its
//! routes, mounts under the run directory, and the node's cgroups.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::process::is_alive as alive;

/// The traces of one running cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    /// Host pids the harness started (etcd, kube-apiserver, components, node processes' parents).
    pub pids: Vec<u32>,
    /// `/proc/<pid>/ns/pid` of the node's processes, e.g. `pid:[4026532291]`.
    pub pid_namespace: String,
    /// `/proc/<pid>/ns/net` of the node.
    pub net_namespace: String,
    /// The host's end of the link (`mosnode<slot>`).
    pub link: String,
    /// The pod range, whose host route goes with the link.
    pub pod_cidr: String,
    /// The run directory.
    pub run_dir: PathBuf,
    /// The node's cgroup root name (without the leading `/`).
    pub cgroup: String,
}

/// Live processes whose namespace of `kind` is `namespace`.
fn processes_in(kind: &str, namespace: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).is_ok_and(|l| l.to_string_lossy() == namespace)
                && alive(*pid)
        })
        .collect()
}

impl Footprint {
    /// Everything of the run still present, described; empty when nothing is left. Cgroups are
    /// reported only if they could not be removed (they outlive a SIGKILLed run by design and
    /// are swept; see [`super::cgroups`]).
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        let pids: Vec<u32> = self.pids.iter().copied().filter(|p| alive(*p)).collect();
        if !pids.is_empty() {
            left.push(format!("host processes {pids:?}"));
        }
        let in_node = processes_in("pid", &self.pid_namespace);
        if !in_node.is_empty() {
            left.push(format!("processes in the node's pid namespace {in_node:?}"));
        }
        let in_net = processes_in("net", &self.net_namespace);
        if !in_net.is_empty() {
            left.push(format!("processes in the node's network namespace {in_net:?}"));
        }
        if Path::new("/sys/class/net").join(&self.link).exists() {
            left.push(format!("link {}", self.link));
        }
        if let Ok(routes) = super::sandbox::run("ip", &["route", "show", &self.pod_cidr])
            && !routes.trim().is_empty()
        {
            left.push(format!("route {}", routes.trim()));
        }
        let run_dir = self.run_dir.display().to_string();
        let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&run_dir))
            .map(str::to_owned)
            .collect();
        if !mounts.is_empty() {
            left.push(format!("mounts {mounts:?}"));
        }
        if let Ok(rules) = super::sandbox::run("iptables-save", &[]) {
            let pods = self.pod_cidr.trim_end_matches("0/24");
            let ours: Vec<&str> = rules.lines().filter(|l| l.contains(pods)).collect();
            if !ours.is_empty() {
                left.push(format!("host iptables rules {ours:?}"));
            }
        }
        super::cgroups::sweep_stale();
        if super::cgroups::existing_roots().contains(&self.cgroup) {
            left.push(format!("cgroup {}", self.cgroup));
        }
        left
    }
}
