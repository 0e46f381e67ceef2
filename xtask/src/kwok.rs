//! `cargo xtask kwok`: everything a kwok cluster (`myownshell_envtest::kwok`) runs, made once and
//! cached: kube-controller-manager and kube-scheduler next to kube-apiserver (built the same way),
//! and kwok, built from the Go module proxy with `go install` into
//! `~/.cache/myownshell/kwok/<version>/` together with its configuration. The configuration is cut
//! from the stages kwok's module publishes (not copied into this repository), and written next to
//! the binary so that running a cluster needs no Go.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::kwok::{self, KUBE_BINARIES, KWOK_BINARY, KWOK_CONFIG, KWOK_ENV, KWOK_VERSION};

use crate::go::{install_tool, mod_download};

const MODULE: &str = "sigs.k8s.io/kwok";
/// Written once the binary and its configuration are in place; its absence means "build". It
/// holds what the configuration was cut from, so a change to [`OPTIONS`] or [`STAGES`] rewrites
/// the configuration (the binary is kept).
const STAMP: &str = ".complete";
/// The stages kwok plays, from its module: a fake node turns Ready once, a bound pod turns
/// Running and Ready at once, a deleted pod goes at once. No heartbeat stage (nothing watches
/// node health in a kwok cluster) and no pod-complete (only Jobs' pods complete).
const STAGES: [&str; 3] = [
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
];
/// kwok's options. kwok fills in its defaults only when it is given no configuration at all, so
/// every option that has one is set here (a missing `podPlayStageParallelism` is 0, and kwok
/// refuses to start). Pod IPs come from a /16: kwok's pool never checks the range's end, so a
/// /24 (its default) runs out of range past 254 pods. Lease duration 0: no node Leases to renew.
/// The rest are kwok's defaults, except the debugging and profiling handlers of a server that
/// is not started anyway.
const OPTIONS: &str = "apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.0/16
  nodeLeaseDurationSeconds: 0
  manageAllNodes: false
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  enableDebuggingHandlers: false
  enableProfilingHandler: false
  enableContentionProfiling: false
";

/// Make sure the kwok binary, its configuration, and the control plane and components a kwok
/// cluster runs are there; return the directory holding kwok (what `MYOWNSHELL_KWOK` names).
pub fn ensure() -> anyhow::Result<PathBuf> {
    crate::envtest::ensure()?;
    for name in KUBE_BINARIES {
        if kwok::kube_binary(name).is_err() {
            crate::envtest::build_kube_binary(&assets::cache_dir(), name)?;
        }
    }
    if std::env::var_os(KWOK_ENV).is_some_and(|v| !v.is_empty()) {
        kwok::locate().map_err(anyhow::Error::msg)?;
        return Ok(kwok::kwok_dir());
    }
    let dir = kwok::cache_dir();
    let stamped = std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == stamp());
    if !(stamped && kwok::locate().is_ok()) {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let go = check_go(&dir)?;
        if !assets::is_executable(&dir.join(KWOK_BINARY)) {
            build(&dir, &go)?;
        }
        write_config(&dir)?;
        verify_version(&dir.join(KWOK_BINARY))?;
        std::fs::write(dir.join(STAMP), stamp())?;
    }
    kwok::locate().map_err(anyhow::Error::msg)?;
    Ok(dir)
}

fn stamp() -> String {
    format!("kwok {KWOK_VERSION}\nstages: {}\n{OPTIONS}", STAGES.join(" "))
}

fn check_go(dir: &Path) -> anyhow::Result<String> {
    crate::go::check_go(|| {
        format!(
            "kwok {KWOK_VERSION} is not cached in {} and building it needs Go 1.26 or newer on PATH (its go.mod \
             says so): install Go, or set {KWOK_ENV} to a directory holding {KWOK_BINARY} and {KWOK_CONFIG}",
            dir.display()
        )
    })
}

/// Build kwok into `dir` (whole or not at all: `go::install_whole`).
fn build(dir: &Path, go: &str) -> anyhow::Result<()> {
    let package = format!("{MODULE}/cmd/kwok@{KWOK_VERSION}");
    install_tool(dir, &format!("kwok {KWOK_VERSION}"), go, KWOK_BINARY, &["-ldflags=-s -w", &package])
}

/// Cut the configuration from kwok's module (already in the module cache after the build).
fn write_config(dir: &Path) -> anyhow::Result<()> {
    let module = format!("{MODULE}@{KWOK_VERSION}");
    let info = mod_download(dir, &module)?;
    let root = PathBuf::from(info.dir.context("`go mod download -json` named no Dir")?);
    let mut stages = Vec::new();
    for stage in STAGES {
        let path = root.join(stage);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        stages.push((stage, text));
    }
    let tmp = dir.join(format!(".{KWOK_CONFIG}.tmp"));
    std::fs::write(&tmp, kwok_config(&stages))?;
    std::fs::rename(&tmp, dir.join(KWOK_CONFIG))?;
    Ok(())
}

/// The options and the stages as one multi-document YAML file, each stage named by its path.
fn kwok_config(stages: &[(&str, String)]) -> String {
    let mut out = format!("# Written by `cargo xtask kwok` from {MODULE}@{KWOK_VERSION}.\n{OPTIONS}");
    for (path, text) in stages {
        out.push_str(&format!("---\n# {path}\n{}\n", text.trim_end()));
    }
    out
}

fn verify_version(binary: &Path) -> anyhow::Result<()> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !printed.starts_with(&format!("kwok version {KWOK_VERSION} ")) {
        bail!("{} --version printed {printed:?}, expected kwok {KWOK_VERSION}; delete it to rebuild", binary.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_the_options_then_each_stage_in_its_own_document() {
        let stages =
            [("a/node.yaml", "kind: Stage\nmetadata: {name: n}\n\n".to_owned()), ("b/pod.yaml", "kind: Stage".into())];
        let config = kwok_config(&stages);
        let documents: Vec<&str> = config.split("---\n").collect();
        assert_eq!(documents.len(), 3, "{config}");
        assert!(
            documents[0]
                .contains("kind: KwokConfiguration\noptions:\n  cidr: 10.0.0.0/16\n  nodeLeaseDurationSeconds: 0\n")
        );
        assert_eq!(documents[1], "# a/node.yaml\nkind: Stage\nmetadata: {name: n}\n");
        assert_eq!(documents[2], "# b/pod.yaml\nkind: Stage\n");
    }

    #[test]
    fn no_heartbeat_stage_is_played() {
        assert!(STAGES.iter().all(|s| !s.contains("heartbeat")));
    }
}
