//! `cargo xtask envtest --node`: everything a real node needs, made once and cached under
//! `~/.cache/myownshell/` like kube-apiserver: kubelet, kube-controller-manager, kube-scheduler
//! and kube-proxy from the Go module proxy; containerd, runc, the CNI plugins, busybox, umoci,
//! tini, iptables and conntrack from Debian (installed with apt-get when missing and we are
//! root); the pause and shell images built locally. And the operator image, from this
//! workspace's release binaries, for the end-to-end suite and `cargo xtask dev`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::assets::{self, KUBERNETES_VERSION};
use myownshell_envtest::node::assets::{self as node_assets, KUBE_BINARIES, images_dir, is_root, missing_packages};
use myownshell_envtest::node::images;

use crate::progress::Step;

/// Install, build and cache every node piece; return the images directory.
pub fn ensure() -> anyhow::Result<PathBuf> {
    if !is_root() {
        bail!("the node needs root (network and mount namespaces, cgroups, containerd)");
    }
    install_packages()?;
    let dir = assets::cache_dir();
    for binary in KUBE_BINARIES {
        if !assets::is_executable(&dir.join(binary)) {
            crate::envtest::build_kube_binary(&dir, binary)?;
        }
    }
    build_base_images()?;
    node_assets::locate().map_err(anyhow::Error::msg)?;
    Ok(images_dir())
}

fn install_packages() -> anyhow::Result<()> {
    let missing = missing_packages();
    if missing.is_empty() {
        return Ok(());
    }
    let step = Step::start(format!("apt-get install {}", missing.join(" ")));
    let update = Command::new("apt-get").args(["update", "-q"]).status().context("running apt-get update")?;
    if !update.success() {
        bail!("`apt-get update` failed ({update})");
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("running apt-get install")?;
    if !status.success() {
        bail!("`apt-get install {}` failed ({status})", missing.join(" "));
    }
    let still = missing_packages();
    if !still.is_empty() {
        bail!("still missing after apt-get install: {}", still.join(", "));
    }
    step.done();
    Ok(())
}

/// Kubernetes' `pause.c`, from the module cache the Go builds filled.
fn pause_source() -> anyhow::Result<PathBuf> {
    let out = Command::new("go")
        .args(["env", "GOMODCACHE"])
        .env("GOTOOLCHAIN", "local")
        .current_dir(crate::envtest::build_dir())
        .output()
        .context("running go env GOMODCACHE")?;
    let cache = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let source = cache.join(format!("k8s.io/kubernetes@v{KUBERNETES_VERSION}/build/pause/linux/pause.c"));
    if !source.is_file() {
        bail!("{} not found (it comes with the kube-apiserver build's module download)", source.display());
    }
    Ok(source)
}

fn build_base_images() -> anyhow::Result<()> {
    let dir = images_dir();
    std::fs::create_dir_all(&dir)?;
    let work = dir.join("work");
    if !dir.join("pause.tar").is_file() {
        let step = Step::start("building the pause image from Kubernetes' pause.c");
        let rootfs = work.join("pause-rootfs");
        let _ = std::fs::remove_dir_all(&rootfs);
        std::fs::create_dir_all(&rootfs)?;
        let binary = work.join("pause");
        let status = Command::new("gcc")
            .args(["-Os", "-static", "-Wall", "-DVERSION=v3.10-myownshell", "-o"])
            .arg(&binary)
            .arg(pause_source()?)
            .status()
            .context("running gcc (Debian's gcc and libc6-dev build the pause binary)")?;
        if !status.success() {
            bail!("compiling pause.c failed ({status})");
        }
        images::pause_rootfs(&rootfs, &binary).map_err(anyhow::Error::msg)?;
        images::build_archive(&images::pause_spec(), &rootfs, &dir.join("pause.tar"), &work.join("pause-build"))
            .map_err(anyhow::Error::msg)?;
        step.done();
    }
    if !dir.join("shell.tar").is_file() {
        let step = Step::start(format!("building the shell image {} from busybox-static", shell_image()));
        let rootfs = work.join("shell-rootfs");
        let _ = std::fs::remove_dir_all(&rootfs);
        images::shell_rootfs(&rootfs, Path::new("/bin/busybox")).map_err(anyhow::Error::msg)?;
        images::build_archive(
            &images::shell_spec(&shell_image()),
            &rootfs,
            &dir.join("shell.tar"),
            &work.join("shell-build"),
        )
        .map_err(anyhow::Error::msg)?;
        step.done();
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// The default image of a MyOwnShell, fully qualified as containerd names it.
pub fn shell_image() -> String {
    let image = myownshell_api::defaults::IMAGE;
    match image.split_once('/') {
        None => format!("docker.io/library/{image}"),
        Some((host, _)) if host.contains('.') || host.contains(':') || host == "localhost" => image.to_owned(),
        Some(_) => format!("docker.io/{image}"),
    }
}

/// Build the three binaries in release mode and the operator image from them; return the
/// archive's path (`target/images/operator.tar`).
pub fn operator_image(locked: bool) -> anyhow::Result<PathBuf> {
    let step = Step::start("cargo build --release (controller, webhook, rbac-proxy)");
    let mut build = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    build.args([
        "build",
        "--release",
        "-p",
        "myownshell-controller",
        "-p",
        "myownshell-webhook",
        "-p",
        "myownshell-rbac-proxy",
    ]);
    if locked {
        build.arg("--locked");
    }
    let status = build.status().context("running cargo build --release")?;
    if !status.success() {
        bail!("cargo build --release failed ({status})");
    }
    step.done();
    let release = assets::target_dir().join("release");
    let binaries: Vec<PathBuf> = ["myownshell-controller", "myownshell-webhook", "myownshell-rbac-proxy"]
        .iter()
        .map(|b| release.join(b))
        .collect();
    let out_dir = assets::target_dir().join("images");
    let archive = out_dir.join(images::OPERATOR_ARCHIVE);
    let newest_binary = binaries.iter().filter_map(|b| b.metadata().and_then(|m| m.modified()).ok()).max();
    let archive_time = archive.metadata().and_then(|m| m.modified()).ok();
    if archive_time.is_some() && archive_time >= newest_binary {
        return Ok(archive);
    }
    let step = Step::start(format!("building the operator image {}", images::OPERATOR_IMAGE));
    let rootfs = out_dir.join("operator-rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    images::operator_rootfs(&rootfs, &binaries).map_err(anyhow::Error::msg)?;
    images::build_archive(&images::operator_spec(), &rootfs, &archive, &out_dir.join("operator-build"))
        .map_err(anyhow::Error::msg)?;
    let _ = std::fs::remove_dir_all(&rootfs);
    step.done();
    Ok(archive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_image_is_named_as_containerd_names_the_default() {
        assert_eq!(shell_image(), format!("docker.io/library/{}", myownshell_api::defaults::IMAGE));
    }
}
