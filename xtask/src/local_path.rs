//! The test cluster's dynamic provisioner (`myownshell_envtest::node::local_path`): Rancher's
//! local-path-provisioner, built from the Go module proxy with `go install` into
//! `~/.cache/myownshell/local-path-provisioner/<version>/` once, with the manifest its module
//! publishes written next to it, so that running it needs no Go.

use std::path::{Path, PathBuf};

use anyhow::Context;
use myownshell_envtest::assets;
use myownshell_envtest::node::local_path::{self, BINARY, ENV, MANIFEST, VERSION};

use crate::go::{install_tool, mod_download};

const MODULE: &str = "github.com/rancher/local-path-provisioner";
/// The manifest, in the module.
const MODULE_MANIFEST: &str = "deploy/local-path-storage.yaml";

/// Make sure the binary and its manifest are there; the directory holding them (what
/// [`ENV`] names).
pub fn ensure() -> anyhow::Result<PathBuf> {
    if std::env::var_os(ENV).is_some_and(|v| !v.is_empty()) {
        local_path::locate().map_err(anyhow::Error::msg)?;
        return Ok(local_path::dir());
    }
    let dir = local_path::cache_dir();
    if local_path::locate().is_err() {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let go = crate::go::check_go(|| {
            format!(
                "local-path-provisioner {VERSION} is not cached in {} and building it needs Go on PATH: install \
                 Go, or set {ENV} to a directory holding {BINARY} and {MANIFEST}",
                dir.display()
            )
        })?;
        if !assets::is_executable(&dir.join(BINARY)) {
            build(&dir, &go)?;
        }
        write_manifest(&dir)?;
    }
    local_path::locate().map_err(anyhow::Error::msg)?;
    Ok(dir)
}

/// Build the binary into `dir` (whole or not at all: `go::install_whole`).
fn build(dir: &Path, go: &str) -> anyhow::Result<()> {
    let package = format!("{MODULE}@{VERSION}");
    install_tool(dir, &format!("local-path-provisioner {VERSION}"), go, BINARY, &["-ldflags=-s -w", &package])
}

/// Copy the module's manifest (in the module cache after the build) next to the binary.
fn write_manifest(dir: &Path) -> anyhow::Result<()> {
    let info = mod_download(dir, &format!("{MODULE}@{VERSION}"))?;
    let root = PathBuf::from(info.dir.context("`go mod download -json` named no Dir")?);
    let text = std::fs::read_to_string(root.join(MODULE_MANIFEST))
        .with_context(|| format!("reading {MODULE_MANIFEST} of {MODULE}@{VERSION}"))?;
    let tmp = dir.join(format!(".{MANIFEST}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(MANIFEST))?;
    Ok(())
}
