//! `cargo xtask test`: the one test command (README, CI).
//!
//! Two lanes run side by side until the tests need both. The `tools` lane (a thread) makes the
//! tools the tests run, which do not depend on the Rust build: the envtest binaries, kwok and what
//! a kwok cluster runs (`cargo xtask kwok`), Helm, Prometheus, and for the node suites the node's
//! pieces and cert-manager. On a cold machine those are Go builds of many minutes; warm, they are
//! cache checks. Meanwhile the `main` lane runs the checks that need nothing from them:
//! `crdgen --check`, the chart check, `cargo fmt --check`, `cargo clippy -D warnings`, a check of
//! the fuzz target and the build of every binary. Then the alert rules (promtool), `cargo test`
//! for the whole workspace with `KUBEBUILDER_ASSETS`, `MYOWNSHELL_KWOK` and `MYOWNSHELL_HELM`
//! pointing at the tools, and the node suites. At the end, where the time went.
//!
//! The two lanes share the machine's cores: the gain is the build's serial stretches (a big crate
//! alone, the links) and the downloads, which the other lane fills. The tests themselves start
//! only once both lanes are done: they time what they run, and must not share the cores with a
//! Go build.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::kubectl::kubectl_binary;

use crate::cargo::{cargo, in_ci, run_tests};
use crate::progress::{self, Step, format_duration, timed};

