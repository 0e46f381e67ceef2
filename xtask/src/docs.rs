//! `cargo xtask docs [--check]`: regenerate the README's flag reference from each binary's
//! `--help`, its table of reasons from `myownshell_api::names::reasons`, its table of doors
//! from `docs/doors.yaml`, and its oauth2-proxy recipe from the e2e's command line (the tests
//! below fail when any drifts).

use crate::readme::{DOCUMENTED_BINARIES, help_text, with_doors, with_flags, with_oauth2_proxy, with_reasons};
use anyhow::{Context, bail};
use myownshell_envtest::assets::{workspace_binary, workspace_root};

pub fn run(check: bool) -> anyhow::Result<()> {
    if !check {
        let status = crate::cargo::cargo().args(["build", "--workspace", "--bins"]).status()?;
        if !status.success() {
            bail!("cargo build failed ({status})");
        }
    }
    let path = workspace_root().join("README.md");
    let current = std::fs::read_to_string(&path).context("reading README.md")?;
    let mut updated = current.clone();
    for binary in DOCUMENTED_BINARIES {
        let exe = std::env::current_exe()?.parent().map(|d| d.join(binary)).filter(|p| p.exists());
        let exe = match exe {
            Some(p) => p,
            None => workspace_binary(binary).map_err(anyhow::Error::msg)?,
        };
        let help = help_text(&exe).map_err(anyhow::Error::msg)?;
        updated = with_flags(&updated, binary, &help)
            .with_context(|| format!("README.md has no <!-- flags:{binary}:start/end --> markers"))?;
    }
    updated = with_reasons(&updated).context("README.md has no <!-- reasons:start/end --> markers")?;
    let doors = std::fs::read_to_string(workspace_root().join("docs/doors.yaml")).context("reading docs/doors.yaml")?;
    updated = with_doors(&updated, &doors).map_err(anyhow::Error::msg)?;
    updated = with_oauth2_proxy(&updated).context("README.md has no <!-- oauth2-proxy:start/end --> markers")?;
    if updated == current {
        eprintln!("xtask: README flag reference and reasons are up to date");
    } else if check {
        bail!("README flag reference or reasons are stale: run `cargo xtask docs`");
    } else {
        std::fs::write(&path, updated)?;
        eprintln!("xtask: README flag reference and reasons regenerated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the binaries in the target directory: `cargo xtask test` builds them first; under a
    /// bare `cargo test -p xtask`, build them (`cargo build --bins`) or it checks stale ones.
    #[test]
    fn flag_reference_matches_every_binary() -> Result<(), String> {
        let current = std::fs::read_to_string(workspace_root().join("README.md")).map_err(|e| e.to_string())?;
        let mut stale = Vec::new();
        for binary in DOCUMENTED_BINARIES {
            let help = help_text(&workspace_binary(binary)?)?;
            let expected = with_flags(&current, binary, &help).ok_or(format!("README lacks the {binary} markers"))?;
            if expected != current {
                stale.push(binary);
            }
        }
        if stale.is_empty() {
            Ok(())
        } else {
            Err(format!("README flags are stale for {stale:?}: run `cargo xtask docs`"))
        }
    }

    #[test]
    fn the_oauth2_proxy_recipe_is_the_command_line_the_e2e_runs() -> Result<(), String> {
        let current = std::fs::read_to_string(workspace_root().join("README.md")).map_err(|e| e.to_string())?;
        match with_oauth2_proxy(&current) {
            Some(expected) if expected == current => Ok(()),
            Some(_) => Err("README's oauth2-proxy recipe is stale: run `cargo xtask docs`".into()),
            None => Err("README.md has no <!-- oauth2-proxy:start/end --> markers".into()),
        }
    }

    #[test]
    fn the_doors_table_is_the_files() -> Result<(), String> {
        let current = std::fs::read_to_string(workspace_root().join("README.md")).map_err(|e| e.to_string())?;
        let doors = std::fs::read_to_string(workspace_root().join("docs/doors.yaml")).map_err(|e| e.to_string())?;
        if with_doors(&current, &doors)? == current {
            Ok(())
        } else {
            Err("README's table of doors is stale: run `cargo xtask docs`".into())
        }
    }

    #[test]
    fn the_reasons_table_lists_every_reason() -> Result<(), String> {
        let current = std::fs::read_to_string(workspace_root().join("README.md")).map_err(|e| e.to_string())?;
        match with_reasons(&current) {
            Some(expected) if expected == current => Ok(()),
            Some(_) => Err("README reasons table is stale: run `cargo xtask docs`".into()),
            None => Err("README lacks the <!-- reasons:start/end --> markers".into()),
        }
    }
}
