//! Building Go tools from the module proxy, as every cached tool needs it (Kubernetes' binaries,
//! kwok, cert-manager, Helm): the `go` command with the settings they all share, a check that Go
//! is there, `go mod download -json`, and a build whose output becomes a progress line.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::progress::Step;

/// `go` in `work_dir`: the local toolchain only, static binaries, modules resolved as needed.
pub(crate) fn go_command(work_dir: &Path) -> Command {
    let mut cmd = Command::new("go");
    cmd.current_dir(work_dir)
        // Never try to download another toolchain: the proxy serves modules, not Go itself.
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod -buildvcs=false");
    cmd
}

/// `go ARGS` in `work_dir`; its standard output.
pub(crate) fn run_go(work_dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = go_command(work_dir)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running go {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("`go {}` failed ({})", args.join(" "), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `go version`, or the error `missing` words (what is not cached, and what else would do).
pub(crate) fn check_go(missing: impl FnOnce() -> String) -> anyhow::Result<String> {
    match Command::new("go").arg("version").env("GOTOOLCHAIN", "local").output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        _ => bail!("{}", missing()),
    }
}

/// What `go mod download -json MODULE` says of a module: where its sources and its go.mod are.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ModDownload {
    pub(crate) dir: Option<String>,
    pub(crate) go_mod: Option<String>,
    error: Option<String>,
}

/// `go mod download -json module` in `work_dir` (a no-op for a module already in the cache).
pub(crate) fn mod_download(work_dir: &Path, module: &str) -> anyhow::Result<ModDownload> {
    let json = run_go(work_dir, &["mod", "download", "-json", module])?;
    let info: ModDownload = serde_json::from_str(&json).context("reading `go mod download -json`")?;
    if let Some(err) = info.error {
        bail!("go mod download {module}: {err}");
    }
    Ok(info)
}

/// Run a `go build -v` or `go install -v` (`cmd`, named `what` in errors), turning each line it
/// prints (a package compiled, a module downloaded) into `step`'s progress through `progress`,
/// which is given the line; on failure the error holds its last 20 lines.
pub(crate) fn build_with_progress(
    mut cmd: Command,
    what: &str,
    step: &mut Step,
    mut progress: impl FnMut(&str) -> String,
) -> anyhow::Result<()> {
    let mut child =
        cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().with_context(|| format!("running {what}"))?;
    let mut last_lines: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let detail = progress(&line);
            step.tick(|| detail);
            last_lines.push_back(line);
            if last_lines.len() > 20 {
                last_lines.pop_front();
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        let last: Vec<String> = last_lines.into();
        bail!("{what} failed ({status}); last output:\n{}", last.join("\n"));
    }
    Ok(())
}

/// `go install -v ARGS` into a scratch GOBIN in `dir`, then a rename to `dir/binary`: the binary
/// appears whole or not at all. The scratch directory is this process's own, so two builds of
/// the same tool at once (`cargo xtask test`'s tools lane, and a `cargo xtask dev` that a test
/// started) never take each other's. Each printed line goes to `progress` (see
/// [`build_with_progress`]).
pub(crate) fn install_whole(
    dir: &Path,
    binary: &str,
    args: &[&str],
    step: &mut Step,
    progress: impl FnMut(&str) -> String,
) -> anyhow::Result<()> {
    let gobin = dir.join(format!(".gobin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&gobin);
    let mut install = go_command(dir);
    install.env("GOBIN", &gobin).args(["install", "-v"]).args(args);
    build_with_progress(install, &format!("go install {binary}"), step, progress)?;
    std::fs::rename(gobin.join(binary), dir.join(binary))?;
    let _ = std::fs::remove_dir_all(&gobin);
    Ok(())
}

/// Build `binary` into `dir` with `go install ARGS` (whole or not at all: [`install_whole`]) as
/// one step, "building WHAT with GO", its progress counting modules downloaded and packages
/// compiled.
pub(crate) fn install_tool(dir: &Path, what: &str, go: &str, binary: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut step = Step::start(format!("building {what} with {go} (once; cached in {})", dir.display()));
    let (mut built, mut downloaded) = (0usize, 0usize);
    install_whole(dir, binary, args, &mut step, |line| {
        if line.starts_with("go: downloading") {
            downloaded += 1;
        } else {
            built += 1;
        }
        format!("{downloaded} modules downloaded, {built} packages compiled")
    })?;
    step.done();
    Ok(())
}

/// A Go tool kept in `~/.cache/myownshell/` (`CachedTool`): the directory its variable names,
/// which must hold it, else its cache folder, where `build` (given the folder and the `go` to
/// run) makes it once when it is missing, and `verify` then checks the binary. `needs` says what
/// building it takes, for the error when that is missing. The directory holding it.
pub fn ensure_cached(
    tool: &myownshell_envtest::assets::CachedTool,
    needs: &str,
    build: impl FnOnce(&std::path::Path, &str) -> anyhow::Result<()>,
    verify: impl FnOnce(&std::path::Path) -> anyhow::Result<()>,
) -> anyhow::Result<std::path::PathBuf> {
    if std::env::var_os(tool.env).is_some_and(|v| !v.is_empty()) {
        tool.locate().map_err(anyhow::Error::msg)?;
        return Ok(tool.dir());
    }
    let dir = tool.cache_dir();
    if tool.locate().is_err() {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let go = check_go(|| {
            format!(
                "{} {} is not cached in {} and building it needs {needs}, or set {} to a directory holding {}",
                tool.name,
                tool.version,
                dir.display(),
                tool.env,
                tool.binary
            )
        })?;
        build(&dir, &go)?;
    }
    let binary = tool.locate().map_err(anyhow::Error::msg)?;
    verify(&binary)?;
    Ok(dir)
}
