//! `cargo xtask envtest`: make sure kube-apiserver and etcd exist and print their directory.
//!
//! Lookup order (as in controller-runtime's envtest): `TEST_ASSET_KUBE_APISERVER` /
//! `TEST_ASSET_ETCD`, `KUBEBUILDER_ASSETS`, then the cache `~/.cache/myownshell/envtest/<v>/`.
//! Failing all of those, kube-apiserver is built once from the Go module proxy: a throwaway
//! module requires `k8s.io/kubernetes`, replaces each staging module (read from that version's
//! own go.mod) with its published `v0.<minor>.<patch>`, and builds with the version ldflags so
//! `kube-apiserver --version` reports the real release. etcd is copied out of the
//! `etcd-bin-vendored` crate.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::assets::{self, ETCD, KUBE_APISERVER, KUBERNETES_VERSION};

use crate::go::{build_with_progress, check_go as check_go_or, go_command, mod_download, run_go};
use crate::progress::Step;

const KUBERNETES_MODULE: &str = "k8s.io/kubernetes";
/// Every command the throwaway module builds: one `go mod tidy` serves them all.
const COMMANDS: [&str; 5] = ["kube-apiserver", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"];

fn tools_go() -> String {
    let imports: String = COMMANDS.iter().map(|c| format!("\t_ \"{KUBERNETES_MODULE}/cmd/{c}\"\n")).collect();
    format!("//go:build tools\n\npackage tools\n\nimport (\n{imports})\n")
}
/// Written next to the binaries once they are verified; its absence means "rebuild".
const STAMP: &str = ".complete";

/// Ensure both binaries exist; return the directory holding them (KUBEBUILDER_ASSETS layout).
pub fn ensure() -> anyhow::Result<PathBuf> {
    let overridden = ["TEST_ASSET_KUBE_APISERVER", "TEST_ASSET_ETCD", "KUBEBUILDER_ASSETS"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    if overridden {
        let found = assets::locate().map_err(anyhow::Error::msg)?;
        return assets_dir_for(&found.kube_apiserver, &found.etcd);
    }
    let dir = assets::cache_dir();
    if dir.join(STAMP).exists() && assets::locate().is_ok() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    install_etcd(&dir)?;
    if !assets::is_executable(&dir.join(KUBE_APISERVER)) {
        build_kube_apiserver(&dir)?;
    }
    verify_version(&dir.join(KUBE_APISERVER))?;
    std::fs::write(dir.join(STAMP), format!("kube-apiserver v{KUBERNETES_VERSION}\n"))?;
    Ok(dir)
}

/// With per-binary overrides the two may live apart: link them into one directory so that
/// KUBEBUILDER_ASSETS still has a single answer.
fn assets_dir_for(apiserver: &Path, etcd: &Path) -> anyhow::Result<PathBuf> {
    if apiserver.parent() == etcd.parent()
        && apiserver.file_name() == Some(KUBE_APISERVER.as_ref())
        && etcd.file_name() == Some(ETCD.as_ref())
        && let Some(dir) = apiserver.parent()
    {
        return Ok(dir.to_path_buf());
    }
    let dir = assets::target_dir().join("envtest").join("assets");
    std::fs::create_dir_all(&dir)?;
    for (src, name) in [(apiserver, KUBE_APISERVER), (etcd, ETCD)] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(std::fs::canonicalize(src)?, &link)
            .with_context(|| format!("linking {} into {}", src.display(), dir.display()))?;
    }
    Ok(dir)
}

fn install_etcd(dir: &Path) -> anyhow::Result<()> {
    let target = dir.join(ETCD);
    if assets::is_executable(&target) {
        return Ok(());
    }
    let source = etcd_bin_vendored::etcd_bin_path().map_err(|e| anyhow::anyhow!("{e}"))?;
    let tmp = dir.join(format!(".{ETCD}.tmp"));
    std::fs::copy(source, &tmp).with_context(|| format!("copying etcd from {}", source.display()))?;
    set_executable(&tmp)?;
    std::fs::rename(&tmp, &target)?;
    eprintln!(
        "{} etcd v{} installed from the etcd-bin-vendored crate",
        crate::progress::prefix(),
        myownshell_envtest::assets::ETCD_VERSION
    );
    Ok(())
}

fn set_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn check_go() -> anyhow::Result<String> {
    check_go_or(|| {
        format!(
            "kube-apiserver v{KUBERNETES_VERSION} is not cached in {} and building it needs Go 1.25 or newer on PATH: \
             install Go (e.g. `apt-get install golang-go`), or set KUBEBUILDER_ASSETS to a directory holding kube-apiserver and etcd",
            assets::cache_dir().display()
        )
    })
}

/// The `go`, `godebug` and staging `replace` lines of Kubernetes' own go.mod, rewritten for a
/// module that depends on it.
#[derive(Debug, PartialEq, Eq)]
pub struct GoModParts {
    pub go_line: String,
    pub godebug_lines: Vec<String>,
    pub staging_modules: Vec<String>,
}

/// Read what the throwaway module needs from `k8s.io/kubernetes`'s go.mod.
pub fn parse_kubernetes_go_mod(text: &str) -> anyhow::Result<GoModParts> {
    let mut go_line = None;
    let mut godebug_lines = Vec::new();
    let mut staging_modules = Vec::new();
    let mut in_godebug_block = false;
    for raw in text.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if in_godebug_block {
            if line == ")" {
                in_godebug_block = false;
            } else if !line.is_empty() {
                godebug_lines.push(format!("godebug {line}"));
            }
            continue;
        }
        if line.starts_with("go ") {
            go_line = Some(line.to_owned());
        } else if line == "godebug (" {
            in_godebug_block = true;
        } else if line.starts_with("godebug ") {
            godebug_lines.push(line.to_owned());
        } else if let Some((left, right)) = line.split_once("=>")
            && right.trim().starts_with("./staging/")
        {
            let module = left.trim().trim_start_matches("replace").trim();
            staging_modules.push(module.to_owned());
        }
    }
    let go_line = go_line.context("no `go` line in k8s.io/kubernetes's go.mod")?;
    if staging_modules.is_empty() {
        bail!("no `=> ./staging/…` replace lines in k8s.io/kubernetes's go.mod");
    }
    Ok(GoModParts { go_line, godebug_lines, staging_modules })
}

