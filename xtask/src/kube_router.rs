//! The test cluster's NetworkPolicy enforcer (`myownshell_envtest::node::network_policy`):
//! kube-router, built from the Go module proxy with `go install` into
//! `~/.cache/myownshell/kube-router/<version>/` once (like kwok and local-path-provisioner), so
//! that running it needs no Go. Test bed only: see the README for the advisories published
//! against this version.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::node::network_policy::{self, BINARY, VERSION};

use crate::go::install_tool;

/// The module (its `cmd/kube-router` is the binary).
const MODULE: &str = "github.com/cloudnativelabs/kube-router/v2";
/// Where its Makefile puts the release's version (`kube-router --version` prints it).
const VERSION_VARIABLE: &str = "github.com/cloudnativelabs/kube-router/v2/pkg/version.Version";

/// Make sure kube-router is there; the directory holding it (what its variable names).
pub fn ensure() -> anyhow::Result<PathBuf> {
    crate::go::ensure_cached(&network_policy::TOOL, "Go on PATH: install Go", build, verify_version)
}

/// `go install` arguments: the release's version stamped in as its Makefile does, symbols
/// stripped, then the package at the pinned version.
fn install_args() -> [String; 2] {
    [format!("-ldflags=-s -w -X {VERSION_VARIABLE}={VERSION}"), format!("{MODULE}/cmd/kube-router@{VERSION}")]
}

/// Build the binary into `dir` (whole or not at all: `go::install_whole`).
fn build(dir: &Path, go: &str) -> anyhow::Result<()> {
    let args = install_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    install_tool(dir, &format!("kube-router {VERSION}"), go, BINARY, &args)
}

fn verify_version(binary: &Path) -> anyhow::Result<()> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    // It prints its version on stderr: "Running PATH version v2.1.0, built on , go1.26.8".
    let printed = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if !printed.contains(&format!(" version {VERSION},")) {
        bail!(
            "{} --version printed {printed:?}, expected kube-router {VERSION}; delete it to rebuild",
            binary.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_release_is_built_with_its_version_stamped_in() {
        let [ldflags, package] = install_args();
        assert_eq!(package, "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v2.1.0");
        assert!(ldflags.ends_with(" -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v2.1.0"));
    }
}
