//! oauth2-proxy, which the e2e puts in front of the gateway (`myownshell_envtest::oidc::oauth2_proxy`),
//! built from the Go module proxy into `~/.cache/myownshell/oauth2-proxy/<version>/` once (like
//! Hydra and kwok), so that running it needs no Go. Its go.mod has no `replace` directives, so
//! `go install MODULE@VERSION` builds it as its release does: static (no cgo), the version
//! stamped in where its Makefile stamps it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::oidc::oauth2_proxy::{self, BINARY, MODULE, VERSION};

use crate::go::install_tool;

/// Where its Makefile stamps the version (`oauth2-proxy --version` prints it).
const VERSION_VARIABLE: &str = "github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION";

/// Make sure oauth2-proxy is there; the directory holding it (what its variable names).
pub fn ensure() -> anyhow::Result<PathBuf> {
    let needs = "Go 1.26 or newer on PATH (its go.mod says so): install Go";
    crate::go::ensure_cached(&oauth2_proxy::TOOL, needs, build, verify_version)
}

/// Build the binary into `dir` (whole or not at all: `go::install_tool`).
fn build(dir: &Path, go: &str) -> anyhow::Result<()> {
    let args = install_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    install_tool(dir, &format!("oauth2-proxy {VERSION}"), go, BINARY, &args)
}

/// `go install` arguments: paths trimmed, symbols stripped, the version stamped in.
fn install_args() -> Vec<String> {
    vec!["-trimpath".into(), format!("-ldflags=-s -w -X {VERSION_VARIABLE}={VERSION}"), format!("{MODULE}@{VERSION}")]
}

fn verify_version(binary: &Path) -> anyhow::Result<()> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    // "oauth2-proxy v7.15.6 (built with go1.26.8)"
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || printed.split_whitespace().nth(1) != Some(VERSION) {
        bail!(
            "{} --version printed {printed:?}, expected oauth2-proxy {VERSION}; delete it to rebuild",
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
        let args = install_args();
        assert_eq!(args.last().map(String::as_str), Some("github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6"));
        assert!(args.contains(
            &"-ldflags=-s -w -X github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION=v7.15.6".to_owned()
        ));
    }
}