/// The go.mod of the throwaway build module.
pub fn build_go_mod(parts: &GoModParts, kubernetes_version: &str) -> String {
    let staging_version = staging_version(kubernetes_version);
    let mut out = String::from(
        "// Generated by `cargo xtask envtest`: builds kube-apiserver from the Go module proxy.\nmodule myownshell.local/envtest\n\n",
    );
    out.push_str(&parts.go_line);
    out.push('\n');
    for line in &parts.godebug_lines {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!("\nrequire {KUBERNETES_MODULE} v{kubernetes_version}\n\nreplace (\n"));
    for module in &parts.staging_modules {
        out.push_str(&format!("\t{module} => {module} {staging_version}\n"));
    }
    out.push_str(")\n");
    out
}

/// `1.35.4` → `v0.35.4`: the tag the staging modules are published under.
pub fn staging_version(kubernetes_version: &str) -> String {
    let rest = kubernetes_version.split_once('.').map_or(kubernetes_version, |(_, rest)| rest);
    format!("v0.{rest}")
}

/// `-X` flags that make `kube-apiserver --version` report the release.
pub fn version_ldflags(kubernetes_version: &str) -> String {
    let mut parts = kubernetes_version.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    let pkg = "k8s.io/component-base/version";
    [
        format!("-X {pkg}.gitVersion=v{kubernetes_version}"),
        format!("-X {pkg}.gitMajor={major}"),
        format!("-X {pkg}.gitMinor={minor}"),
        format!("-X {pkg}.gitTreeState=clean"),
        format!("-X {pkg}.buildDate=1970-01-01T00:00:00Z"),
    ]
    .join(" ")
}

fn build_kube_apiserver(dest_dir: &Path) -> anyhow::Result<()> {
    build_kube_binary(dest_dir, KUBE_APISERVER)
}

/// The throwaway module's directory (its module cache holds the Kubernetes sources too).
pub fn build_dir() -> PathBuf {
    assets::cache_root().join("envtest").join(format!("build-{KUBERNETES_VERSION}"))
}

