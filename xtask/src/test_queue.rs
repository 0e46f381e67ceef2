//! The workspace's tests as a queue of `cargo test` runs, one per test target (every crate's unit
//! tests, every crate's doc tests, each integration test), taken by whichever lane is free, the
//! longest first by this machine's last run.
//!
//! Why not one `cargo test --workspace`: it runs the test binaries one after the other, and most
//! of them wait (on apiservers, kubelets, pods, a browser): that run kept 0.6 of the 2 cores busy
//! for 14 minutes, the longest lane of a warm run (2026-12-02) once the e2e was split in two. As a
//! queue, the lane that finishes the e2e takes its share.
//!
//! Why not cargo-nextest, which runs test binaries side by side: it runs each test in a process of
//! its own, and the tests of one binary share one envtest control plane
//! (`myownshell_envtest::control_plane::shared`), which would then start once per test, about 250
//! apiservers in a run instead of about 45.
//!
//! Every run selects the whole workspace and one target (`--workspace --test NAME`), so each
//! dependency keeps the one feature set the other cargo commands build (see `test.rs`).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;

use crate::cargo::{Totals, cargo};
use crate::e2e::both;

/// One `cargo test` run of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// How the run is named in the summary and in the durations file.
    pub name: String,
    /// The target selection after `cargo test --workspace`.
    pub select: Vec<String>,
}

impl Target {
    fn integration(name: &str) -> Self {
        Self { name: format!("--test {name}"), select: vec!["--test".into(), name.into()] }
    }
}

/// The runs that together are what `cargo test --workspace` runs: the unit tests of every lib and
/// bin, the doc tests, and each integration test target that is tested by default (`test = true`;
/// the node suites are `test = false` and run on their own), each named once (two packages' tests
/// of one name run in one `--test NAME`).
pub fn targets_of(metadata: &Metadata) -> Vec<Target> {
    let mut targets = vec![
        Target { name: "unit tests (--lib --bins)".into(), select: vec!["--lib".into(), "--bins".into()] },
        Target { name: "doc tests (--doc)".into(), select: vec!["--doc".into()] },
    ];
    let mut names: Vec<&str> = metadata
        .packages
        .iter()
        .filter(|package| metadata.workspace_members.contains(&package.id))
        .flat_map(|package| &package.targets)
        .filter(|target| target.test && target.kind.iter().any(|kind| kind == "test"))
        .map(|target| target.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    targets.extend(names.into_iter().map(Target::integration));
    targets
}

/// What of `cargo metadata --no-deps --format-version 1` the queue reads.
#[derive(Debug, Deserialize)]
pub struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Package {
    id: String,
    targets: Vec<MetadataTarget>,
}

#[derive(Debug, Deserialize)]
struct MetadataTarget {
    name: String,
    kind: Vec<String>,
    /// Whether `cargo test` tests it by default (`test = false` in the manifest says no).
    #[serde(default = "tested_by_default")]
    test: bool,
}

fn tested_by_default() -> bool {
    true
}

/// `targets`, the longest first by `durations` (seconds by name); a target with no duration yet
/// first of all (it may be the longest), then by name, so the order is the same for the same
/// durations.
pub fn longest_first(mut targets: Vec<Target>, durations: &BTreeMap<String, f64>) -> Vec<Target> {
    let took = |target: &Target| durations.get(&target.name).copied().unwrap_or(f64::INFINITY);
    targets.sort_by(|a, b| took(b).total_cmp(&took(a)).then_with(|| a.name.cmp(&b.name)));
    targets
}

/// The `seconds<TAB>name` lines of the durations file; a line that does not read is skipped.
pub fn read_durations(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|line| line.split_once('\t'))
        .filter_map(|(secs, name)| {
            Some((name.to_owned(), secs.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?))
        })
        .collect()
}

fn write_durations(durations: &BTreeMap<String, f64>) -> String {
    durations.iter().map(|(name, secs)| format!("{secs:.1}\t{name}\n")).collect()
}

/// The workspace's test runs still to do, shared by the lanes that take them.
pub struct Queue {
    left: Mutex<VecDeque<Target>>,
    /// How long each run took in this process, added to the durations file at the end.
    took: Mutex<BTreeMap<String, f64>>,
    durations: PathBuf,
}

impl Queue {
    /// Every test target of the workspace, the longest first by the durations in `durations` (a
    /// file in the cache: `~/.cache/myownshell/test-durations.tsv`).
    pub fn of_workspace(durations: PathBuf) -> anyhow::Result<Self> {
        let mut command = cargo();
        command.args(["metadata", "--no-deps", "--format-version", "1"]);
        let out = command.output().context("running cargo metadata")?;
        anyhow::ensure!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
        let metadata: Metadata = serde_json::from_slice(&out.stdout).context("reading cargo metadata's output")?;
        let known = read_durations(&std::fs::read_to_string(&durations).unwrap_or_default());
        Ok(Self::new(longest_first(targets_of(&metadata), &known), durations))
    }

    fn new(targets: Vec<Target>, durations: PathBuf) -> Self {
        Self { left: Mutex::new(targets.into()), took: Mutex::new(BTreeMap::new()), durations }
    }

