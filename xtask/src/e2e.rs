//! `cargo xtask e2e`: the suites that need a real node: the harness's node itself
//! (`tests/tests/node.rs`), NetworkPolicies enforced on it (`tests/tests/network_policy.rs`) and
//! the operator deployed from `config/` onto it (`tests/tests/e2e/`). `cargo xtask test` runs them too whenever the node can run; with
//! `CI=true` a node that cannot run is a failure.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use myownshell_envtest::node::cgroups;

use anyhow::Context;

use crate::cargo::{Totals, cargo, in_ci, run_tests};
use crate::node::ImageProfile;
use crate::progress::Step;

/// The node suites' test targets in the tests crate.
pub const SUITES: [&str; 3] = ["node", "network_policy", "e2e"];
/// The operator end to end: one test of about 14 minutes, the longest step of a warm run.
pub const E2E: [&str; 1] = ["e2e"];
/// The node's own suites (about 2 minutes), which run beside the e2e: each cluster takes a
/// network slot of its own (`myownshell_envtest::node::network`), and `node.rs` already runs two
/// side by side. The longest first (`node.rs` about 1m50s, `network_policy.rs` about 50 s), the
/// order [`OwnSuites`] hands them out in.
pub const NODE_OWN: [&str; 2] = ["node", "network_policy"];

