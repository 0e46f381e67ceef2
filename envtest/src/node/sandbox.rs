//! The node's sandbox: new pid, mount and network namespaces, like a Kind node container but
//! without a container engine, so the kernel does the cleaning up.
//!
//! `unshare --pid --fork --kill-child --mount --net --mount-proc` starts `tini` as pid 1 of a
//! new pid namespace; containerd, kubelet and kube-proxy join it through `nsenter`, and
//! containerd's shims and every container live below it. When the sandbox goes (stopped, or its
//! test process SIGKILLed: the harness starts every child with a parent-death signal, and
//! `--kill-child` passes it on to pid 1), the kernel kills every process in the pid namespace,
//! the mount namespace with all its mounts (overlays, volumes, the pods' network namespaces
//! bound under its private `/run`) is released, and with the network namespace go the bridge,
//! the pods' veths, kube-proxy's iptables rules and the node's end of the link, which takes the
//! host's end and its route with it. Nothing of a run is left on the host but empty cgroups,
//! which [`super::cgroups`] removes.
//!
//! The link is a veth pair created directly into the sandbox (`ip link add … peer … netns`),
//! so no moment exists where both ends sit on the host. Its name, `mosnode<slot>`, is the
//! lock on the slot: creating it fails if another run holds that slot, and the slot frees
//! itself when that run's sandbox goes. The slot picks the run's addresses:
//! link 10.213.<slot>.0/30 (host .1, node .2), pods 10.214.<slot>.0/24, Services
//! 10.215.<slot>.0/24, so two test binaries never collide.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::control_plane::{HarnessError, Ipv4Net};
use crate::process::{ManagedProcess, ProcessSpec};

const SLOTS: u8 = 250;
const LINK_PREFIX: &str = "mosnode";
const START_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running sandbox and its link to the host.
#[derive(Debug)]
pub struct Sandbox {
    unshare: ManagedProcess,
    init_pid: u32,
    slot: u8,
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
    /// Create the namespaces, the link and the addresses. `dir` holds the sandbox's log.
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
        let slot = claim_slot(unshare.pid())?;
        let sandbox = Self { unshare, init_pid, slot };
        sandbox.configure().map_err(HarnessError::Start)?;
        Ok(sandbox)
    }

    /// Addresses on the host's end and the node's end, routes both ways, and inside: a private
    /// `/run` and `/var/lib/cni` (containerd's and runc's state, the pods' network namespaces,
    /// iptables' lock, CNI's cache), shared mount propagation for kubelet, forwarding, and
    /// bridged traffic through iptables so Services work between pods on the bridge.
    fn configure(&self) -> Result<(), String> {
        let link = self.link_name();
        let host = format!("{}/30", self.host_ip());
        run("ip", &["addr", "add", &host, "dev", &link])?;
        run("ip", &["link", "set", &link, "up"])?;
        let node_ip = self.node_ip().to_string();
        for cidr in [self.pod_cidr(), self.service_cidr()] {
            run("ip", &["route", "add", &cidr.to_string(), "via", &node_ip, "dev", &link])?;
        }
        let script = format!(
            "set -e
mount --make-rshared /
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /var/lib/cni
mount -t tmpfs -o mode=0755 tmpfs /var/lib/cni
ip link set lo up
ip addr add {node_ip}/30 dev eth0
ip link set eth0 up
ip route add default via {host_ip}
echo 1 > /proc/sys/net/ipv4/ip_forward
echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
",
            host_ip = self.host_ip()
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

    /// The slot this run holds (0..250).
    pub fn slot(&self) -> u8 {
        self.slot
    }
    /// The host's end of the link: `mosnode<slot>`.
    pub fn link_name(&self) -> String {
        format!("{LINK_PREFIX}{}", self.slot)
    }
    /// The host's address on the link; kube-apiserver binds to it.
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 1)
    }
    /// The node's address on the link (its InternalIP).
    pub fn node_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 2)
    }
    /// The pods' addresses.
    pub fn pod_cidr(&self) -> Ipv4Net {
        Ipv4Net { network: Ipv4Addr::new(10, 214, self.slot, 0), prefix: 24 }
    }
    /// The Services' ClusterIPs.
    pub fn service_cidr(&self) -> Ipv4Net {
        Ipv4Net { network: Ipv4Addr::new(10, 215, self.slot, 0), prefix: 24 }
    }
    /// The pid (on the host) of the sandbox's pid 1.
    pub fn init_pid(&self) -> u32 {
        self.init_pid
    }

    /// Stop everything in the sandbox and wait until the kernel has released it: pid 1 gone
    /// and the link gone (the network namespace is freed asynchronously).
    pub fn stop(&mut self) -> Result<(), String> {
        let _ = self.unshare.stop(Duration::from_secs(1));
        let link = format!("/sys/class/net/{}", self.link_name());
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            let init_alive = Path::new(&format!("/proc/{}", self.init_pid)).exists();
            let link_present = Path::new(&link).exists();
            if !init_alive && !link_present {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the node sandbox did not go away in {STOP_TIMEOUT:?} (pid 1 alive: {init_alive}, link present: {link_present})"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Create the link with its node end inside the sandbox, on the first free slot.
fn claim_slot(sandbox_pid: u32) -> Result<u8, HarnessError> {
    let pid = sandbox_pid.to_string();
    for slot in 0..SLOTS {
        let name = format!("{LINK_PREFIX}{slot}");
        match run("ip", &["link", "add", &name, "type", "veth", "peer", "name", "eth0", "netns", &pid]) {
            Ok(_) => return Ok(slot),
            Err(e) if e.contains("File exists") => continue,
            Err(e) => return Err(HarnessError::Start(format!("creating the node's link: {e}"))),
        }
    }
    Err(HarnessError::Start(format!("all {SLOTS} node slots are taken (links {LINK_PREFIX}0..)")))
}
