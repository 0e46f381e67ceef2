//! A node's cgroup root: `/myownshell-node-<pid>-<n>` for a run's first node (and
//! `/myownshell-node-<pid>-<n>-<k>` for its node k ≥ 2) in every cgroup hierarchy, where that
//! node's kubelet (cgroupfs driver) puts all its pods. Each node has its own because a kubelet
//! removes pod cgroups under its root that it does not know of: two sharing one would kill each
//! other's pods. Cgroups are not namespaced like the rest of the sandbox, so they are the one
//! thing removed by hand: when a node stops or is killed, and, for runs whose process was
//! SIGKILLed, by the next run's sweep (which finds every node's root by the run's pid).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CGROUP_FS: &str = "/sys/fs/cgroup";
const PREFIX: &str = "myownshell-node-";
const REMOVE_TIMEOUT: Duration = Duration::from_secs(15);

/// The name of node `number`'s (1-based) root in the run `run_name` (`run-<pid>-<n>`).
pub fn root_name(run_name: &str, number: u8) -> String {
    let run = run_name.trim_start_matches("run-");
    if number <= 1 { format!("{PREFIX}{run}") } else { format!("{PREFIX}{run}-{number}") }
}

/// One node's cgroup root.
#[derive(Debug)]
pub struct CgroupRoot {
    name: String,
}

/// Every mounted hierarchy (cgroup v1 controllers, the named `systemd` one, and a v2 tree).
fn hierarchies() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(CGROUP_FS) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> =
        entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.join("cgroup.procs").exists()).collect();
    if Path::new(CGROUP_FS).join("cgroup.procs").exists() {
        dirs.push(PathBuf::from(CGROUP_FS)); // cgroup v2 only
    }
    dirs
}

/// Remove `dir` and every cgroup below it, deepest first. Fails while a process is still in one.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

impl CgroupRoot {
    /// The root `name` (see [`root_name`]), created in every hierarchy (kubelet insists that
    /// its `cgroupRoot` exists). A new cpuset cgroup starts with no CPUs or memory nodes, so the
    /// parent's are copied in.
    pub fn create(name: &str) -> Result<Self, String> {
        let name = name.to_owned();
        for hierarchy in hierarchies() {
            let dir = hierarchy.join(&name);
            std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
            for file in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(value) = std::fs::read_to_string(hierarchy.join(file)) {
                    std::fs::write(dir.join(file), value.trim())
                        .map_err(|e| format!("writing {}: {e}", dir.join(file).display()))?;
                }
            }
        }
        Ok(Self { name })
    }

    /// `/myownshell-node-<pid>-<n>`, kubelet's `cgroupRoot`.
    pub fn kubelet_path(&self) -> String {
        format!("/{}", self.name)
    }

    /// Remove the root everywhere, waiting (bounded) for the last processes to leave.
    pub fn remove(&self) -> Result<(), String> {
        remove_everywhere(&self.name)
    }
}

impl Drop for CgroupRoot {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

fn remove_everywhere(name: &str) -> Result<(), String> {
    let deadline = Instant::now() + REMOVE_TIMEOUT;
    loop {
        let failures: Vec<String> = hierarchies()
            .into_iter()
            .filter_map(|h| remove_tree(&h.join(name)).err().map(|e| format!("{}: {e}", h.join(name).display())))
            .collect();
        if failures.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("cgroups left behind: {}", failures.join("; ")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The pid of the run a root of this harness belongs to (the first field after the prefix).
fn owner_pid(name: &str) -> Option<&str> {
    name.strip_prefix(PREFIX).and_then(|rest| rest.split('-').next())
}

/// Remove the cgroup roots (of every node) of runs whose process is gone (SIGKILLed test
/// binaries).
pub fn sweep_stale() {
    let mut stale: Vec<String> = Vec::new();
    for hierarchy in hierarchies() {
        let Ok(entries) = std::fs::read_dir(&hierarchy) else { continue };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = owner_pid(&name) else { continue };
            if !Path::new(&format!("/proc/{pid}")).exists() && !stale.contains(&name) {
                stale.push(name);
            }
        }
    }
    for name in stale {
        let _ = remove_everywhere(&name);
    }
}

/// The names of cgroup roots of this harness that exist now (for the no-orphans test).
pub fn existing_roots() -> Vec<String> {
    let mut names: Vec<String> = hierarchies()
        .iter()
        .filter_map(|h| std::fs::read_dir(h).ok())
        .flat_map(|entries| entries.filter_map(Result::ok))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(PREFIX))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_node_keeps_the_run_name_and_the_sweep_finds_every_node_by_pid() {
        assert_eq!(root_name("run-4242-0", 1), "myownshell-node-4242-0");
        assert_eq!(root_name("run-4242-0", 2), "myownshell-node-4242-0-2");
        for name in [root_name("run-4242-0", 1), root_name("run-4242-3", 12)] {
            assert_eq!(owner_pid(&name), Some("4242"), "{name}");
        }
    }
}
