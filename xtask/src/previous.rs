//! The previous release, for the e2e suite's upgrade phase: its manifests and its operator image,
//! built from a pinned commit of this repository and cached by commit
//! (`~/.cache/myownshell/previous/<commit>/`), so it is built once per machine, not per run.
//!
//! It is built in the dev profile, as the e2e suite's image of the current release is (see
//! `node::ImageProfile`): a test image needs the release's behaviour, not its speed. And it
//! shares the workspace's build directory (cargo's `build.build-dir`, where the dependencies'
//! compiled artifacts live) with the workspace's dev profile settings, so that dependencies
//! already compiled are not compiled again (the two commits' Cargo.lock differ in one crate of
//! our own). Its final binaries go to a target directory of its own (`--target-dir`), never over
//! the workspace's; its own crates are kept apart from the workspace's by [`OWN_UNITS`].
//!
//! When: right after `cargo xtask` itself was built (`cargo run -p xtask`), before the
//! workspace's `cargo build --workspace --bins`. Cargo resolves a few crates with build scripts
//! (ring, then rustls and kube-client above it) differently for a build of some packages (`-p`,
//! as `cargo run -p xtask` and this build) than for one of the whole workspace, under the same
//! file names. Measured with a copy of a cold run's build directory, taken after the
//! workspace's build: this build compiled 19 crates (its 6; ring, rustls, kube-client and the
//! crates between them, rebuilt in place; bitflags and tower-http) in 1m41s on 2 cores with
//! `cargo test` alongside, instead of the 315 units of a build of its own (3.5 minutes); and the
//! workspace's next build compiled kube-client, kube and our crates again (their dependencies
//! were newer). Built before the workspace's build, ring and rustls are still as xtask's build
//! left them, which this build's match (the same units, by their hashes).

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

