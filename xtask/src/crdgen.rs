//! `cargo xtask crdgen [--check]`: the CRD in `config/crd/` is generated from `api/`, never
//! edited by hand; `--check` (run by `cargo xtask test` and by a unit test in `api`) catches drift.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use myownshell_api::crd;
use myownshell_envtest::assets::workspace_root;

const KUSTOMIZATION_FILE: &str = "config/crd/kustomization.yaml";

/// The generated files: (path relative to the workspace root, contents).
fn generated() -> anyhow::Result<Vec<(&'static str, String)>> {
    let yaml = crd::yaml().context("serializing the CRD")?;
    let class = crd::class_yaml().context("serializing the class CRD")?;
    Ok(vec![(crd::CRD_FILE, yaml), (crd::CLASS_CRD_FILE, class), (KUSTOMIZATION_FILE, crd::kustomization_yaml())])
}

pub fn run(check: bool) -> anyhow::Result<()> {
    let root = workspace_root();
    let mut stale = Vec::new();
    for (rel, contents) in generated()? {
        let path = root.join(rel);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == contents {
            continue;
        }
        if check {
            print_diff(&path, &contents);
            stale.push(rel);
        } else {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("xtask: wrote {rel}");
        }
    }
    if !stale.is_empty() {
        bail!("generated files are stale: {}; run `cargo xtask crdgen`", stale.join(", "));
    }
    if check {
        eprintln!("xtask: crdgen --check: config/crd is up to date");
    }
    Ok(())
}

/// Show a unified diff (committed → generated) with the system `diff`, or say it is missing.
fn print_diff(path: &Path, generated: &str) {
    let tmp: PathBuf = std::env::temp_dir().join(format!("crdgen-{}.yaml", std::process::id()));
    if std::fs::write(&tmp, generated).is_ok() {
        let status = std::process::Command::new("diff").arg("-u").arg(path).arg(&tmp).status();
        if status.is_err() {
            eprintln!("xtask: {} differs from the generated CRD (install `diff` to see how)", path.display());
        }
        let _ = std::fs::remove_file(&tmp);
    }
}
