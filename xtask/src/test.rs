//! `cargo xtask test`: the one test command (README, CI). Runs, in order: the kubectl check, the
//! envtest binaries, kwok and what a kwok cluster runs (`cargo xtask kwok`), `crdgen --check`,
//! `cargo fmt --check`, `cargo clippy -D warnings`, a check of the fuzz target, and `cargo test`
//! for the whole workspace with `KUBEBUILDER_ASSETS` and `MYOWNSHELL_KWOK` pointing at the
//! binaries.

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use myownshell_envtest::assets;
use myownshell_envtest::kubectl::kubectl_binary;

use crate::cargo::{cargo, in_ci, run_tests};
use crate::progress::{Step, format_duration};

fn run_step(name: &str, mut cmd: Command) -> anyhow::Result<()> {
    let step = Step::start(name);
    let status = cmd.status().with_context(|| format!("starting {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    step.done();
    Ok(())
}

pub fn run(extra_args: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    let kubectl = kubectl_binary();
    let version = Command::new(&kubectl).args(["version", "--client"]).output();
    match version {
        Ok(out) if out.status.success() => {
            eprintln!("xtask: kubectl: {}", String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default());
        }
        _ => bail!(
            "kubectl is needed by the tests and was not found at {} (install it, or set KUBECTL)",
            kubectl.display()
        ),
    }

    let assets = crate::envtest::ensure()?;
    eprintln!("xtask: KUBEBUILDER_ASSETS={}", assets.display());
    // The kwok test runs a cluster of fake nodes: kwok and the two components it needs.
    let kwok = crate::kwok::ensure()?;
    eprintln!("xtask: {}={}", myownshell_envtest::kwok::KWOK_ENV, kwok.display());
    // Before any test: `cargo xtask dev` (which a test runs) uses the node when it is there.
    let node_suites = crate::e2e::should_run()?;
    if node_suites {
        crate::node::ensure()?;
    }
    crate::crdgen::run(true)?;
    // The alerts: promtool checks the PrometheusRule of config/prometheus and runs its unit tests.
    crate::prometheus::check_rules()?;
    // The chart is generated from config/: a stale one fails here with its diff.
    crate::helm::run_chart(true, false)?;

    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run_step("cargo fmt --check", fmt)?;

    let locked: &[&str] = if in_ci() { &["--locked"] } else { &[] };
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets"]).args(locked).args(["--", "-D", "warnings"]);
    run_step("cargo clippy -D warnings", clippy)?;
    // The node suites are `test = false` (a plain `cargo test` needs no root), so
    // `--all-targets` leaves them out: lint them by name.
    let mut node_clippy = cargo();
    node_clippy
        .args(["clippy", "-p", "myownshell-tests", "--test", "e2e", "--test", "node"])
        .args(locked)
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
        .args(locked);
    run_step("cargo check (fuzz target)", fuzz)?;

    // Tests run the real binaries as processes (signals, restarts), so build them first.
    let mut bins = cargo();
    bins.args(["build", "--workspace", "--bins"]).args(locked);
    run_step("cargo build --bins", bins)?;

    // tests/tests/chart.rs lints and renders the chart with Helm built from the Go module proxy.
    let helm = crate::helm::ensure()?;
    let step = Step::start("cargo test --workspace");
    let mut test = cargo();
    // --no-fail-fast: one run reports every failing test binary, not only the first.
    test.args(["test", "--workspace", "--no-fail-fast"])
        .args(locked)
        .args(extra_args)
        .env("KUBEBUILDER_ASSETS", &assets)
        .env(myownshell_envtest::kwok::KWOK_ENV, &kwok)
        .env(crate::helm::chart::helm_binary::HELM_ENV, &helm)
        .stdout(Stdio::piped());
    let mut totals = run_tests(test)?;
    step.done();
    if node_suites {
        let node = crate::e2e::run_suites(&assets, extra_args)?;
        totals.passed += node.passed;
    }
    eprintln!("xtask: all checks passed in {}", format_duration(started.elapsed()));
    // The plain closing line CI reads.
    println!("{} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}
