//! `cargo xtask test`: the one test command (README, CI).
//!
//! Two lanes, each step starting as soon as what it needs is there. The `tools` lane (a thread)
//! makes the tools the tests run, which do not depend on the Rust build, in the order the tests
//! need them: first what the workspace's tests need (the envtest binaries, kwok and what a kwok
//! cluster runs, Helm, the page's JavaScript, Ory Hydra, oauth2-proxy, Prometheus), then, for the node suites,
//! the node's pieces, cert-manager, the volume provisioner and the NetworkPolicy enforcer. On a
//! cold machine those are Go builds of many minutes; warm, they are cache checks. Meanwhile the
//! `main` lane runs the checks that need no tool (`crdgen --check`, the chart check, `cargo fmt
//! --check`, `cargo clippy -D warnings`, a check of the fuzz target), builds every binary and
//! compiles every test binary (the node suites' too); then, as soon as the tools lane has made the
//! workspace's tools, the alert rules (promtool) and `cargo test` for the whole workspace (in a
//! `tests` lane of its own, followed there by the node's own suites), while the tools lane goes
//! on with the node's pieces; and the e2e as soon as those are made, beside the workspace's
//! tests. At the end, where the time went.
//!
//! Every cargo command selects the whole workspace (`--workspace`, the node suites by `--test`
//! within it), so each dependency is built with one feature set: a `-p` selection unifies
//! features over fewer packages and builds kube, tokio and their kin again.
//!
//! The lanes share the machine's cores: on a cold machine the workspace's tests run beside a Go
//! build, and beside the node suites' clusters, which a test must bear (a test that fails only
//! on a busy machine has found a race). Their outputs interleave line by line; each run's failed
//! tests are said again, by name, at the very end.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Instant;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::kubectl::kubectl_binary;

use crate::cargo::{Totals, cargo, in_ci, run_tests};
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

/// Where the workspace's tests find the tools.
struct Tools {
    assets: PathBuf,
    kwok: PathBuf,
    helm: PathBuf,
    web: PathBuf,
    hydra: PathBuf,
    oauth2_proxy: PathBuf,
}

/// What the tools lane says as it goes.
enum Made {
    /// What the workspace's tests need is made.
    Workspace(Tools),
    /// cert-manager is made too (with the node suites, the node's pieces, the provisioner and the
    /// NetworkPolicy enforcer came before [`Made::Workspace`]).
    Node,
}

pub fn run(extra_args: &[String]) -> anyhow::Result<()> {
    let started = progress::Started::now();
    // Before the lanes start: no other child of this process runs while it is measured.
    let speed = crate::machine_speed::describe(crate::machine_speed::kubectl_run_cpu(&kubectl_binary()));
    eprintln!("xtask: {speed}");
    let result = run_all(extra_args, started.at);
    progress::print_summary(started);
    eprintln!("xtask: {speed}");
    result
}

