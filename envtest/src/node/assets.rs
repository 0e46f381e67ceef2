//! What a node needs on this machine: the Kubernetes node binaries that `cargo xtask envtest`
//! builds into the cache next to kube-apiserver, the Debian packages it installs, and the
//! locally built images. [`locate`] finds them all or says, in one message, what is missing
//! and how to get it.

use std::path::{Path, PathBuf};

use crate::assets::{cache_dir, cache_root, is_executable};

/// The Kubernetes binaries a node runs besides the control plane, built from the Go module
/// proxy at the pinned version into [`cache_dir`].
pub const KUBE_BINARIES: [&str; 4] = ["kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"];

/// Debian packages the node uses, each with the file that proves it is installed.
pub const PACKAGES: &[(&str, &str)] = &[
    ("containerd", "/usr/bin/containerd"),
    ("containerd", "/usr/bin/containerd-shim-runc-v2"),
    ("containerd", "/usr/bin/ctr"),
    ("runc", "/usr/sbin/runc"),
    ("containernetworking-plugins", "/usr/lib/cni/bridge"),
    ("containernetworking-plugins", "/usr/lib/cni/host-local"),
    ("containernetworking-plugins", "/usr/lib/cni/portmap"),
    ("busybox-static", "/bin/busybox"),
    ("umoci", "/usr/bin/umoci"),
    ("tini", "/usr/bin/tini"),
    ("iptables", "/usr/sbin/iptables"),
    ("conntrack", "/usr/sbin/conntrack"),
    // kube-router's sets of peer addresses, where NetworkPolicies are enforced (`network_policy`).
    ("ipset", "/usr/sbin/ipset"),
    // The tests' probe image (see `images::PROBE_IMAGE`).
    ("curl", "/usr/bin/curl"),
    ("iproute2", "/usr/sbin/ip"),
    ("util-linux", "/usr/bin/unshare"),
    ("util-linux", "/usr/bin/nsenter"),
    // The e2e suite's browser phase drives the gateway's page in it (`tests/src/browser.rs`).
    ("chromium", "/usr/bin/chromium"),
];

/// Where the CNI plugins are (Debian's containernetworking-plugins).
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// The images every node imports: the pause image and the default shell image.
pub const BASE_IMAGES: [&str; 2] = ["pause.tar", "shell.tar"];

/// The Kubernetes node binaries, found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAssets {
    /// kubelet.
    pub kubelet: PathBuf,
    /// kube-controller-manager.
    pub controller_manager: PathBuf,
    /// kube-scheduler.
    pub scheduler: PathBuf,
    /// kube-proxy.
    pub kube_proxy: PathBuf,
    /// The directory of OCI archives every node imports ([`BASE_IMAGES`]).
    pub images: PathBuf,
}

/// Where `cargo xtask envtest` keeps the locally built base images (OCI archives).
pub fn images_dir() -> PathBuf {
    cache_root().join("images")
}

/// Debian packages that are not installed (each named once).
pub fn missing_packages() -> Vec<&'static str> {
    let mut missing: Vec<&'static str> =
        PACKAGES.iter().filter(|(_, file)| !Path::new(file).exists()).map(|(package, _)| *package).collect();
    missing.dedup();
    missing
}

/// Whether this process runs as root (the node needs it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Find everything a node needs, or say what is missing and how to get it.
pub fn locate() -> Result<NodeAssets, String> {
    let mut problems = Vec::new();
    if !is_root() {
        problems.push("the node needs root (network and mount namespaces, cgroups)".to_owned());
    }
    let missing = missing_packages();
    if !missing.is_empty() {
        problems.push(format!(
            "Debian packages missing: {} (`apt-get install {}`)",
            missing.join(", "),
            missing.join(" ")
        ));
    }
    let dir = cache_dir();
    let absent: Vec<&str> = KUBE_BINARIES.iter().copied().filter(|b| !is_executable(&dir.join(b))).collect();
    if !absent.is_empty() {
        problems.push(format!("{} not built in {} (`cargo xtask envtest --node`)", absent.join(", "), dir.display()));
    }
    let images = images_dir();
    let no_images: Vec<&str> = BASE_IMAGES.iter().copied().filter(|i| !images.join(i).is_file()).collect();
    if !no_images.is_empty() {
        problems.push(format!(
            "images {} not built in {} (`cargo xtask envtest --node`)",
            no_images.join(", "),
            images.display()
        ));
    }
    if !Path::new("/sys/fs/cgroup/memory").is_dir() && !Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        problems.push("no cgroup hierarchy under /sys/fs/cgroup".to_owned());
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(NodeAssets {
        kubelet: dir.join("kubelet"),
        controller_manager: dir.join("kube-controller-manager"),
        scheduler: dir.join("kube-scheduler"),
        kube_proxy: dir.join("kube-proxy"),
        images,
    })
}
