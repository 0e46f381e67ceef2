//! Where the CPU went during a phase: each process of the cluster and the controller, in CPU
//! seconds (utime + stime from /proc), against what the machine had (cores × wall time). On a
//! small machine the apiserver, etcd and Kubernetes' own controllers share the cores with the
//! controller under test, and this is what says which of them a latency figure is waiting for.

use std::time::{Duration, Instant};

use myownshell_envtest::kwok::KwokCluster;
use myownshell_envtest::process::cpu_time;

/// CPU times of named processes at one moment.
pub(crate) struct CpuMeter {
    start: Instant,
    before: Vec<(String, u32, Duration)>,
}

/// Every process to account for: the control plane, Kubernetes' controllers, kwok, the
/// controller under test (`controller`) and this benchmark.
fn processes(cluster: &KwokCluster, controller: u32) -> Vec<(String, u32)> {
    let cp = cluster.control_plane().pids();
    let mut all: Vec<(String, u32)> = ["etcd", "kube-apiserver"].iter().map(|n| (*n).to_owned()).zip(cp).collect();
    all.extend(cluster.pids().into_iter().map(|(n, p)| (n.to_owned(), p)));
    all.push(("myownshell-controller".to_owned(), controller));
    all.push(("this benchmark".to_owned(), std::process::id()));
    all
}

impl CpuMeter {
    /// Start measuring (the apiserver may be restarted between start and stop: its new process
    /// is read then, from zero).
    pub(crate) fn start(cluster: &KwokCluster, controller: u32) -> Self {
        let before =
            processes(cluster, controller).into_iter().map(|(n, p)| (n, p, cpu_time(p).unwrap_or_default())).collect();
        Self { start: Instant::now(), before }
    }

    /// The CPU each used since [`CpuMeter::start`], as one line.
    pub(crate) fn line(&self, cluster: &KwokCluster, controller: u32) -> String {
        let wall = self.start.elapsed();
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let mut used = Vec::new();
        for (name, pid) in processes(cluster, controller) {
            let before = self.before.iter().find(|(n, p, _)| *n == name && *p == pid).map(|(_, _, t)| *t);
            let now = cpu_time(pid).unwrap_or_default();
            used.push((name, now.saturating_sub(before.unwrap_or_default()).as_secs_f64()));
        }
        let total: f64 = used.iter().map(|(_, s)| s).sum();
        let capacity = wall.as_secs_f64() * cores as f64;
        let parts: Vec<String> = used.iter().map(|(n, s)| format!("{n} {s:.1}")).collect();
        format!(
            "CPU s over {wall:.1?} ({cores} cores, {capacity:.0} s): {} = {total:.1} ({:.0}% of the machine)",
            parts.join(", "),
            100.0 * total / capacity
        )
    }
}