fn run_step(name: &str, mut cmd: Command) -> anyhow::Result<()> {
    let step = Step::start(name);
    let status = cmd.status().with_context(|| format!("starting {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    step.done();
    Ok(())
}

/// What the tools lane made: where the tests find the tools.
struct Tools {
    assets: PathBuf,
    kwok: PathBuf,
    helm: PathBuf,
    web: PathBuf,
}

pub fn run(extra_args: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    let result = run_all(extra_args, started);
    progress::print_summary(started);
    result
}

fn run_all(extra_args: &[String], started: Instant) -> anyhow::Result<()> {
    check_kubectl()?;
    // Decided before any tool is made: with the node suites, the tools lane makes the node's
    // pieces too (and `cargo xtask dev`, which a test runs, uses the node when it is there).
    let node_suites = crate::e2e::should_run()?;
    let tools = prepare_alongside_checks(node_suites)?;
    // The alerts: promtool checks the PrometheusRule of config/prometheus and runs its unit tests.
    crate::prometheus::check_rules()?;

    let step = Step::start("cargo test --workspace");
    let mut test = cargo();
    // --no-fail-fast: one run reports every failing test binary, not only the first.
    test.args(["test", "--workspace", "--no-fail-fast"])
        .args(locked())
        .args(extra_args)
        .env("KUBEBUILDER_ASSETS", &tools.assets)
        .env(myownshell_envtest::kwok::KWOK_ENV, &tools.kwok)
        .env(crate::helm::chart::helm_binary::HELM_ENV, &tools.helm)
        .env(myownshell_envtest::web::ENV, &tools.web)
        .stdout(Stdio::piped());
    let mut totals = run_tests(test)?;
    step.done();
    if node_suites {
        let node = crate::e2e::run_suites(&tools.assets, extra_args)?;
        totals.passed += node.passed;
    }
    eprintln!("xtask: all checks passed in {}", format_duration(started.elapsed()));
    // The plain closing line CI reads.
    println!("{} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}

fn check_kubectl() -> anyhow::Result<()> {
    let kubectl = kubectl_binary();
    let version = Command::new(&kubectl).args(["version", "--client"]).output();
    match version {
        Ok(out) if out.status.success() => {
            eprintln!("xtask: kubectl: {}", String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default());
            Ok(())
        }
        _ => bail!(
            "kubectl is needed by the tests and was not found at {} (install it, or set KUBECTL)",
            kubectl.display()
        ),
    }
}

fn locked() -> &'static [&'static str] {
    if in_ci() { &["--locked"] } else { &[] }
}

/// The tools lane in a thread while this one runs the checks; both must succeed.
fn prepare_alongside_checks(node_suites: bool) -> anyhow::Result<Tools> {
    alongside(|stop| prepare_tools(node_suites, stop), || run_checks(node_suites))
}

/// `tools` in a thread of its own (the `tools` lane) while this thread runs `checks`. A failed
/// check sets the flag `tools` is given, so that it starts no other tool (the one under way
/// finishes: its cache entry appears whole or not at all) and returns `None`; the error says
/// what failed in which lane.
fn alongside<T: Send>(
    tools: impl FnOnce(&AtomicBool) -> anyhow::Result<Option<T>> + Send,
    checks: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<T> {
    let stop = AtomicBool::new(false);
    let (tools, checks) = std::thread::scope(|scope| {
        let tools = scope.spawn(|| progress::in_lane("tools", || tools(&stop)));
        let checks = checks();
        if let Err(e) = &checks
            && !tools.is_finished()
        {
            stop.store(true, Ordering::Relaxed);
            eprintln!("xtask: error: {e:#}");
            eprintln!("xtask: waiting for the tool build under way in the tools lane, then stopping");
        }
        let tools = tools.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the tools lane's thread panicked")));
        (tools, checks)
    });
    match (tools, checks) {
        (Ok(Some(tools)), Ok(())) => Ok(tools),
        (Ok(None), Ok(())) => bail!("the tools lane stopped with no check failed"),
        (Err(tools), Ok(())) => Err(tools.context("the tools lane (Go builds and packages the tests run)")),
        (Ok(_), Err(checks)) => Err(checks),
        (Err(tools), Err(checks)) => Err(anyhow::anyhow!("{checks:#}; and the tools lane failed too: {tools:#}")),
    }
}

/// Each tool the tests need, in the order the tests need them; each one's error names it. `None`
/// when `stop` was set (a check failed) before the last one.
fn prepare_tools(node_suites: bool, stop: &AtomicBool) -> anyhow::Result<Option<Tools>> {
    let Some(assets) = tool(stop, "envtest binaries", "kube-apiserver and etcd", crate::envtest::ensure)? else {
        return Ok(None);
    };
    eprintln!("{} KUBEBUILDER_ASSETS={}", progress::prefix(), assets.display());
    // The kwok test runs a cluster of fake nodes: kwok and the two components it needs.
    let Some(kwok) = tool(stop, "kwok", "kwok and its cluster's components", crate::kwok::ensure)? else {
        return Ok(None);
    };
    eprintln!("{} {}={}", progress::prefix(), myownshell_envtest::kwok::KWOK_ENV, kwok.display());
    // tests/tests/chart.rs lints and renders the chart with Helm built from the Go module proxy.
    let Some(helm) = tool(stop, "helm", "helm", crate::helm::ensure)? else { return Ok(None) };
    // The gateway's page: xterm.js from npm, for the gateway processes the tests start.
    let Some(web) = tool(stop, "web", "the gateway page's JavaScript (npm ci)", crate::web::ensure)? else {
        return Ok(None);
    };
    // For the alert rules' check, and the e2e suite's prometheus phase.
    if tool(stop, "prometheus", "Debian's prometheus and promtool", crate::prometheus::ensure)?.is_none() {
        return Ok(None);
    }
    if node_suites {
        let node = tool(stop, "node", "the node's pieces (kubelet, packages, images)", crate::node::ensure)?;
        let cert_manager = tool(stop, "cert-manager", "the e2e suite's cert-manager", crate::certmanager::ensure)?;
        let local_path =
            tool(stop, "local-path-provisioner", "the node's dynamic provisioner", crate::local_path::ensure)?;
        if node.is_none() || cert_manager.is_none() || local_path.is_none() {
            return Ok(None);
        }
    }
    Ok(Some(Tools { assets, kwok, helm, web }))
}

/// `make`, timed as `name` in the summary, its error saying `what` failed; `None` without
/// starting it when `stop` is set.
fn tool<T>(
    stop: &AtomicBool,
    name: &str,
    what: &str,
    make: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<Option<T>> {
    if stop.load(Ordering::Relaxed) {
        return Ok(None);
    }
    timed(name, make).with_context(|| format!("making {what}")).map(Some)
}

/// The checks that need no tool, and the build of every binary (the tests run the real binaries
/// as processes, signals and restarts included); with the node suites, the previous release
/// first (see `previous.rs`: once per machine, sharing this build's dependencies).
fn run_checks(node_suites: bool) -> anyhow::Result<()> {
    timed("crdgen --check", || crate::crdgen::run(true))?;
    // The chart is generated from config/: a stale one fails here with its diff.
    timed("chart --check", || crate::helm::run_chart(true, false))?;

    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run_step("cargo fmt --check", fmt)?;

    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets"]).args(locked()).args(["--", "-D", "warnings"]);
    run_step("cargo clippy -D warnings", clippy)?;
    // The node suites are `test = false` (a plain `cargo test` needs no root), so
    // `--all-targets` leaves them out: lint them by name.
    let mut node_clippy = cargo();
    node_clippy
        .args(["clippy", "-p", "myownshell-tests", "--test", "e2e", "--test", "node"])
        .args(locked())
        .args(["--", "-D", "warnings"]);
    run_step("cargo clippy -D warnings (node suites)", node_clippy)?;

    // The fuzz target is not a workspace member (it needs nightly to run), so nothing else
    // compiles it; checking it here keeps it in step with the admission API it drives. It
    // shares the workspace's target directory (and its Cargo.lock mirrors the workspace's), so
    // the dependencies clippy just checked are not checked again.
    let mut fuzz = cargo();
    fuzz.arg("check")
        .arg("--manifest-path")
        .arg(assets::workspace_root().join("fuzz/Cargo.toml"))
        .arg("--target-dir")
        .arg(assets::target_dir())
        .args(locked());
    run_step("cargo check (fuzz target)", fuzz)?;

    if node_suites {
        timed("previous release (binaries)", crate::previous::ensure_binaries)?;
    }
    // Also what the e2e suite's operator image is made of (`node::operator_image`).
    run_step("cargo build --bins", crate::node::build_workspace_bins(in_ci()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A tools lane that runs until it is stopped (or 10 s pass), as a long Go build would.
    fn until_stopped(stop: &AtomicBool) -> anyhow::Result<Option<u32>> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Some(1))
    }

    #[test]
    fn both_lanes_succeed() {
        assert_eq!(alongside(|_| Ok(Some(7)), || Ok(())).unwrap(), 7);
    }

    #[test]
    fn a_failed_check_stops_the_tools_lane_and_is_the_error() {
        let started = Instant::now();
        let err = alongside(until_stopped, || bail!("cargo fmt --check failed")).unwrap_err();
        assert_eq!(format!("{err:#}"), "cargo fmt --check failed");
        assert!(started.elapsed() < Duration::from_secs(5), "the tools lane was not stopped");
    }

    #[test]
    fn a_failed_tool_is_named_with_its_lane() {
        let err = alongside(|_| -> anyhow::Result<Option<u32>> { bail!("making helm: go install failed") }, || Ok(()))
            .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "the tools lane (Go builds and packages the tests run): making helm: go install failed"
        );
        let both =
            alongside(|_| -> anyhow::Result<Option<u32>> { bail!("making kwok: no Go") }, || bail!("clippy failed"))
                .unwrap_err();
        assert_eq!(format!("{both:#}"), "clippy failed; and the tools lane failed too: making kwok: no Go");
    }
}
