//! Where the control-plane binaries live. The lookup order follows controller-runtime's envtest:
//! `TEST_ASSET_KUBE_APISERVER` / `TEST_ASSET_ETCD` for single binaries, then
//! `KUBEBUILDER_ASSETS` for a directory holding both, then our cache
//! (`~/.cache/myownshell/envtest/<version>/`) that `cargo xtask envtest` fills.

use std::path::{Path, PathBuf};

/// The pinned Kubernetes release the test control plane runs. It must share its minor version
/// with the `k8s-openapi` feature in the workspace `Cargo.toml` (`v1_35`).
pub const KUBERNETES_VERSION: &str = "1.35.4";
/// The etcd that `etcd-bin-vendored` ships (pinned in the workspace `Cargo.toml`).
pub const ETCD_VERSION: &str = "3.6.15";

/// File name of the kube-apiserver binary in a `KUBEBUILDER_ASSETS` directory and in the cache
/// (what `cargo xtask envtest` installs it as).
pub const KUBE_APISERVER: &str = "kube-apiserver";
/// File name of the etcd binary in a `KUBEBUILDER_ASSETS` directory and in the cache.
pub const ETCD: &str = "etcd";

/// The two binaries the harness starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assets {
    /// Path of the kube-apiserver executable.
    pub kube_apiserver: PathBuf,
    /// Path of the etcd executable.
    pub etcd: PathBuf,
}

/// `~/.cache/myownshell` (or `$XDG_CACHE_HOME/myownshell`).
pub fn cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("myownshell")
}

/// The cache directory for the pinned version, in the `KUBEBUILDER_ASSETS` layout.
pub fn cache_dir() -> PathBuf {
    cache_root().join("envtest").join(KUBERNETES_VERSION)
}

/// Which variable (or the cache) a binary was taken from, for messages.
fn from_env(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Resolve both binaries without building anything. The error says exactly what is missing
/// and how to get it.
pub fn locate() -> Result<Assets, String> {
    let dir = from_env("KUBEBUILDER_ASSETS");
    let pick = |single_var: &str, name: &str| -> Result<PathBuf, String> {
        let (path, origin) = match (from_env(single_var), &dir) {
            (Some(p), _) => (p, single_var.to_owned()),
            (None, Some(d)) => (d.join(name), "KUBEBUILDER_ASSETS".to_owned()),
            (None, None) => (cache_dir().join(name), "the envtest cache".to_owned()),
        };
        if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "{name} not found at {} (from {origin}); run `cargo xtask envtest` to build it, \
                 or set {single_var} / KUBEBUILDER_ASSETS",
                path.display()
            ))
        }
    };
    Ok(Assets {
        kube_apiserver: pick("TEST_ASSET_KUBE_APISERVER", KUBE_APISERVER)?,
        etcd: pick("TEST_ASSET_ETCD", ETCD)?,
    })
}

/// Whether `path` is a regular file with an execute bit set (for anyone); false if it cannot be
/// read. This is how [`locate`] and [`workspace_binary`] decide that a binary is there.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The workspace root (the tests crate sits one level below it).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or_else(|| manifest.to_path_buf())
}

/// Cargo's target directory (respects `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    from_env("CARGO_TARGET_DIR").unwrap_or_else(|| workspace_root().join("target"))
}

/// A binary of this workspace (`myownshell-controller`, …) in the same profile as the running
/// test. `cargo xtask test` builds every binary before the tests; run `cargo build --bins` first
/// when calling `cargo test` directly.
pub fn workspace_binary(name: &str) -> Result<PathBuf, String> {
    // Test executables live in target/<profile>/deps/; binaries one level up.
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let profile_dir = exe
        .parent()
        .filter(|p| p.ends_with("deps"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| target_dir().join("debug"));
    let path = profile_dir.join(name);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(format!("{} not found: run `cargo build --bins` (cargo xtask test does)", path.display()))
    }
}

/// A Go tool `cargo xtask` builds once from the module proxy into
/// `~/.cache/myownshell/<folder>/<version>/`, or that the directory named by its environment
/// variable holds: where kube-router and Hydra are found, so running them needs no Go.
#[derive(Debug, Clone, Copy)]
pub struct CachedTool {
    /// Its name in messages.
    pub name: &'static str,
    /// Its folder under [`cache_root`].
    pub folder: &'static str,
    /// The release built and run.
    pub version: &'static str,
    /// The variable naming a directory that holds it instead.
    pub env: &'static str,
    /// The binary's file name.
    pub binary: &'static str,
    /// Which commands build it, for the message when it is missing.
    pub built_by: &'static str,
}

impl CachedTool {
    /// `~/.cache/myownshell/<folder>/<version>/`.
    pub fn cache_dir(&self) -> PathBuf {
        cache_root().join(self.folder).join(self.version)
    }

    /// The directory it is taken from: its variable if set, else [`Self::cache_dir`].
    pub fn dir(&self) -> PathBuf {
        std::env::var_os(self.env).filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| self.cache_dir())
    }

    /// The binary, or what is missing and how to get it.
    pub fn locate(&self) -> Result<PathBuf, String> {
        let binary = self.dir().join(self.binary);
        if is_executable(&binary) {
            Ok(binary)
        } else {
            Err(format!(
                "{} {} not found at {}; {} build it, or set {} to a directory holding {}",
                self.name,
                self.version,
                binary.display(),
                self.built_by,
                self.env,
                self.binary
            ))
        }
    }
}
