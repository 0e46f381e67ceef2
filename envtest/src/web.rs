//! The gateway page's JavaScript (xterm.js and its fit add-on), installed by `npm ci` from
//! `gateway/web/package-lock.json` into `~/.cache/myownshell/web/<lockfile digest>/node_modules`
//! (`cargo xtask web`), for the gateway processes tests start and the image the e2e suite runs.

use std::path::PathBuf;

/// A `node_modules` directory to use instead of the cache (what `cargo xtask test` sets).
pub const ENV: &str = "MYOWNSHELL_GATEWAY_ASSETS";
/// A file every complete install has.
pub const MARKER: &str = "@xterm/xterm/lib/xterm.js";

/// The cache directory for a lockfile whose digest is `key`.
pub fn cache_dir(key: &str) -> PathBuf {
    crate::assets::cache_root().join("web").join(key)
}

/// The `node_modules` directory [`ENV`] names; the error says how to make one.
pub fn locate() -> Result<PathBuf, String> {
    let dir = std::env::var_os(ENV).filter(|v| !v.is_empty()).map(PathBuf::from).ok_or_else(|| {
        format!("{ENV} is not set: run `cargo xtask web` and set {ENV} to the node_modules directory it prints")
    })?;
    if dir.join(MARKER).is_file() {
        Ok(dir)
    } else {
        Err(format!("{ENV}={}: no {MARKER} there; run `cargo xtask web`", dir.display()))
    }
}
