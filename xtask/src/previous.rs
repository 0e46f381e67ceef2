//! The previous release, for the e2e suite's upgrade phase: its manifests and its operator image,
//! built from a pinned commit of this repository and cached by commit
//! (`~/.cache/myownshell/previous/<commit>/`), so it is built once per machine, not per run.
//!
//! It is built in the dev profile without debug information, into a target directory of its
//! own: a test image needs the release's behaviour, not its speed, and this takes a quarter of
//! the time of an optimized build with link-time optimization (which `cargo xtask e2e` already
//! pays once, for the current release).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::node::images;

use crate::progress::Step;

/// The previous release: the last commit before lifetimes, honest status and deferred
/// template updates (what users ran before this release).
pub const PREVIOUS_RELEASE: &str = "97e36ca9fb1e88097d51b690f83851d2dca7bf10";
/// The previous release's operator image, as its manifests are rewritten to use it.
pub const PREVIOUS_IMAGE: &str = "localhost/myownshell:previous";
/// Written once the cache is complete; its absence means "build".
const STAMP: &str = ".complete";

/// Where the previous release's image and manifests are.
#[derive(Debug, Clone)]
pub struct PreviousRelease {
    /// The operator image archive (named [`PREVIOUS_IMAGE`]).
    pub image: PathBuf,
    /// Its `config/` tree.
    pub config: PathBuf,
}

fn cache_dir() -> PathBuf {
    assets::cache_root().join("previous").join(PREVIOUS_RELEASE)
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command.status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// The previous release's image and manifests, built and cached on first use.
pub fn ensure() -> anyhow::Result<PreviousRelease> {
    let dir = cache_dir();
    let release = PreviousRelease { image: dir.join(images::OPERATOR_ARCHIVE), config: dir.join("src/config") };
    if dir.join(STAMP).exists() && release.image.exists() {
        return Ok(release);
    }
    let step = Step::start(format!("building the previous release ({}) once", &PREVIOUS_RELEASE[..12]));
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).with_context(|| format!("creating {}", src.display()))?;
    export_commit(&src)?;
    let binaries = build(&src, &dir.join("target"))?;
    let rootfs = dir.join("rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    images::operator_rootfs(&rootfs, &binaries).map_err(anyhow::Error::msg)?;
    let mut spec = images::operator_spec();
    spec.name = PREVIOUS_IMAGE.to_owned();
    images::build_archive(&spec, &rootfs, &release.image, &dir.join("image-build")).map_err(anyhow::Error::msg)?;
    for scratch in [rootfs, dir.join("image-build"), dir.join("target")] {
        let _ = std::fs::remove_dir_all(scratch);
    }
    std::fs::write(dir.join(STAMP), format!("{PREVIOUS_RELEASE}\n"))?;
    step.done();
    Ok(release)
}

/// The commit's tree, from this repository's history (`git archive`).
fn export_commit(into: &Path) -> anyhow::Result<()> {
    let archive = into.join("source.tar");
    run(
        Command::new("git")
            .arg("-C")
            .arg(assets::workspace_root())
            .args(["archive", "--format=tar", "-o"])
            .arg(&archive)
            .arg(PREVIOUS_RELEASE),
        "git archive of the previous release (a shallow clone may lack it: fetch more history)",
    )?;
    run(Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(into), "unpacking the previous release")?;
    let _ = std::fs::remove_file(archive);
    Ok(())
}

/// Build its three binaries (dev profile, no debug information); their paths.
fn build(src: &Path, target: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(src)
        .args(["build", "--locked", "--config", "profile.dev.debug=0"])
        .args(["-p", "myownshell-controller", "-p", "myownshell-webhook", "-p", "myownshell-rbac-proxy"])
        .arg("--target-dir")
        .arg(target);
    run(&mut cargo, "cargo build of the previous release")?;
    let binaries = ["myownshell-controller", "myownshell-webhook", "myownshell-rbac-proxy"];
    let kept = cache_dir().join("bin");
    std::fs::create_dir_all(&kept)?;
    binaries
        .iter()
        .map(|b| {
            let to = kept.join(b);
            std::fs::copy(target.join("debug").join(b), &to).with_context(|| format!("copying {b}"))?;
            Ok(to)
        })
        .collect()
}
