//! The OIDC test bed's provider (`myownshell_envtest::oidc::hydra`): Ory Hydra, built from the Go
//! module proxy into `~/.cache/myownshell/hydra/<version>/` once (like kube-router and kwok), so
//! that running it needs no Go.
//!
//! Why not `go install MODULE@VERSION`: Hydra's go.mod has `replace` directives, which `go
//! install` refuses in the module it installs. So the build goes through a throwaway module of
//! our own (`build-<version>/`, its go.sum recording what was built) that requires Hydra as a
//! tool (`go get -tool`), with Hydra's replaces copied in where the proxy can serve them: its
//! fork of pop, without which Hydra does not compile. The other one points at a directory of
//! Hydra's repository that the proxy's module zip leaves out (its generated client, a module of
//! its own); the released client the proxy serves takes its place, and `hydra serve` never uses
//! it.
//!
//! Why cgo: `dsn: memory` is SQLite, which Hydra has only through go-sqlite3 (cgo), behind the
//! `sqlite` build tag, as its Makefile builds it. So this one build needs a C compiler, and the
//! binary links the C library dynamically (it runs on this machine, never in an image).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::oidc::hydra::{self, BINARY, VERSION};

use crate::go::{build_with_progress, go_command, mod_download, run_go};
use crate::progress::Step;

/// The module; its root package is the `hydra` command.
const MODULE: &str = "github.com/ory/hydra/v2";
/// Where Hydra's release builds stamp the version (`hydra version` prints it).
const VERSION_VARIABLE: &str = "github.com/ory/hydra/v2/driver/config.Version";
/// SQLite in, its extension loading out: the tags of Hydra's own Makefile.
const TAGS: &str = "sqlite,sqlite_omit_load_extension";

/// Make sure Hydra is there; the directory holding it (what its variable names).
pub fn ensure() -> anyhow::Result<PathBuf> {
    let needs = "Go (and a C compiler, for SQLite) on PATH: install them";
    crate::go::ensure_cached(&hydra::TOOL, needs, build, verify_version)
}

/// The throwaway module's directory.
fn build_dir() -> PathBuf {
    assets::cache_root().join("hydra").join(format!("build-{VERSION}"))
}

/// Build the binary into `dir`, whole or not at all (a scratch name, then a rename).
fn build(dir: &Path, go: &str) -> anyhow::Result<()> {
    let mut step = Step::start(format!("building Hydra {VERSION} with {go} (once; cached in {})", dir.display()));
    let work = build_dir();
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    std::fs::write(work.join("go.mod"), "module myownshell/hydra-build\n\ngo 1.26.0\n")?;
    let package = format!("{MODULE}@{VERSION}");
    let info = mod_download(&work, &package)?;
    let go_mod = info.go_mod.context("`go mod download -json` named no GoMod")?;
    let go_mod = std::fs::read_to_string(&go_mod).with_context(|| format!("reading {go_mod}"))?;
    for (old, new) in module_replaces(&go_mod) {
        run_go(&work, &["mod", "edit", &format!("-replace={old}={new}")])?;
    }
    run_go(&work, &["get", "-tool", &package])?;

    let scratch = dir.join(format!(".{BINARY}-{}", std::process::id()));
    let mut build = go_command(&work);
    // SQLite is C (see the module docs); everything else stays as `go_command` sets it.
    build.env("CGO_ENABLED", "1").args(build_args(&scratch));
    let mut built = 0usize;
    build_with_progress(build, "go build of Hydra", &mut step, |_| {
        built += 1;
        format!("{built} packages compiled")
    })?;
    std::fs::rename(&scratch, dir.join(BINARY)).with_context(|| format!("moving the build into {}", dir.display()))?;
    step.done();
    Ok(())
}

/// `go build` arguments: the version stamped in as Hydra's release does, symbols stripped,
/// SQLite in, the binary written to `output`.
fn build_args(output: &Path) -> Vec<String> {
    vec![
        "build".into(),
        "-v".into(),
        "-trimpath".into(),
        format!("-tags={TAGS}"),
        format!("-ldflags=-s -w -X {VERSION_VARIABLE}={VERSION}"),
        "-o".into(),
        output.display().to_string(),
        MODULE.into(),
    ]
}

/// The `replace` directives of a go.mod that name a module version (`old[@v]`, `new@v`), in
/// order; those that name a local directory are left out (the proxy's zip has none of it).
fn module_replaces(go_mod: &str) -> Vec<(String, String)> {
    let mut replaces = Vec::new();
    let mut in_block = false;
    for line in go_mod.lines().map(|l| l.split("//").next().unwrap_or_default().trim()) {
        let directive = if in_block {
            if line == ")" {
                in_block = false;
                continue;
            }
            line
        } else if line == "replace (" {
            in_block = true;
            continue;
        } else if let Some(rest) = line.strip_prefix("replace ") {
            rest
        } else {
            continue;
        };
        let Some((old, new)) = directive.split_once("=>") else { continue };
        let (old, new): (Vec<&str>, Vec<&str>) = (old.split_whitespace().collect(), new.split_whitespace().collect());
        let old = match old.as_slice() {
            [path] => (*path).to_owned(),
            [path, version] => format!("{path}@{version}"),
            _ => continue,
        };
        if let [path, version] = new.as_slice() {
            replaces.push((old, format!("{path}@{version}")));
        }
    }
    replaces
}

fn verify_version(binary: &Path) -> anyhow::Result<()> {
    let out = Command::new(binary)
        .arg("version")
        .output()
        .with_context(|| format!("running {} version", binary.display()))?;
    // "Version:    v2.3.0" on its first line.
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = printed.lines().find_map(|l| l.strip_prefix("Version:")).map(str::trim);
    if !out.status.success() || version != Some(VERSION) {
        bail!("{} version printed {printed:?}, expected Hydra {VERSION}; delete it to rebuild", binary.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_replaces_are_copied_and_local_directories_left_out() {
        let go_mod = "module github.com/ory/hydra/v2\n\ngo 1.22\n\n\
            replace github.com/ory/hydra-client-go/v2 => ./internal/httpclient\n\n\
            replace github.com/gobuffalo/pop/v6 => github.com/ory/pop/v6 v6.2.1-0.20241121111754-e5dfc0f3344b\n\n\
            replace (\n\tgithub.com/a/b v1.0.0 => github.com/c/d v1.2.0 // pinned\n\tgithub.com/e/f => ../f\n)\n\n\
            require github.com/x/y v1.0.0\n";
        assert_eq!(
            module_replaces(go_mod),
            [
                (
                    "github.com/gobuffalo/pop/v6".to_owned(),
                    "github.com/ory/pop/v6@v6.2.1-0.20241121111754-e5dfc0f3344b".to_owned()
                ),
                ("github.com/a/b@v1.0.0".to_owned(), "github.com/c/d@v1.2.0".to_owned()),
            ]
        );
    }

    #[test]
    fn the_pinned_release_is_built_with_sqlite_its_version_stamped_in_and_symbols_stripped() {
        let args = build_args(Path::new("/cache/.hydra-1"));
        assert!(args.contains(&"-tags=sqlite,sqlite_omit_load_extension".to_owned()), "{args:?}");
        assert!(args.contains(&"-ldflags=-s -w -X github.com/ory/hydra/v2/driver/config.Version=v2.3.0".to_owned()));
        assert_eq!(args.last().map(String::as_str), Some("github.com/ory/hydra/v2"));
    }
}
