//! `cargo xtask web`: the gateway page's JavaScript from npm, as `gateway/web/package-lock.json`
//! pins it, installed once per lockfile into `~/.cache/myownshell/web/<digest>/node_modules`
//! (`npm ci`, scripts off, npm's own download cache beside it). Nothing of it is committed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::assets::{cache_root, workspace_root};
use myownshell_envtest::web::{ENV, MARKER, cache_dir};
use sha2::{Digest, Sha256};

const FILES: [&str; 2] = ["package.json", "package-lock.json"];

/// The digest of the manifest and lockfile: the cache key.
fn key(source: &Path) -> anyhow::Result<String> {
    let mut digest = Sha256::new();
    for file in FILES {
        let path = source.join(file);
        digest.update(std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    Ok(digest.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// The `node_modules` directory, installed if it is not yet (or [`ENV`]'s, if set).
pub fn ensure() -> anyhow::Result<PathBuf> {
    if let Ok(dir) = myownshell_envtest::web::locate() {
        return Ok(dir);
    }
    let source = workspace_root().join("gateway/web");
    let dir = cache_dir(&key(&source)?);
    let modules = dir.join("node_modules");
    if modules.join(MARKER).is_file() {
        return Ok(modules);
    }
    // Installed beside, then moved into place: a cache entry is whole or absent.
    let work = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    for file in FILES {
        std::fs::copy(source.join(file), work.join(file)).with_context(|| format!("copying {file}"))?;
    }
    let npm_cache = cache_root().join("npm");
    let status = Command::new("npm")
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--cache"])
        .arg(&npm_cache)
        .current_dir(&work)
        .status()
        .context("running npm (Node.js and npm are needed once, to install the gateway page's JavaScript)")?;
    if !status.success() {
        bail!("npm ci in {} failed ({status})", work.display());
    }
    if !work.join("node_modules").join(MARKER).is_file() {
        bail!("npm ci in {} did not install {MARKER}", work.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&work, &dir).with_context(|| format!("moving {} into place", work.display()))?;
    Ok(modules)
}

/// `cargo xtask web`: install, and print where (for `--assets-dir` and [`ENV`]).
pub fn run() -> anyhow::Result<()> {
    let dir = ensure()?;
    println!("{ENV}={}", dir.display());
    Ok(())
}
