//! kube-controller-manager and kube-scheduler as host processes beside the apiserver, each as its
//! own identity with a kubeconfig of its own. Shared by the real node's cluster ([`crate::node`])
//! and the fake-node cluster ([`crate::kwok`]), so both start the components the same way and
//! differ only in the flags they add.

use std::path::{Path, PathBuf};

use crate::control_plane::{ControlPlane, HarnessError, io_err, write_kubeconfig};
use crate::ports::free_port;
use crate::process::ProcessSpec;

/// The controller-manager's identity: the bootstrap RBAC roles exist for it.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";
/// The scheduler's identity: the bootstrap RBAC roles exist for it.
pub const SCHEDULER_USER: &str = "system:kube-scheduler";

/// Write `dir/kubeconfigs/<name>.kubeconfig` with a client certificate for `user` in `groups`
/// and return its path.
pub fn kubeconfig_file(
    control_plane: &ControlPlane,
    dir: &Path,
    name: &str,
    user: &str,
    groups: &[&str],
) -> Result<PathBuf, HarnessError> {
    let path = dir.join("kubeconfigs").join(format!("{name}.kubeconfig"));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err("creating the kubeconfigs directory"))?;
    }
    write_kubeconfig(&path, &control_plane.kubeconfig_for_user(user, groups)?)?;
    Ok(path)
}

/// kube-controller-manager on a free loopback port, logging next to the apiserver, with `extra`
/// flags after the common ones. Its controllers act as their own ServiceAccounts, as kubeadm
/// sets it up (`--use-service-account-credentials`), so each has its own client and rate limiter.
pub fn controller_manager(
    control_plane: &ControlPlane,
    binary: &Path,
    kubeconfig: &Path,
    extra: &[String],
) -> Result<ProcessSpec, HarnessError> {
    let pki = control_plane.pki_dir();
    let log = control_plane.layout().dir.join("kube-controller-manager.log");
    let port = free_port().map_err(io_err("free port"))?;
    Ok(ProcessSpec::new("kube-controller-manager", binary, log)
        .args([
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--authentication-kubeconfig={}", kubeconfig.display()),
            format!("--authorization-kubeconfig={}", kubeconfig.display()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--root-ca-file={}", pki.join("serving-ca.crt").display()),
            format!("--service-account-private-key-file={}", pki.join("sa.key").display()),
            "--use-service-account-credentials=true".into(),
            "--leader-elect=false".into(),
            "--v=1".into(),
        ])
        .args(extra))
}

/// How kube-scheduler finds the apiserver.
#[derive(Debug, Clone, Copy)]
pub enum SchedulerConnection<'a> {
    /// `--kubeconfig`: the scheduler's defaults for everything else (client QPS 50, burst 100).
    Kubeconfig(&'a Path),
    /// `--config`: a KubeSchedulerConfiguration that names the kubeconfig itself
    /// (`clientConnection.kubeconfig`); the scheduler then ignores `--kubeconfig` and the client
    /// rate flags, so this is the only way to raise them. The kubeconfig is still given for
    /// delegated authentication and authorization, which the file does not cover.
    Config {
        /// The KubeSchedulerConfiguration file.
        config: &'a Path,
        /// The kubeconfig for delegated authentication and authorization.
        kubeconfig: &'a Path,
    },
}

/// kube-scheduler on a free loopback port, logging next to the apiserver.
pub fn scheduler(
    control_plane: &ControlPlane,
    binary: &Path,
    connection: SchedulerConnection<'_>,
) -> Result<ProcessSpec, HarnessError> {
    let log = control_plane.layout().dir.join("kube-scheduler.log");
    let port = free_port().map_err(io_err("free port"))?;
    let (first, kubeconfig) = match connection {
        SchedulerConnection::Kubeconfig(kubeconfig) => (format!("--kubeconfig={}", kubeconfig.display()), kubeconfig),
        SchedulerConnection::Config { config, kubeconfig } => (format!("--config={}", config.display()), kubeconfig),
    };
    Ok(ProcessSpec::new("kube-scheduler", binary, log).args([
        first,
        format!("--authentication-kubeconfig={}", kubeconfig.display()),
        format!("--authorization-kubeconfig={}", kubeconfig.display()),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--leader-elect=false".into(),
        "--v=1".into(),
    ]))
}
