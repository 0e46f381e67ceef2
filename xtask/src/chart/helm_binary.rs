//! Where the `helm` that checks the chart is: `MYOWNSHELL_HELM`, else the cache that
//! `cargo xtask test` and `cargo xtask e2e` build it into (`crate::helm::ensure`). Here, not in
//! xtask's `helm.rs`, because tests/tests/chart.rs looks it up the same way.

use std::path::PathBuf;

use myownshell_envtest::assets::{cache_root, is_executable};

/// The Helm release built and run. Helm 3, as the issue names it: the chart is `apiVersion: v2`
/// and uses nothing Helm 4 changed.
pub const HELM_VERSION: &str = "v3.22.0";
/// The variable naming the `helm` binary to use (the lead's xtask commands set it).
pub const HELM_ENV: &str = "MYOWNSHELL_HELM";
/// Written next to the binary once it is built and verified; it holds how it was built, so a
/// change of recipe rebuilds it.
pub const STAMP: &str = ".complete";
/// File name of the binary.
pub const HELM_BINARY: &str = "helm";

/// `~/.cache/myownshell/helm/<version>/`.
pub fn cache_dir() -> PathBuf {
    cache_root().join("helm").join(HELM_VERSION)
}

/// The `helm` to run: [`HELM_ENV`] if set, else the cached build if it is complete. The error
/// says how to get one.
pub fn locate() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(HELM_ENV).filter(|v| !v.is_empty()).map(PathBuf::from) {
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!("{HELM_ENV}={} is not an executable file", path.display()))
        };
    }
    let dir = cache_dir();
    let binary = dir.join(HELM_BINARY);
    if dir.join(STAMP).is_file() && is_executable(&binary) {
        return Ok(binary);
    }
    Err(format!(
        "helm {HELM_VERSION} not found: {HELM_ENV} is unset and {} is not built; `cargo xtask test` builds it \
         (once, from the Go module proxy) and passes it as {HELM_ENV}, as does `cargo xtask chart --helm`",
        binary.display()
    ))
}