/// The previous release's image and manifests, built and cached on first use (its binaries by
/// [`ensure_binaries`], unless that ran before).
pub fn ensure() -> anyhow::Result<PreviousRelease> {
    let dir = cache_dir();
    let release = PreviousRelease { image: dir.join(images::OPERATOR_ARCHIVE), config: dir.join("src/config") };
    if dir.join(STAMP).exists() && release.image.exists() {
        return Ok(release);
    }
    let binaries = ensure_binaries()?;
    let step = Step::start(format!("building the previous release's image ({}) once", &PREVIOUS_RELEASE[..12]));
    let rootfs = dir.join("rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    images::operator_rootfs(&rootfs, &binaries).map_err(anyhow::Error::msg)?;
    let mut spec = images::operator_spec();
    spec.name = PREVIOUS_IMAGE.to_owned();
    images::build_archive(&spec, &rootfs, &release.image, &dir.join("image-build")).map_err(anyhow::Error::msg)?;
    for scratch in [rootfs, dir.join("image-build")] {
        let _ = std::fs::remove_dir_all(scratch);
    }
    std::fs::write(dir.join(STAMP), format!("{PREVIOUS_RELEASE}\n"))?;
    step.done();
    Ok(release)
}

/// The previous release's sources (`src/`) and binaries (`bin/`), built once: the part that
/// needs cargo and no node tool (the image needs `umoci`), so that `cargo xtask test` can build
/// it early, before the workspace's build (see the module's documentation).
pub fn ensure_binaries() -> anyhow::Result<Vec<PathBuf>> {
    let dir = cache_dir();
    let binaries: Vec<PathBuf> = BINARIES.iter().map(|b| dir.join("bin").join(b)).collect();
    // A complete cache (`STAMP`) holds its binaries too, also one written before `bin/` had a
    // stamp of its own.
    let stamped = dir.join("bin").join(STAMP).exists() || dir.join(STAMP).exists();
    if stamped && binaries.iter().all(|b| b.is_file()) {
        return Ok(binaries);
    }
    let step = Step::start(format!("building the previous release ({}) once", &PREVIOUS_RELEASE[..12]));
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).with_context(|| format!("creating {}", src.display()))?;
    export_commit(&src)?;
    let built = build(&src, &dir)?;
    let _ = std::fs::remove_dir_all(dir.join("target"));
    let _ = std::fs::remove_file(dir.join(PROFILE_CONFIG));
    std::fs::write(dir.join("bin").join(STAMP), format!("{PREVIOUS_RELEASE}\n"))?;
    step.done();
    Ok(built)
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

/// The config file (in the cache directory) that gives the previous release's build the
/// workspace's build directory and dev profile.
const PROFILE_CONFIG: &str = "build-config.toml";

/// Build its three binaries in the dev profile into `dir/target`, sharing the workspace's build
/// directory; their paths (copied to `dir/bin`).
fn build(src: &Path, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let target = dir.join("target");
    let config = dir.join(PROFILE_CONFIG);
    std::fs::write(&config, build_config(src)?).with_context(|| format!("writing {}", config.display()))?;
    let mut cargo = crate::cargo::cargo();
    cargo.current_dir(src).args(["build", "--locked", "--config"]).arg(&config);
    for binary in BINARIES {
        cargo.args(["-p", binary]);
    }
    cargo.arg("--target-dir").arg(&target);
    run(&mut cargo, "cargo build of the previous release")?;
    let kept = dir.join("bin");
    std::fs::create_dir_all(&kept)?;
    BINARIES
        .iter()
        .map(|b| {
            let to = kept.join(b);
            std::fs::copy(target.join("debug").join(b), &to).with_context(|| format!("copying {b}"))?;
            Ok(to)
        })
        .collect()
}

const BINARIES: [&str; 3] = ["myownshell-controller", "myownshell-webhook", "myownshell-rbac-proxy"];

/// `build.build-dir`: the workspace's build directory; then the workspace's dev profile (the
/// previous release's manifest has none, and a dependency compiled with other settings is a
/// dependency compiled again; profiles in a config file take precedence over the manifest's);
/// then a setting of its own for each of the previous release's packages (see [`OWN_UNITS`]).
fn build_config(src: &Path) -> anyhow::Result<String> {
    let build_dir = cargo_metadata(&assets::workspace_root())?["build_directory"]
        .as_str()
        .map(str::to_owned)
        .context("cargo metadata names no build_directory (cargo 1.91 or newer has it)")?;
    let manifest = assets::workspace_root().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let profile = dev_profile(&text);
    if profile.is_empty() {
        bail!("{} has no [profile.dev] section to build the previous release with", manifest.display());
    }
    let members = cargo_metadata(src)?["packages"]
        .as_array()
        .map(|packages| packages.iter().filter_map(|p| p["name"].as_str().map(str::to_owned)).collect::<Vec<_>>())
        .unwrap_or_default();
    if members.is_empty() {
        bail!("cargo metadata lists no package in the previous release");
    }
    // A JSON string is a TOML basic string (the same escapes).
    let mut config = format!("[build]\nbuild-dir = {}\n\n{profile}", serde_json::to_string(&build_dir)?);
    for member in members {
        config.push_str(&format!("\n[profile.dev.package.{}]\n{OWN_UNITS}", serde_json::to_string(&member)?));
    }
    Ok(config)
}

/// The profile settings of the previous release's own packages. They must differ from anything
/// the workspace builds its packages with: cargo names a package of a workspace by its path
/// within the workspace, not by its absolute path (a workspace may move), so the previous
/// release's `controller/` would otherwise be the same unit as the current `controller/`, in the
/// same build directory: one build would take the other's artifacts as its own, fresh. These
/// two change no behaviour: the number of code-generation units (an odd one no one picks), and
/// no incremental caches (it is built once).
const OWN_UNITS: &str = "codegen-units = 251\nincremental = false\n";

/// `cargo metadata --no-deps` of the workspace in `dir`.
fn cargo_metadata(dir: &Path) -> anyhow::Result<serde_json::Value> {
    let out = crate::cargo::cargo()
        .current_dir(dir)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running cargo metadata in {}", dir.display()))?;
    if !out.status.success() {
        bail!("cargo metadata in {} failed ({})", dir.display(), out.status);
    }
    serde_json::from_slice(&out.stdout).context("reading cargo metadata")
}

/// The `[profile.dev]` and `[profile.dev.…]` tables of a manifest, as they are written.
fn dev_profile(manifest: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == "[profile.dev]" || trimmed.starts_with("[profile.dev.");
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_profile_tables_are_cut_from_the_manifest() {
        let manifest = "[workspace]\nmembers = []\n\n[profile.dev]\ndebug = 1\n\n[profile.dev.package.\"*\"]\ndebug = false\n# note\n[profile.release]\nlto = true\n[profile.devx]\nx = 1\n";
        assert_eq!(
            dev_profile(manifest),
            "[profile.dev]\ndebug = 1\n\n[profile.dev.package.\"*\"]\ndebug = false\n# note\n"
        );
    }

    #[test]
    fn the_workspace_has_a_dev_profile_to_share() {
        let manifest = std::fs::read_to_string(assets::workspace_root().join("Cargo.toml")).unwrap();
        assert!(dev_profile(&manifest).starts_with("[profile.dev]\n"));
    }
}