    /// Run the targets left, one `run` each, as long as any is left (other lanes take from the
    /// same queue); their totals added up, or every failure.
    pub fn run_while_left(&self, mut run: impl FnMut(&Target) -> anyhow::Result<Totals>) -> anyhow::Result<Totals> {
        let mut result = Ok(Totals::default());
        while let Some(target) = self.take() {
            let started = Instant::now();
            let ran = run(&target);
            self.took
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(target.name.clone(), secs(started.elapsed()));
            result = both(result, ran, &target.name);
        }
        result
    }

    /// The next target left. Its own function: a lock held through the `while let` above would
    /// keep the other lanes waiting through the run.
    fn take(&self) -> Option<Target> {
        self.left.lock().unwrap_or_else(PoisonError::into_inner).pop_front()
    }

    /// This run's durations written over the file's (the others kept), for the next run's order.
    /// A file that cannot be written costs only the order: said, not an error.
    pub fn save_durations(&self) {
        let mut durations = read_durations(&std::fs::read_to_string(&self.durations).unwrap_or_default());
        durations.extend(self.took.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|(k, v)| (k.clone(), *v)));
        if let Err(e) = write_atomically(&self.durations, &write_durations(&durations)) {
            eprintln!("xtask: could not keep the tests' durations in {}: {e}", self.durations.display());
        }
    }
}

fn secs(took: Duration) -> f64 {
    took.as_secs_f64()
}

fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&partial, contents)?;
    std::fs::rename(&partial, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA: &str = r#"{
        "workspace_members": ["path+file:///w/tests#0.1.0", "path+file:///w/api#0.1.0"],
        "packages": [
            {"id": "path+file:///w/tests#0.1.0", "targets": [
                {"name": "myownshell_tests", "kind": ["lib"], "test": true},
                {"name": "webhook", "kind": ["test"], "test": true},
                {"name": "e2e", "kind": ["test"], "test": false},
                {"name": "access", "kind": ["test"]}
            ]},
            {"id": "path+file:///w/api#0.1.0", "targets": [
                {"name": "api", "kind": ["lib"], "test": true},
                {"name": "webhook", "kind": ["test"], "test": true},
                {"name": "decode", "kind": ["bench"], "test": false}
            ]},
            {"id": "registry+https://github.com/rust-lang/crates.io-index#serde@1.0.0", "targets": [
                {"name": "outside", "kind": ["test"], "test": true}
            ]}
        ]
    }"#;

    fn names(targets: &[Target]) -> Vec<&str> {
        targets.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn the_runs_are_the_unit_and_doc_tests_and_each_tested_integration_target_once() {
        let metadata: Metadata = serde_json::from_str(METADATA).unwrap();
        let targets = targets_of(&metadata);
        assert_eq!(
            names(&targets),
            ["unit tests (--lib --bins)", "doc tests (--doc)", "--test access", "--test webhook"],
            "no test = false suite, no bench, no package outside the workspace, a shared name once"
        );
        assert_eq!(targets[0].select, ["--lib", "--bins"]);
        assert_eq!(targets[1].select, ["--doc"]);
        assert_eq!(targets[3].select, ["--test", "webhook"]);
    }

    #[test]
    fn the_longest_first_and_an_unknown_one_before_them() {
        let targets = ["a", "b", "c", "new"].map(Target::integration).to_vec();
        let durations = read_durations("12.5\t--test a\n80.0\t--test b\nnot a line\nNaN\t--test c\n3\t--test c\n");
        assert_eq!(
            names(&longest_first(targets.clone(), &durations)),
            ["--test new", "--test b", "--test a", "--test c"]
        );
        assert_eq!(
            names(&longest_first(targets, &BTreeMap::new())),
            ["--test a", "--test b", "--test c", "--test new"]
        );
    }

    #[test]
    fn each_target_is_run_once_by_whichever_lane_takes_it_and_the_durations_kept() {
        let dir = tempfile_dir();
        let file = dir.join("test-durations.tsv");
        std::fs::write(&file, "9.0\t--test gone\n1.0\t--test a\n").unwrap();
        let queue = Queue::new(["a", "b", "c"].map(Target::integration).to_vec(), file.clone());
        let mut first_lane = Vec::new();
        let ran = queue.run_while_left(|target| {
            first_lane.push(target.name.clone());
            if first_lane.len() == 1 {
                let other = queue.run_while_left(|target| Err(anyhow::anyhow!("{} failed", target.name)));
                assert_eq!(format!("{:#}", other.unwrap_err()), "--test b failed\nand --test c: --test c failed");
            }
            Ok(Totals { passed: 2, ..Totals::default() })
        });
        assert_eq!(first_lane, ["--test a"], "nothing twice");
        assert_eq!(ran.unwrap().passed, 2);
        queue.save_durations();
        let kept = read_durations(&std::fs::read_to_string(&file).unwrap());
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["--test a", "--test b", "--test c", "--test gone"]);
        assert!(kept["--test a"] < 1.0, "this run's time replaces the last one's: {kept:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-test-queue-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