fn run_all(extra_args: &[String], started: Instant) -> anyhow::Result<()> {
    check_kubectl()?;
    // Decided before any tool is made: with the node suites, the tools lane makes the node's
    // pieces too (and `cargo xtask dev`, which a test runs, uses the node when it is there).
    let node_suites = crate::e2e::should_run()?;
    let totals =
        lanes(|stop, made| tools_lane(node_suites, stop, made), |made| main_lane(node_suites, extra_args, made))?;
    eprintln!("xtask: all checks passed in {}", format_duration(started.elapsed()));
    // The plain closing line CI reads.
    println!("{} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}

/// The checks, the builds, then each suite once what it needs is made.
fn main_lane(node_suites: bool, extra_args: &[String], made: &Receiver<Made>) -> anyhow::Result<Totals> {
    run_checks(node_suites)?;
    compile_tests(node_suites)?;
    let Made::Workspace(tools) = wait_for(made, "the workspace tests' tools")? else {
        bail!("the tools lane made the node's pieces before the workspace's tools");
    };
    // The alerts: promtool checks the PrometheusRule of config/prometheus and runs its unit tests.
    crate::prometheus::check_rules()?;
    if !node_suites {
        return workspace_tests(&tools, extra_args)?.ran_some();
    }
    // Four runs of tests, as soon as what each needs is made, no more than two at once: the
    // workspace's tests (in a `tests` lane of their own) and the e2e (about 13 minutes) here,
    // beside them; then the node's own suites (about 2 minutes), each taken by whichever lane is
    // free first (`OwnSuites`). Each mostly waits (on apiservers, kubelets, pods, a browser): run
    // one after the other, the workspace's tests and the node suites each kept 0.6 of the 2 cores
    // busy (the time summary of 2026-11-30's CI run), for 10 and 16 minutes. Every test already
    // bears a busy machine (the lanes ran the workspace's tests beside Go builds), and each
    // cluster of the node suites takes a network slot of its own.
    let (suites_tx, suites_rx) = mpsc::channel::<Option<Arc<crate::e2e::Suites>>>();
    let own_suites = crate::e2e::OwnSuites::new();
    let (tests_lane, e2e) = std::thread::scope(|scope| {
        let (tools, own_suites) = (&tools, &own_suites);
        let tests_lane = scope.spawn(move || {
            progress::in_lane("tests", || {
                let workspace = workspace_tests(tools, extra_args);
                let own = match suites_rx.recv() {
                    Ok(Some(suites)) => own_suites.run_while_left(|suite| suites.run(&[suite], extra_args)),
                    _ => Err(ToolsLaneStopped("the node's pieces").into()),
                };
                crate::e2e::both(workspace, own, "the node's own suites")
            })
        });
        let prepared = wait_for(made, "the node's pieces").and_then(|_| crate::e2e::prepare(&tools.assets));
        let e2e = match prepared {
            Ok(suites) => {
                let suites = Arc::new(suites);
                let _ = suites_tx.send(Some(suites.clone()));
                let e2e = suites.run(&crate::e2e::E2E, extra_args);
                let own = own_suites.run_while_left(|suite| suites.run(&[suite], extra_args));
                crate::e2e::both(e2e, own, "the node's own suites")
            }
            Err(e) => {
                let _ = suites_tx.send(None);
                Err(e)
            }
        };
        let tests_lane = tests_lane.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the tests lane's thread panicked")));
        (tests_lane, e2e)
    });
    crate::e2e::sweep();
    crate::e2e::both(tests_lane, e2e, "the e2e")?.ran_some()
}

/// `cargo test` for the whole workspace, with the tools it runs.
fn workspace_tests(tools: &Tools, extra_args: &[String]) -> anyhow::Result<Totals> {
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
        .env(myownshell_envtest::oidc::hydra::ENV, &tools.hydra)
        .env(myownshell_envtest::oidc::oauth2_proxy::ENV, &tools.oauth2_proxy)
        .stdout(Stdio::piped());
    let totals = run_tests(test)?;
    step.done();
    Ok(totals)
}

/// Every test binary compiled, the node suites' too, before any tool is waited for: on a cold
/// machine the Go builds of the tools lane take longer than the whole Rust build.
fn compile_tests(node_suites: bool) -> anyhow::Result<()> {
    let mut workspace = cargo();
    workspace.args(["test", "--workspace", "--no-run"]).args(locked());
    run_step("cargo test --workspace --no-run", workspace)?;
    if node_suites {
        run_step("cargo test --no-run (node suites)", crate::e2e::suites_command(&crate::e2e::SUITES, &["--no-run"]))?;
    }
    Ok(())
}

/// The tools lane stopped (a tool failed, or it was told to stop) before it said it made `0`.
#[derive(Debug)]
struct ToolsLaneStopped(&'static str);

impl std::fmt::Display for ToolsLaneStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the tools lane stopped before it made {}", self.0)
    }
}

impl std::error::Error for ToolsLaneStopped {}

/// The next thing the tools lane made, `what` in words; the wait is in the summary.
fn wait_for<M>(made: &Receiver<M>, what: &'static str) -> anyhow::Result<M> {
    let step = Step::quiet(format!("{} {what}", progress::WAITING));
    let next = made.recv().map_err(|_| ToolsLaneStopped(what))?;
    step.done();
    Ok(next)
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

/// `tools` in a thread of its own (the `tools` lane), saying what it made on a channel, while
/// this thread runs `main`, which waits on it where it must. A failed `main` sets the flag
/// `tools` is given, so that it starts no other tool (the one under way finishes: its cache entry
/// appears whole or not at all). A failed `tools` leaves `main` waiting for nothing: its wait
/// ends with [`ToolsLaneStopped`], and the tools lane's error is the one said.
fn lanes<T, M: Send>(
    tools: impl FnOnce(&AtomicBool, Sender<M>) -> anyhow::Result<()> + Send,
    main: impl FnOnce(&Receiver<M>) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let stop = AtomicBool::new(false);
    let (tell, made) = mpsc::channel();
    let (tools, main) = std::thread::scope(|scope| {
        let stop = &stop;
        let lane = scope.spawn(move || progress::in_lane("tools", || tools(stop, tell)));
        let main = main(&made);
        if let Err(e) = &main
            && !lane.is_finished()
        {
            stop.store(true, Ordering::Relaxed);
            eprintln!("xtask: error: {e:#}");
            eprintln!("xtask: waiting for the tool build under way in the tools lane, then stopping");
        }
        let tools = lane.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the tools lane's thread panicked")));
        (tools, main)
    });
    let in_lane = |e: anyhow::Error| e.context("the tools lane (Go builds and packages the tests run)");
    match (tools, main) {
        (Ok(()), main) => main,
        (Err(tools), Ok(_)) => Err(in_lane(tools)),
        (Err(tools), Err(main)) if main.is::<ToolsLaneStopped>() => Err(in_lane(tools)),
        (Err(tools), Err(main)) => Err(anyhow::anyhow!("{main:#}; and the tools lane failed too: {tools:#}")),
    }
}

/// Each tool the tests need, in the order the tests need them, each said on `made` once made;
/// each one's error names it. Stops early, saying nothing more, when `stop` is set (a check
/// failed).
fn tools_lane(node_suites: bool, stop: &AtomicBool, made: Sender<Made>) -> anyhow::Result<()> {
    let Some(assets) = tool(stop, "envtest binaries", "kube-apiserver and etcd", crate::envtest::ensure)? else {
        return Ok(());
    };
    eprintln!("{} KUBEBUILDER_ASSETS={}", progress::prefix(), assets.display());
    // The kwok test runs a cluster of fake nodes: kwok and the two components it needs.
    let Some(kwok) = tool(stop, "kwok", "kwok and its cluster's components", crate::kwok::ensure)? else {
        return Ok(());
    };
    eprintln!("{} {}={}", progress::prefix(), myownshell_envtest::kwok::KWOK_ENV, kwok.display());
    // tests/tests/chart.rs lints and renders the chart with Helm built from the Go module proxy.
    let Some(helm) = tool(stop, "helm", "helm", crate::helm::ensure)? else { return Ok(()) };
    // The gateway's page: xterm.js from npm, for the gateway processes the tests start.
    let Some(web) = tool(stop, "web", "the gateway page's JavaScript (npm ci)", crate::web::ensure)? else {
        return Ok(());
    };
    // tests/tests/oidc.rs signs people in through Ory Hydra, built from the Go module proxy.
    let Some(hydra) = tool(stop, "hydra", "Ory Hydra (the OIDC test bed's provider)", crate::hydra::ensure)? else {
        return Ok(());
    };
    // The e2e puts oauth2-proxy, built from the Go module proxy, in front of the gateway.
    let Some(oauth2_proxy) =
        tool(stop, "oauth2-proxy", "oauth2-proxy (in front of the gateway)", crate::oauth2_proxy::ensure)?
    else {
        return Ok(());
    };
    // For the alert rules' check, and the e2e suite's prometheus phase.
    if tool(stop, "prometheus", "Debian's prometheus and promtool", crate::prometheus::ensure)?.is_none() {
        return Ok(());
    }
    // With the node suites, the workspace's tests wait for what `cargo xtask dev` runs on the
    // node too: `tests/tests/dev.rs` starts it, and it uses the node once the node's packages are
    // installed. On a cold machine (2026-11-30, `CI=true bash .ci/run` with every cache empty) it
    // found the packages but not kube-router and the provisioner, built them itself beside the
    // tools lane building the same, and was not ready within the test's 3 minutes.
    if node_suites && !dev_on_the_node(stop)? {
        return Ok(());
    }
    // The receiving end lives as long as the main lane; a send fails only once it has ended.
    let _ = made.send(Made::Workspace(Tools { assets, kwok, helm, web, hydra, oauth2_proxy }));
    if node_suites && tool(stop, "cert-manager", "the e2e suite's cert-manager", crate::certmanager::ensure)?.is_some()
    {
        let _ = made.send(Made::Node);
    }
    Ok(())
}

/// What `cargo xtask dev` runs on the node (`dev::run_local`), made: the node's pieces, its
/// provisioner, its NetworkPolicy enforcer and the session holder's image. False if the lane was
/// told to stop first.
fn dev_on_the_node(stop: &AtomicBool) -> anyhow::Result<bool> {
    let node = tool(stop, "node", "the node's pieces (kubelet, packages, images)", crate::node::ensure)?;
    let local_path = tool(stop, "local-path-provisioner", "the node's dynamic provisioner", crate::local_path::ensure)?;
    let kube_router = tool(stop, "kube-router", "the nodes' NetworkPolicy enforcer", crate::kube_router::ensure)?;
    let session = tool(stop, "session image", "the session holder's image", || crate::session::image(false))?;
    Ok(node.is_some() && local_path.is_some() && kube_router.is_some() && session.is_some())
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
    node_clippy.args(["clippy", "-p", "myownshell-tests"]);
    for suite in crate::e2e::SUITES {
        node_clippy.args(["--test", suite]);
    }
    node_clippy.args(locked()).args(["--", "-D", "warnings"]);
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
    fn until_stopped(stop: &AtomicBool, _: Sender<u32>) -> anyhow::Result<()> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    #[test]
    fn the_main_lane_takes_what_the_tools_lane_made_as_it_is_made() {
        let got = lanes(
            |_, made| {
                made.send(7)?;
                made.send(8)?;
                Ok(())
            },
            |made| Ok((wait_for(made, "seven")?, wait_for(made, "eight")?)),
        )
        .unwrap();
        assert_eq!(got, (7, 8));
    }

    #[test]
    fn a_failed_check_stops_the_tools_lane_and_is_the_error() {
        let started = Instant::now();
        let err = lanes(until_stopped, |_| -> anyhow::Result<()> { bail!("cargo fmt --check failed") }).unwrap_err();
        assert_eq!(format!("{err:#}"), "cargo fmt --check failed");
        assert!(started.elapsed() < Duration::from_secs(5), "the tools lane was not stopped");
    }

    #[test]
    fn a_failed_tool_is_named_with_its_lane_and_ends_the_wait_for_it() {
        let failing =
            |_: &AtomicBool, _: Sender<u32>| -> anyhow::Result<()> { bail!("making helm: go install failed") };
        let err = lanes(failing, |made| wait_for(made, "helm")).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "the tools lane (Go builds and packages the tests run): making helm: go install failed"
        );
        let no_go = |_: &AtomicBool, _: Sender<u32>| -> anyhow::Result<()> { bail!("making kwok: no Go") };
        let both = lanes(no_go, |_| -> anyhow::Result<()> { bail!("clippy failed") }).unwrap_err();
        assert_eq!(format!("{both:#}"), "clippy failed; and the tools lane failed too: making kwok: no Go");
    }

    #[test]
    fn a_tools_lane_that_stops_early_ends_the_wait_with_what_was_missing() {
        let err = lanes(|_, _: Sender<u32>| Ok(()), |made| wait_for(made, "the node's pieces")).unwrap_err();
        assert_eq!(format!("{err:#}"), "the tools lane stopped before it made the node's pieces");
    }
}