/// Build `k8s.io/kubernetes/cmd/<name>` at the pinned version into `dest_dir/<name>`.
pub fn build_kube_binary(dest_dir: &Path, name: &str) -> anyhow::Result<()> {
    let go = check_go()?;
    let package = format!("{KUBERNETES_MODULE}/cmd/{name}");
    let mut step = Step::start(format!(
        "building {name} v{KUBERNETES_VERSION} with {go} (once; cached in {})",
        dest_dir.display()
    ));
    let work = build_dir();
    std::fs::create_dir_all(&work)?;

    let module = format!("{KUBERNETES_MODULE}@v{KUBERNETES_VERSION}");
    eprintln!("{}   go mod download {module}", crate::progress::prefix());
    let info = mod_download(&work, &module)?;
    let go_mod_path = info.go_mod.context("`go mod download -json` named no GoMod file")?;
    let parts = parse_kubernetes_go_mod(&std::fs::read_to_string(&go_mod_path)?)?;
    std::fs::write(work.join("go.mod"), build_go_mod(&parts, KUBERNETES_VERSION))?;
    std::fs::write(work.join("tools.go"), tools_go())?;

    eprintln!(
        "{}   go mod tidy ({} staging modules replaced with {})",
        crate::progress::prefix(),
        parts.staging_modules.len(),
        staging_version(KUBERNETES_VERSION)
    );
    run_go(&work, &["mod", "tidy"])?;
    let total = run_go(&work, &["list", "-deps", &package])?.lines().count();

    let tmp = dest_dir.join(format!(".{name}.tmp"));
    let ldflags = format!("-s -w {}", version_ldflags(KUBERNETES_VERSION));
    let mut build = go_command(&work);
    build.args(["build", "-v", "-trimpath", "-ldflags", &ldflags, "-o"]).arg(&tmp).arg(&package);
    let mut built = 0usize;
    build_with_progress(build, &format!("go build {name}"), &mut step, |_| {
        built += 1;
        format!("compiled {built} of ~{total} packages")
    })?;
    std::fs::rename(&tmp, dest_dir.join(name))?;
    step.done();
    Ok(())
}

/// `kube-apiserver --version` must print exactly the pinned release (no pre-release suffix).
fn verify_version(binary: &Path) -> anyhow::Result<()> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let want = format!("Kubernetes v{KUBERNETES_VERSION}");
    if printed != want && !printed.starts_with(&format!("{want}+")) {
        bail!("{} --version printed {printed:?}, expected {want:?}; delete it to rebuild", binary.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO_MOD: &str = "module k8s.io/kubernetes\n\ngo 1.25.0\n\ngodebug default=go1.25\n\nrequire (\n\tk8s.io/api v0.0.0\n)\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/client-go => ./staging/src/k8s.io/client-go // comment\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n";

    #[test]
    fn reads_go_godebug_and_staging_lines() {
        let parts = parse_kubernetes_go_mod(GO_MOD).unwrap();
        assert_eq!(parts.go_line, "go 1.25.0");
        assert_eq!(parts.godebug_lines, vec!["godebug default=go1.25"]);
        assert_eq!(parts.staging_modules, vec!["k8s.io/api", "k8s.io/client-go"]);
    }

    #[test]
    fn reads_godebug_blocks() {
        let text = GO_MOD.replace("godebug default=go1.25", "godebug (\n\tdefault=go1.25\n\twinsymlink=0\n)");
        let parts = parse_kubernetes_go_mod(&text).unwrap();
        assert_eq!(parts.godebug_lines, vec!["godebug default=go1.25", "godebug winsymlink=0"]);
    }

    #[test]
    fn rejects_a_go_mod_without_staging_replaces() {
        assert!(parse_kubernetes_go_mod("module x\n\ngo 1.25.0\n").is_err());
    }

    #[test]
    fn builds_the_throwaway_module() {
        let parts = parse_kubernetes_go_mod(GO_MOD).unwrap();
        let out = build_go_mod(&parts, "1.35.4");
        assert!(out.contains("go 1.25.0\ngodebug default=go1.25\n"));
        assert!(out.contains("require k8s.io/kubernetes v1.35.4\n"));
        assert!(out.contains("\tk8s.io/api => k8s.io/api v0.35.4\n"));
        assert!(out.contains("\tk8s.io/client-go => k8s.io/client-go v0.35.4\n"));
        assert!(!out.contains("github.com/x/y"));
    }

    #[test]
    fn version_strings() {
        assert_eq!(staging_version("1.35.4"), "v0.35.4");
        let flags = version_ldflags("1.35.4");
        assert!(flags.contains("version.gitVersion=v1.35.4"));
        assert!(flags.contains("version.gitMinor=35"));
        assert!(flags.contains("version.gitMajor=1"));
    }
}
