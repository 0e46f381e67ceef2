//! Helm for the chart in `dist/chart`: its generator (`cargo xtask chart`, in `chart/`), and the
//! `helm` binary that checks it (`helm lint` and `helm template` in tests/tests/chart.rs) and
//! installs it on the real node (tests/tests/e2e/helm.rs). The binary is built once from the Go
//! module proxy, like the test cluster's Kubernetes binaries, into
//! `~/.cache/myownshell/helm/<version>/`: no Helm release is downloaded.

#[path = "chart/mod.rs"]
pub mod chart;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use chart::helm_binary::{HELM_BINARY, HELM_ENV, HELM_VERSION, STAMP, cache_dir};

use crate::go::{install_whole, mod_download};
use crate::progress::Step;

const MODULE: &str = "helm.sh/helm/v3";

/// `cargo xtask chart [--check] [--helm]`.
pub fn run_chart(check: bool, helm: bool) -> anyhow::Result<()> {
    chart::run(check).map_err(anyhow::Error::msg)?;
    if helm {
        println!("{}", ensure()?.display());
    }
    Ok(())
}

/// Make sure `helm` is there, building it once; return its path (what `MYOWNSHELL_HELM` names).
pub fn ensure() -> anyhow::Result<PathBuf> {
    let dir = cache_dir();
    let overridden = std::env::var_os(HELM_ENV).is_some_and(|v| !v.is_empty());
    if overridden || dir.join(STAMP).is_file() {
        return chart::helm_binary::locate().map_err(anyhow::Error::msg);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let go = check_go(&dir)?;
    let kube = kube_version(&dir)?;
    build(&dir, &go, &kube)?;
    let binary = dir.join(HELM_BINARY);
    verify_version(&binary)?;
    std::fs::write(dir.join(STAMP), format!("helm {HELM_VERSION}\nkubernetes {}.{}\n", kube.0, kube.1))?;
    Ok(binary)
}

fn check_go(dir: &Path) -> anyhow::Result<String> {
    crate::go::check_go(|| {
        format!(
            "helm {HELM_VERSION} is not built in {} and building it needs Go 1.26 or newer on PATH (its go.mod \
             says so): install Go, or set {HELM_ENV} to a helm binary",
            dir.display()
        )
    })
}

/// The Kubernetes version `helm template` and `helm lint` assume, derived as Helm's Makefile
/// does from the client-go it requires (v0.37.x → 1.37). Without it a `go install` of Helm 3
/// assumes 1.20 and refuses the chart's `kubeVersion`.
fn kube_version(dir: &Path) -> anyhow::Result<(u32, u32)> {
    let module = format!("{MODULE}@{HELM_VERSION}");
    let info = mod_download(dir, &module)?;
    let go_mod = info.go_mod.context("`go mod download -json` named no GoMod file")?;
    let text = std::fs::read_to_string(&go_mod).with_context(|| format!("reading {go_mod}"))?;
    client_go_kube_version(&text).with_context(|| format!("no k8s.io/client-go requirement in {go_mod}"))
}

/// `k8s.io/client-go v0.37.0` in a go.mod → (1, 37).
fn client_go_kube_version(go_mod: &str) -> Option<(u32, u32)> {
    let version = go_mod.lines().find_map(|l| l.trim().strip_prefix("k8s.io/client-go v"))?;
    let mut parts = version.split(['.', ' ']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some((major + 1, minor))
}

/// `-ldflags`: the version `helm version` prints, and the Kubernetes version (Helm's Makefile
/// sets the same variables).
fn ldflags(kube: &(u32, u32)) -> String {
    let mut flags =
        vec!["-s".to_owned(), "-w".to_owned(), format!("-X {MODULE}/internal/version.version={HELM_VERSION}")];
    for package in ["pkg/lint/rules", "pkg/chartutil"] {
        flags.push(format!("-X {MODULE}/{package}.k8sVersionMajor={}", kube.0));
        flags.push(format!("-X {MODULE}/{package}.k8sVersionMinor={}", kube.1));
    }
    flags.join(" ")
}

/// Build helm into `dir` (whole or not at all: `go::install_whole`).
fn build(dir: &Path, go: &str, kube: &(u32, u32)) -> anyhow::Result<()> {
    let mut step = Step::start(format!("building helm {HELM_VERSION} with {go} (once; cached in {})", dir.display()));
    let package = format!("{MODULE}/cmd/helm@{HELM_VERSION}");
    let mut lines = 0usize;
    install_whole(dir, HELM_BINARY, &["-trimpath", "-ldflags", &ldflags(kube), &package], &mut step, |_| {
        lines += 1;
        format!("{lines} packages compiled or modules downloaded")
    })?;
    step.done();
    Ok(())
}

fn verify_version(binary: &Path) -> anyhow::Result<()> {
    let out = Command::new(binary)
        .args(["version", "--template", "{{.Version}}"])
        .output()
        .with_context(|| format!("running {} version", binary.display()))?;
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if printed != HELM_VERSION {
        bail!("{} version printed {printed:?}, expected {HELM_VERSION}; delete it to rebuild", binary.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_version_follows_client_go() {
        let go_mod =
            "module helm.sh/helm/v3\n\nrequire (\n\tk8s.io/api v0.37.0\n\tk8s.io/client-go v0.37.2 // indirect\n)\n";
        assert_eq!(client_go_kube_version(go_mod), Some((1, 37)));
        assert_eq!(client_go_kube_version("module x\n"), None);
        let flags = ldflags(&(1, 37));
        assert!(flags.contains("-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"));
        assert!(flags.contains("-X helm.sh/helm/v3/internal/version.version=v3.22.0"));
    }
}
