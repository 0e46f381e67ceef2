//! What a cluster with nodes leaves on the host while it runs, recorded so that a test can
//! check, after the cluster stopped, one of its nodes was killed, or its process was SIGKILLed,
//! that none of it is left: processes (the host-side ones, and anything in each node's pid
//! namespace: containerd, kubelet, kube-proxy, shims, containers), each node's network namespace
//! (with its bridge, the pods' veths and kube-proxy's iptables rules in it), the cluster
//! network's namespace, the host's link and routes, mounts under the run directory, and each
//! node's cgroups.
//!
//! Names and numbers can come back: another run may take the freed slot (its link then has the
//! same name and routes), and the kernel may give a new namespace the number of a freed one. So
//! the link is known by its interface index as well as its name, and a process counts as a
//! leftover only if it is in a recorded namespace *and* started before the record was made (a
//! namespace of ours that still exists always holds such a process: its first one).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::process::is_alive as alive;

/// The traces of one running cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    /// Host pids the harness started (etcd, kube-apiserver, components, the network's holder,
    /// node processes' parents and sandboxes).
    pub pids: Vec<u32>,
    /// `/proc/<pid>/ns/net` of the cluster network (the bridge the nodes and the host share).
    pub network_namespace: String,
    /// The host's end of the link (`mosnode<slot>`).
    pub link: String,
    /// Its interface index, which a link of a later run with the same name would not have.
    pub link_index: Option<u32>,
    /// When this was recorded, in clock ticks since boot (as `/proc/<pid>/stat`'s start times).
    pub recorded_at: u64,
    /// Destinations of the host's routes through the link (each node's pods, the Services).
    pub routes: Vec<String>,
    /// The run directory.
    pub run_dir: PathBuf,
    /// Each node's traces (of the nodes that were running).
    pub nodes: Vec<NodeFootprint>,
}

/// The traces of one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFootprint {
    /// The node's name.
    pub name: String,
    /// `/proc/<pid>/ns/pid` of the node's processes, e.g. `pid:[4026532291]`.
    pub pid_namespace: String,
    /// `/proc/<pid>/ns/net` of the node.
    pub net_namespace: String,
    /// The node's pod range, e.g. `10.214.3.0/24`.
    pub pod_cidr: String,
    /// The node's cgroup root name (without the leading `/`).
    pub cgroup: String,
    /// When this was recorded, in clock ticks since boot.
    pub recorded_at: u64,
}

/// Clock ticks since boot now (`/proc/uptime`, in the kernel's fixed 100 ticks per second).
pub fn ticks_now() -> u64 {
    let uptime = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    uptime.split_whitespace().next().and_then(uptime_ticks).unwrap_or_default()
}

/// `/proc/uptime`'s seconds with two decimals (`35382.03`) as ticks, exactly. Not through a float:
/// `35382.03 * 100.0` is `3538202.999…`, one tick short, which made a process started in this
/// very tick look younger than the record.
fn uptime_ticks(seconds: &str) -> Option<u64> {
    let (whole, hundredths) = seconds.split_once('.').unwrap_or((seconds, "0"));
    let hundredths = format!("{hundredths:0<2}");
    Some(whole.parse::<u64>().ok()? * 100 + hundredths.get(..2)?.parse::<u64>().ok()?)
}

/// When `pid` started, in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (which may hold spaces): state is field 3, starttime 22.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// The interface index of the host's link `name`, if it exists.
pub fn link_index(name: &str) -> Option<u32> {
    std::fs::read_to_string(Path::new("/sys/class/net").join(name).join("ifindex")).ok()?.trim().parse().ok()
}

/// Live processes whose namespace of `kind` is `namespace` and that started by `before`.
fn processes_in(kind: &str, namespace: &str, before: u64) -> Vec<u32> {
    if namespace.is_empty() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).is_ok_and(|l| l.to_string_lossy() == namespace)
                && alive(*pid)
                && start_ticks(*pid).is_some_and(|t| t <= before)
        })
        .collect()
}

impl NodeFootprint {
    /// Everything of this node still present, described; empty when nothing is left.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        let in_node = processes_in("pid", &self.pid_namespace, self.recorded_at);
        if !in_node.is_empty() {
            left.push(format!("processes in {}'s pid namespace {in_node:?}", self.name));
        }
        let in_net = processes_in("net", &self.net_namespace, self.recorded_at);
        if !in_net.is_empty() {
            left.push(format!("processes in {}'s network namespace {in_net:?}", self.name));
        }
        super::cgroups::sweep_stale();
        if super::cgroups::existing_roots().contains(&self.cgroup) {
            left.push(format!("{}'s cgroup {}", self.name, self.cgroup));
        }
        left
    }

    /// What the host's iptables rules would mention if a rule of this node had leaked there:
    /// its pod range's first three octets, e.g. `10.214.3.`.
    fn pod_prefix(&self) -> String {
        let network = self.pod_cidr.split('/').next().unwrap_or_default();
        network.rsplit_once('.').map(|(head, _)| format!("{head}.")).unwrap_or_default()
    }
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
        for node in &self.nodes {
            left.extend(node.leftovers());
        }
        let in_network = processes_in("net", &self.network_namespace, self.recorded_at);
        if !in_network.is_empty() {
            left.push(format!("processes in the cluster network's namespace {in_network:?}"));
        }
        // Routes through the link go with it; with another run's link of that name they are
        // that run's.
        if self.link_index.is_some() && link_index(&self.link) == self.link_index {
            left.push(format!("link {}", self.link));
            for destination in &self.routes {
                if let Ok(routes) = super::sandbox::run("ip", &["route", "show", destination, "dev", &self.link])
                    && !routes.trim().is_empty()
                {
                    left.push(format!("route {destination} {}", routes.trim()));
                }
            }
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
            let prefixes: Vec<String> =
                self.nodes.iter().map(NodeFootprint::pod_prefix).filter(|p| !p.is_empty()).collect();
            let ours: Vec<&str> = rules.lines().filter(|l| prefixes.iter().any(|p| l.contains(p.as_str()))).collect();
            if !ours.is_empty() {
                left.push(format!("host iptables rules {ours:?}"));
            }
        }
        left
    }

    /// The traces of the node named `name`, if it was running when they were recorded.
    pub fn node(&self, name: &str) -> Option<&NodeFootprint> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaked_rule_is_recognised_by_its_pod_range() {
        let node = NodeFootprint {
            name: "n".into(),
            pid_namespace: String::new(),
            net_namespace: String::new(),
            pod_cidr: "10.216.12.0/24".into(),
            cgroup: "myownshell-node-0-0-2".into(),
            recorded_at: 0,
        };
        assert_eq!(node.pod_prefix(), "10.216.12.");
    }

    #[test]
    fn uptime_is_read_as_exact_ticks() {
        for (uptime, ticks) in
            [("35382.03", Some(3538203)), ("0.10", Some(10)), ("7", Some(700)), ("1.5", Some(150)), ("x.01", None)]
        {
            assert_eq!(uptime_ticks(uptime), ticks, "{uptime}");
        }
    }

    #[test]
    fn processes_started_after_the_record_are_not_ours() {
        let me = std::process::id();
        let ns = std::fs::read_link(format!("/proc/{me}/ns/net")).unwrap().to_string_lossy().into_owned();
        assert!(processes_in("net", &ns, ticks_now()).contains(&me));
        assert!(!processes_in("net", &ns, 0).contains(&me));
        assert_eq!(link_index("lo"), Some(1));
    }
}
