//! A node's sandbox: new pid, mount and network namespaces, like a Kind node container but
//! without a container engine, so the kernel does the cleaning up.
//!
//! `unshare --pid --fork --kill-child --mount --net --mount-proc` starts `tini` as pid 1 of a
//! new pid namespace; containerd, kubelet and kube-proxy join it through `nsenter`, and
//! containerd's shims and every container live below it. When the sandbox goes (stopped,
//! killed as a machine losing power, or its test process SIGKILLed: the harness starts every
//! child with a parent-death signal, and `--kill-child` passes it on to pid 1), the kernel kills
//! every process in the pid namespace, the mount namespace with all its mounts (overlays,
//! volumes, the pods' network namespaces bound under its private `/run`) is released, and with
//! the network namespace go the bridge, the pods' veths, kube-proxy's iptables rules and the
//! node's `eth0`, which takes its port on the cluster network with it. Nothing of a node is left
//! on the host but empty cgroups, which [`super::cgroups`] removes.
//!
//! The node's `eth0` is plugged in by [`super::network`], which also says what addresses and
//! routes [`Sandbox::configure`] gives it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::control_plane::HarnessError;
use crate::process::{ManagedProcess, ProcessSpec};

use super::network::NodeLink;

const START_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running sandbox.
#[derive(Debug)]
pub struct Sandbox {
    unshare: ManagedProcess,
    init_pid: u32,
}

/// Run a host command; its stderr is the error.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("`{program} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn ns_link(pid: u32, ns: &str) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).ok()
}

fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?.split_whitespace().next()?.parse().ok()
}

impl Sandbox {
    /// Create the namespaces. `dir` holds the sandbox's log.
    pub fn start(dir: &Path) -> Result<Self, HarnessError> {
        let spec = ProcessSpec::new("node-sandbox", "unshare", dir.join("sandbox.log")).args([
            "--pid",
            "--fork",
            "--kill-child",
            "--mount",
            "--net",
            "--mount-proc",
            "--",
            "tini",
            "--",
            "sleep",
            "infinity",
        ]);
        let mut unshare = ManagedProcess::spawn(spec)
            .map_err(|source| HarnessError::Io { context: "starting the node sandbox".into(), source })?;
        let own_net = ns_link(std::process::id(), "net");
        let deadline = Instant::now() + START_TIMEOUT;
        let init_pid = loop {
            let pid = unshare.pid();
            let init = child_of(pid).filter(|init| ns_link(*init, "pid") != ns_link(pid, "pid"));
            if let Some(init) = init
                && ns_link(pid, "net").is_some()
                && ns_link(pid, "net") != own_net
            {
                break init;
            }
            if let Some(status) = unshare.exit_status() {
                return Err(HarnessError::Start(format!(
                    "the node sandbox exited ({status}): {}",
                    unshare.log_tail(10)
                )));
            }
            if Instant::now() > deadline {
                return Err(HarnessError::Start("the node sandbox's namespaces did not appear in 10s".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Self { unshare, init_pid })
    }

    /// Once the cluster [`super::network::Network`] has given the node its `eth0`: its address
    /// and routes, and inside: a private `/run` and `/var/lib/cni` (containerd's and runc's
    /// state, the pods' network namespaces, iptables' lock, CNI's cache), shared mount
    /// propagation for kubelet, forwarding, and bridged traffic through iptables so Services work
    /// between pods on the bridge.
    pub fn configure(&self, link: &NodeLink) -> Result<(), String> {
        let routes: String =
            link.routes.iter().map(|(cidr, via)| format!("ip route add {cidr} via {via} dev eth0\n")).collect();
        let script = format!(
            "set -e
mount --make-rshared /
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /var/lib/cni
mount -t tmpfs -o mode=0755 tmpfs /var/lib/cni
ip link set lo up
ip addr add {address} dev eth0
ip link set eth0 up
ip route add default via {gateway}
{routes}echo 1 > /proc/sys/net/ipv4/ip_forward
echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
",
            address = link.address,
            gateway = link.gateway,
        );
        let pid = self.init_pid.to_string();
        run("nsenter", &["-t", &pid, "-m", "-n", "--", "sh", "-c", &script]).map(drop)
    }

    /// `spec` run inside the sandbox (its pid, mount and network namespaces).
    pub fn inside(&self, spec: ProcessSpec) -> ProcessSpec {
        let mut args: Vec<std::ffi::OsString> =
            ["-t", &self.init_pid.to_string(), "-m", "-n", "-p", "--"].iter().map(Into::into).collect();
        args.push(spec.program.into_os_string());
        args.extend(spec.args);
        ProcessSpec { program: "nsenter".into(), args, ..spec }
    }

    /// The pid (on the host) of the sandbox's pid 1.
    pub fn init_pid(&self) -> u32 {
        self.init_pid
    }

    /// `/proc/<pid 1>/ns/<kind>` of the sandbox, e.g. `net:[4026532291]`; empty once it is gone.
    pub fn namespace(&self, kind: &str) -> String {
        std::fs::read_link(format!("/proc/{}/ns/{kind}", self.init_pid))
            .map(|l| l.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Stop everything in the sandbox (SIGTERM to pid 1, whose end kills the rest) and wait
    /// until pid 1 is gone.
    pub fn stop(&mut self) -> Result<(), String> {
        let _ = self.unshare.stop(Duration::from_secs(1));
        self.wait_gone()
    }

    /// Kill the sandbox at once, as a machine losing power: SIGKILL to `unshare` and pid 1, and
    /// the kernel SIGKILLs everything else in the pid namespace.
    pub fn kill(&mut self) -> Result<(), String> {
        let _ = self.unshare.kill();
        self.wait_gone()
    }

    /// Wait until pid 1 is gone (the kernel reaps the whole pid namespace before that). The
    /// network namespace is freed asynchronously after; see
    /// [`super::network::Network::wait_detached`].
    fn wait_gone(&self) -> Result<(), String> {
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Path::new(&format!("/proc/{}", self.init_pid)).exists() {
            if Instant::now() > deadline {
                return Err(format!("the node sandbox's pid 1 did not go away in {STOP_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
