//! `cargo xtask envtest --node`: everything a real node needs, made once and cached under
//! `~/.cache/myownshell/` like kube-apiserver: kubelet, kube-controller-manager, kube-scheduler
//! and kube-proxy from the Go module proxy; containerd, runc, the CNI plugins, busybox, umoci,
//! tini, iptables and conntrack from Debian (installed with apt-get when missing and we are
//! root); the pause and shell images built locally. And the operator image, from this
//! workspace's binaries: the dev build for the end-to-end suite, the release build for
//! `cargo xtask bench node` (see [`ImageProfile`]).

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

/// The operator's binaries, as the image holds them.
const OPERATOR_BINARIES: [&str; 4] =
    ["myownshell-controller", "myownshell-webhook", "myownshell-gateway", "myownshell-rbac-proxy"];

/// Which build the operator image is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageProfile {
    /// The dev-profile binaries `cargo xtask test` builds anyway (`cargo build --workspace
    /// --bins`), for the e2e suite: it needs the release's behaviour, not its speed, and the
    /// image then costs no compile of its own (a release build with fat LTO took 13 minutes on
    /// 2 cores, more than a quarter of a cold run). Not stripped: the archive is 51 MB and takes
    /// 4.4 s to pack (40 MB and 3.5 s with `objcopy --strip-debug`), and the line tables give
    /// the pods' backtraces their file:line.
    Dev,
    /// The shipped release build (fat LTO), for `cargo xtask bench node`, which measures it.
    Release,
}

impl ImageProfile {
    /// The profile's directory under the target directory.
    fn dir(self) -> &'static str {
        match self {
            Self::Dev => "debug",
            Self::Release => "release",
        }
    }
}

/// `cargo build --workspace --bins`: what `cargo xtask test` builds before the tests (they run
/// the binaries as processes). The dev operator image is built with the very same command, so
/// after the test's build it is a no-op: building the three packages alone (`-p`) would unify
/// the dependencies' features differently and rebuild them.
pub fn build_workspace_bins(locked: bool) -> Command {
    let mut build = crate::cargo::cargo();
    build.args(["build", "--workspace", "--bins"]);
    if locked {
        build.arg("--locked");
    }
    build
}

fn build_operator(profile: ImageProfile, locked: bool) -> anyhow::Result<()> {
    let mut build = match profile {
        ImageProfile::Dev => build_workspace_bins(locked),
        ImageProfile::Release => {
            let mut build = crate::cargo::cargo();
            build.args(["build", "--release"]);
            for binary in OPERATOR_BINARIES {
                build.args(["-p", binary]);
            }
            if locked {
                build.arg("--locked");
            }
            build
        }
    };
    let step =
        Step::start(format!("cargo build ({} profile: controller, webhook, gateway, rbac-proxy)", profile.dir()));
    let status = build.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build of the operator's binaries failed ({status})");
    }
    step.done();
    Ok(())
}

/// Build the operator's four binaries in `profile`, the static session holder, and the operator
/// image from them and the gateway page's JavaScript (`cargo xtask web`); return the archive's path
/// (`target/images/<debug|release>/operator.tar`, one per profile, so that one never passes for
/// the other). Built again only when a binary or the JavaScript is newer than the archive.
pub fn operator_image(profile: ImageProfile, locked: bool) -> anyhow::Result<PathBuf> {
    build_operator(profile, locked)?;
    let built = assets::target_dir().join(profile.dir());
    let mut binaries: Vec<PathBuf> = OPERATOR_BINARIES.iter().map(|b| built.join(b)).collect();
    binaries.push(crate::session::static_binary(profile == ImageProfile::Release, locked)?);
    let web = crate::web::ensure()?;
    let out_dir = assets::target_dir().join("images").join(profile.dir());
    let archive = out_dir.join(images::OPERATOR_ARCHIVE);
    let inputs = binaries.iter().chain([&web]);
    let newest_binary = inputs.filter_map(|b| b.metadata().and_then(|m| m.modified()).ok()).max();
    let archive_time = archive.metadata().and_then(|m| m.modified()).ok();
    if archive_time.is_some() && archive_time >= newest_binary {
        return Ok(archive);
    }
    let step =
        Step::start(format!("building the operator image {} ({} binaries)", images::OPERATOR_IMAGE, profile.dir()));
    let rootfs = out_dir.join("operator-rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    images::operator_rootfs(&rootfs, &binaries).map_err(anyhow::Error::msg)?;
    images::add_tree(&rootfs, &web.join("@xterm"), images::GATEWAY_ASSETS).map_err(anyhow::Error::msg)?;
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