/// The node's own suites still to run in `cargo xtask test`, taken one at a time by whichever
/// lane is free first, the longest first. Run after the workspace's tests, both in the tests lane
/// (11m36s and 2m39s on 2026-12-01, warm), they ended a run 1m28s after the e2e beside them
/// (12m59s); split, each lane takes one as it frees.
pub struct OwnSuites(std::sync::Mutex<std::collections::VecDeque<&'static str>>);

impl OwnSuites {
    pub fn new() -> Self {
        Self(std::sync::Mutex::new(NODE_OWN.into()))
    }

    /// Run the suites left, one `run` each, as long as any is left (the other lane takes from the
    /// same list); their totals added up, or every failure.
    pub fn run_while_left(
        &self,
        mut run: impl FnMut(&'static str) -> anyhow::Result<Totals>,
    ) -> anyhow::Result<Totals> {
        let mut result = Ok(Totals::default());
        while let Some(suite) = self.take() {
            result = both(result, run(suite), &format!("the {suite} suite"));
        }
        result
    }

    /// The next suite left. Its own function: a lock taken in the `while let` above would be held
    /// through the suite's run, and the other lane would wait on it.
    fn take(&self) -> Option<&'static str> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front()
    }
}

/// `cargo xtask e2e [cargo test args]`; ends with where the time went.
pub fn run(extra_args: &[String]) -> anyhow::Result<()> {
    let started = crate::progress::Started::now();
    let result = crate::progress::timed("envtest binaries", crate::envtest::ensure)
        .and_then(|assets| prepare(&assets))
        .and_then(|suites| suites.run_side_by_side(extra_args))
        .and_then(Totals::ran_some);
    crate::progress::print_summary(started);
    let totals = result?;
    eprintln!("xtask: e2e passed in {}", crate::progress::format_duration(started.at.elapsed()));
    println!("{} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}

/// `cargo test --workspace --test e2e --test node ARGS`: the node suites, selected within the
/// whole workspace so that their dependencies have the workspace's features (with `-p
/// myownshell-tests`, cargo unifies features over that package alone, and kube, kube-runtime
/// and tokio-tungstenite were built a second time).
pub fn suites_command(suites: &[&str], args: &[&str]) -> std::process::Command {
    let mut test = cargo();
    test.args(["test", "--workspace"]);
    for suite in suites {
        test.args(["--test", suite]);
    }
    if in_ci() {
        test.arg("--locked");
    }
    test.args(args);
    test
}

/// The e2e's phases, slowest first, from its `seconds<TAB>phase` lines: where its time went.
fn print_phases(noted: &str) {
    let lines = phase_lines(noted);
    if lines.is_empty() {
        return;
    }
    eprintln!("xtask: the e2e's phases, slowest first (took, phase):");
    for line in lines {
        eprintln!("xtask:   {line}");
    }
}

fn phase_lines(noted: &str) -> Vec<String> {
    let mut phases: Vec<(f64, &str)> = noted
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter_map(|(secs, name)| Some((secs.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?, name)))
        .collect();
    phases.sort_by(|a, b| b.0.total_cmp(&a.0));
    phases
        .into_iter()
        .map(|(secs, name)| {
            let took = crate::progress::format_duration(std::time::Duration::from_secs_f64(secs));
            format!("{took:>7}  {}", name.chars().take(120).collect::<String>())
        })
        .collect()
}

fn run_quiet(name: &str, mut command: std::process::Command) -> anyhow::Result<()> {
    let step = Step::quiet(name);
    let status = command.status()?;
    anyhow::ensure!(status.success(), "{name} failed ({status})");
    step.done();
    Ok(())
}

/// What the node suites run with: the tools and images made for them, as environment variables.
pub struct Suites {
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Where the e2e notes its phases' times.
    phases: PathBuf,
}

/// Make the node's pieces and the operator image, and every tool the node suites run. The image
/// is made of the dev-profile binaries (`ImageProfile::Dev`): the suites test the operator's
/// behaviour, and the binaries are the ones `cargo xtask test` has just built for the other tests.
pub fn prepare(assets: &Path) -> anyhow::Result<Suites> {
    crate::progress::timed("node", crate::node::ensure)?;
    let locked = in_ci();
    // The upgrade phase installs the previous release first, from its own manifests and image.
    // Built (once) before the workspace's `cargo build --workspace --bins`: it shares the build
    // directory, and matches the dependencies as `cargo xtask` itself left them (`previous.rs`).
    crate::progress::timed("previous release (binaries)", crate::previous::ensure_binaries)?;
    let image = crate::node::operator_image(ImageProfile::Dev, locked)?;
    let previous = crate::progress::timed("previous release (image)", crate::previous::ensure)?;
    // The cert-manager phase installs cert-manager from its own images and manifests.
    let cert_manager = crate::progress::timed("cert-manager", crate::certmanager::ensure)?;
    // The helm phase installs the chart (dist/chart) with Helm built from the Go module proxy.
    let helm = crate::helm::ensure()?;
    // The prometheus phase runs Debian's Prometheus (unpacked once into the cache) as a process.
    let prometheus = crate::prometheus::ensure()?;
    // Claims on the node are provisioned by local-path-provisioner, built from the module proxy.
    let local_path = crate::progress::timed("local-path-provisioner", crate::local_path::ensure)?;
    // NetworkPolicies are enforced, where a suite asks, by kube-router built from the module proxy.
    let kube_router = crate::progress::timed("kube-router", crate::kube_router::ensure)?;
    // The apiserver trusts Ory Hydra, through which oauth2-proxy in front of the gateway signs
    // people in: both built from the module proxy.
    let hydra = crate::progress::timed("hydra", crate::hydra::ensure)?;
    let oauth2_proxy = crate::progress::timed("oauth2-proxy", crate::oauth2_proxy::ensure)?;
    let mut node_images = vec![image.clone(), previous.image.clone()];
    node_images.extend(cert_manager.images.iter().cloned());
    let images = std::env::join_paths(&node_images).context("image paths")?;
    // The e2e suite runs `kubectl myownshell` as its users do: built with every binary (one
    // feature set for the whole workspace; a no-op after `cargo xtask test`'s build).
    run_quiet("cargo build --workspace --bins", crate::node::build_workspace_bins(locked))?;
    let phases = myownshell_envtest::assets::workspace_root().join("target/e2e-phases.tsv");
    let env = [
        (myownshell_envtest::node::E2E_PHASES_ENV.into(), phases.clone().into()),
        ("KUBEBUILDER_ASSETS".into(), assets.into()),
        ("MYOWNSHELL_NODE_IMAGES".into(), images),
        ("MYOWNSHELL_PREVIOUS_CONFIG".into(), previous.config.into()),
        (crate::certmanager::ENV.into(), cert_manager.dir.into()),
        (crate::helm::chart::helm_binary::HELM_ENV.into(), helm.into()),
        (crate::prometheus::ENV.into(), prometheus.into()),
        (myownshell_envtest::node::local_path::ENV.into(), local_path.into()),
        (myownshell_envtest::node::network_policy::ENV.into(), kube_router.into()),
        (myownshell_envtest::oidc::hydra::ENV.into(), hydra.into()),
        (myownshell_envtest::oidc::oauth2_proxy::ENV.into(), oauth2_proxy.into()),
    ];
    Ok(Suites { env: env.into(), phases })
}

impl Suites {
    /// `cargo test` of `suites` (of [`SUITES`]); with the e2e, its phases after, slowest first.
    pub fn run(&self, suites: &[&str], extra_args: &[String]) -> anyhow::Result<Totals> {
        let step = Step::start(format!("cargo test --test {}", suites.join(" --test ")));
        let e2e = suites.contains(&E2E[0]);
        if e2e {
            // A file left by an earlier run would be read as this one's.
            let _ = std::fs::remove_file(&self.phases);
        }
        let mut test = suites_command(suites, &[]);
        test.args(extra_args).envs(self.env.iter().map(|(k, v)| (k, v))).stdout(Stdio::piped());
        let result = run_tests(test);
        if e2e {
            print_phases(&std::fs::read_to_string(&self.phases).unwrap_or_default());
        }
        let totals = result?;
        step.done();
        Ok(totals)
    }

    /// The e2e and, beside it in a lane of their own, the node's own suites; then what their
    /// clusters left for someone to remove.
    pub fn run_side_by_side(&self, extra_args: &[String]) -> anyhow::Result<Totals> {
        let (e2e, own) = std::thread::scope(|scope| {
            let own = scope.spawn(|| crate::progress::in_lane("node", || self.run(&NODE_OWN, extra_args)));
            let e2e = self.run(&E2E, extra_args);
            (e2e, own.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the node suites' thread panicked"))))
        });
        sweep();
        both(e2e, own, "the node's own suites")
    }
}

/// A test binary's shared cluster ends with its process, which leaves only its (empty) cgroups
/// for someone to remove.
pub fn sweep() {
    cgroups::sweep_stale();
}

/// Two runs of tests that went side by side, as one: their passes added, or the error of the
/// one that failed, or both errors (`second` names the second).
pub fn both(first: anyhow::Result<Totals>, second: anyhow::Result<Totals>, second_is: &str) -> anyhow::Result<Totals> {
    match (first, second) {
        (Ok(mut totals), Ok(more)) => {
            totals.passed += more.passed;
            Ok(totals)
        }
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
        (Err(first), Err(second)) => Err(anyhow::anyhow!("{first:#}\nand {second_is}: {second:#}")),
    }
}

/// Whether `cargo xtask test` runs the node suites: always in CI, else when the node can run.
pub fn should_run() -> anyhow::Result<bool> {
    if in_ci() {
        return Ok(true);
    }
    if myownshell_envtest::node::assets::is_root() {
        // Whatever is missing, `run_suites` installs or builds it (or fails saying why).
        return Ok(true);
    }
    eprintln!("xtask: the node suites (tests/tests/node.rs, e2e/) do not run here: they need root");
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_side_by_side_add_up_or_say_each_failure() {
        let ok = |passed| Ok(Totals { passed, ..Totals::default() });
        let failed = |why: &str| Err(anyhow::anyhow!("{why}"));
        assert_eq!(both(ok(3), ok(4), "the second").unwrap().passed, 7);
        assert_eq!(format!("{:#}", both(ok(3), failed("e2e failed"), "the e2e").unwrap_err()), "e2e failed");
        assert_eq!(
            format!("{:#}", both(failed("workspace failed"), ok(4), "the e2e").unwrap_err()),
            "workspace failed"
        );
        assert_eq!(
            format!("{:#}", both(failed("workspace failed"), failed("e2e failed"), "the e2e").unwrap_err()),
            "workspace failed\nand the e2e: e2e failed"
        );
        assert!(ok(0).and_then(Totals::ran_some).is_err(), "no test ran");
    }

    #[test]
    fn the_node_suites_are_each_run_once_by_whichever_lane_takes_them_longest_first() {
        let own = OwnSuites::new();
        let mut first_lane = Vec::new();
        let ran = own.run_while_left(|suite| {
            first_lane.push(suite);
            // The other lane frees while this one runs its first suite, and takes the next.
            let mut other_lane = Vec::new();
            if first_lane.len() == 1 {
                let other = own.run_while_left(|suite| {
                    other_lane.push(suite);
                    Err(anyhow::anyhow!("{suite} failed"))
                });
                assert_eq!(other_lane, ["network_policy"]);
                assert_eq!(format!("{:#}", other.unwrap_err()), "network_policy failed");
            }
            Ok(Totals { passed: 5, ..Totals::default() })
        });
        assert_eq!(first_lane, ["node"], "the longest first, and nothing twice");
        assert_eq!(ran.unwrap().passed, 5);
        assert_eq!(own.run_while_left(|_| panic!("nothing is left")).unwrap(), Totals::default());
    }

    #[test]
    fn the_phases_are_listed_slowest_first_and_bad_lines_skipped() {
        let noted = "12.5\tinstall\n130.0\tthe gateway in Chromium\nnot a line\nNaN\tnan\n-1\tnegative\n0.2\tquick\n";
        assert_eq!(phase_lines(noted), ["  2m10s  the gateway in Chromium", "  12.5s  install", "   0.2s  quick"]);
        assert!(phase_lines("").is_empty());
    }
}
