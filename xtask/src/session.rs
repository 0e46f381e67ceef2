//! The session holder's binary, static: every shell pod copies it from the operator's image and
//! runs it in the shell's own image, which may have no libc at all (the default, busybox, has
//! none). The host's glibc target with `+crt-static` (the musl target cannot be installed here
//! without the Rust distribution server): the holder resolves no names and loads nothing, so
//! static glibc's limits (NSS, `dlopen`) never apply. Built for its own `--target`, so the flag
//! reaches this binary and its dependencies only, never the host's build of the workspace.

use std::path::PathBuf;

use anyhow::{Context, bail};
use myownshell_envtest::assets;

use crate::progress::Step;

/// The target the static build is for.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Build the static `myownshell-session` (`release` for the release profile); its path.
pub fn static_binary(release: bool, locked: bool) -> anyhow::Result<PathBuf> {
    let profile = if release { "release" } else { "debug" };
    let step = Step::start(format!("cargo build (myownshell-session, static, {profile})"));
    let mut build = crate::cargo::cargo();
    build.args(["build", "-p", "myownshell-session", "--bin", "myownshell-session", "--target", TARGET]);
    if release {
        build.arg("--release");
    }
    if locked {
        build.arg("--locked");
    }
    build.env("RUSTFLAGS", "-C target-feature=+crt-static");
    let status = build.status().context("running cargo build for myownshell-session")?;
    if !status.success() {
        bail!("cargo build of the static myownshell-session failed ({status})");
    }
    step.done();
    Ok(assets::target_dir().join(TARGET).join(profile).join("myownshell-session"))
}

/// The session holder's image (`images::SESSION_IMAGE`) from the static binary (`release` for
/// the release profile), built again when the binary is newer than the archive; the archive's
/// path, for `Cluster::import_image`.
pub fn image(release: bool) -> anyhow::Result<PathBuf> {
    let binary = static_binary(release, crate::cargo::in_ci())?;
    let profile = if release { "release" } else { "debug" };
    let dir = assets::target_dir().join("images").join(profile);
    let archive = dir.join("session.tar");
    let modified = |p: &std::path::Path| p.metadata().and_then(|m| m.modified()).ok();
    if modified(&archive).is_some() && modified(&archive) >= modified(&binary) {
        return Ok(archive);
    }
    myownshell_envtest::node::images::build_session(&binary, &archive, &dir.join("session-work"))
        .map_err(anyhow::Error::msg)?;
    Ok(archive)
}
