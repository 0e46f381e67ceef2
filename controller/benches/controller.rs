//! `cargo xtask bench controller [--objects N] [--concurrency C]`
//!
//! On a private test control plane (real etcd + kube-apiserver), in one run:
//! - warm-up: one object through every kind of write, so that no phase pays the apiserver's
//!   first-use costs (its first write of a custom resource takes about two seconds);
//! - floor: create N Deployments directly (the very objects the controller would build), C at a
//!   time, with one client;
//! - same-writes floor: the requests the controller path makes for N objects, made by a plain
//!   client with no watch, cache or reconcile in between: the N `MyOwnShell` creates C at a time
//!   (as the benchmark makes them) and, as each is created, its finalizer patch, Deployment
//!   lookup (a GET that finds none), apply, status patch and Created event, C objects at a time (as the controller's
//!   `--concurrency C`). This is what the apiserver must do for the end state; the clock stops
//!   as the controller's does, when a watch has seen every Deployment and every status;
//! - controller: start the real controller binary (release build, `--concurrency C`), create N
//!   `MyOwnShell`s C at a time with the same kind of client, and stop the clock when all N
//!   Deployments exist and all N statuses report the current generation.
//!
//! Then, with the controller holding the N converged objects:
//! - memory: RSS when ready with nothing, peak (VmHWM) and steady (VmRSS once idle for
//!   [`STEADY_AFTER`]), and both per object;
//! - churn: for each `--churn-rates` rate, spec updates (`size` 1 <-> 2) to random objects at
//!   that rate for `--churn-seconds`; queue latency and reconcile duration p50/p99 from the
//!   controller's own `/metrics` histograms (the figures users watch in production) against
//!   the SLOs (queue p99 <= 1 s, reconcile p99 <= 5 s), and how long after the last update
//!   every status showed its generation again;
//! - controller restart: a new controller process over the converged objects, the time until
//!   it is ready (caches synced) and until it has reconciled every object, and the writes it
//!   made: counted by the apiserver (`apiserver_request_total`, write verbs on MyOwnShells,
//!   Deployments and Events) and by resourceVersion (every MyOwnShell, Deployment and Event
//!   compared before and after); both must be 0;
//! - apiserver restart: the same counts after kube-apiserver restarts under the controller,
//!   which relists and reconciles every object;
//! - after each restart, the controller's peak RSS during it and its steady RSS.
//!
//! Prints the times, `ratio = controller/floor`, `ratio = controller/same-writes floor`, what
//! each kind of write costs alone, and the figures above. `--heap-profile PATH` runs each
//! controller process under heaptrack (read the profiles with `heaptrack_print PATH.first.zst`
//! and `PATH.restarted.zst`; the RSS figures are then heaptrack's, not the controller's, and
//! `cargo xtask bench` builds the controller with the C library's malloc, the one heaptrack sees).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, MyOwnShellSpec, names};
use myownshell_controller::events::actions;
use myownshell_controller::{deployment, status};
use myownshell_envtest::http::plain_get;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::{ControlPlane, create_namespace, eventually};
use myownshell_tests::controller::{
    histogram_buckets, histogram_delta, histogram_quantile, metric_value, resource_versions, written_between,
};

const DEADLINE: Duration = Duration::from_secs(600);
/// How long the controller idles after converging before its steady RSS is read: longer than
/// any requeue, and long enough for the allocator to hand freed pages back (jemalloc purges a
/// freed page within 10 s, its `dirty_decay_ms`; sampled every 10 s after a relist of 10,000
/// objects, RSS fell at 10 s and 20 s and not after, over 90 s).
const STEADY_AFTER: Duration = Duration::from_secs(20);
const QUEUE_LATENCY: &str = "myownshell_controller_reconcile_queue_latency_seconds";
const RECONCILE_DURATION: &str = "myownshell_controller_reconcile_duration_seconds";

struct Options {
    objects: usize,
    concurrency: usize,
    /// Run the controller under heaptrack, writing its profile here.
    heap_profile: Option<std::path::PathBuf>,
    /// Seconds of each churn phase (0: none).
    churn_seconds: u64,
    /// Updates per second, one churn phase each.
    churn_rates: Vec<u32>,
}

fn options() -> Options {
    let mut options =
        Options { objects: 1000, concurrency: 16, heap_profile: None, churn_seconds: 60, churn_rates: vec![100, 400] };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse::<usize>().ok()).filter(|v| *v > 0);
        match args[i].as_str() {
            "--objects" => options.objects = value().unwrap_or_else(|| usage("--objects needs a positive number")),
            "--concurrency" => {
                options.concurrency = value().unwrap_or_else(|| usage("--concurrency needs a positive number"))
            }
            "--churn-seconds" => {
                let seconds = args.get(i + 1).and_then(|v| v.parse().ok());
                options.churn_seconds = seconds.unwrap_or_else(|| usage("--churn-seconds needs a number"));
            }
            "--churn-rates" => {
                let rates: Option<Vec<u32>> = args
                    .get(i + 1)
                    .map(|v| {
                        v.split(',')
                            .filter(|r| !r.is_empty())
                            .map(|r| r.trim().parse().ok().filter(|r| *r > 0))
                            .collect()
                    })
                    .unwrap_or_default();
                options.churn_rates =
                    rates.unwrap_or_else(|| usage("--churn-rates needs rates per second, e.g. 100,400"));
            }
            "--heap-profile" => {
                let path = args.get(i + 1).unwrap_or_else(|| usage("--heap-profile needs a path"));
                options.heap_profile = Some(path.into());
            }
            // `cargo bench` passes `--bench`; nothing else is expected.
            "--bench" => {
                i += 1;
                continue;
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
        i += 2;
    }
    options
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "{problem}\nusage: cargo xtask bench controller [--objects N] [--concurrency C] [--churn-seconds S] [--churn-rates R,R] [--heap-profile PATH]"
    );
    std::process::exit(2)
}

fn shell(i: usize) -> MyOwnShell {
    MyOwnShell::new(&format!("shell-{i:05}"), MyOwnShellSpec { size: Some(1), ..MyOwnShellSpec::default() })
}

/// Create `n` objects, `concurrency` at a time.
async fn create_all<K, F>(api: &Api<K>, n: usize, concurrency: usize, make: F)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    F: Fn(usize) -> K,
{
    futures::stream::iter((0..n).map(|i| {
        let object = make(i);
        async move { api.create(&PostParams::default(), &object).await.map(|_| ()) }
    }))
    .buffer_unordered(concurrency)
    .try_collect::<Vec<()>>()
    .await
    .unwrap();
}

/// The requests the controller path makes for one object, in order: writes, and the one read
/// (a new object's Deployment is not in the cache, so the controller looks for a foreign one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Create,
    Finalizer,
    Lookup,
    Apply,
    Status,
    Event,
}

const REQUESTS: [Request; 6] =
    [Request::Create, Request::Finalizer, Request::Lookup, Request::Apply, Request::Status, Request::Event];
/// The writes that follow the create of an object.
const FOLLOW_UPS: &[Request] = REQUESTS.split_at(1).1;

impl Request {
    fn label(self) -> &'static str {
        match self {
            Request::Create => "create MyOwnShell",
            Request::Finalizer => "add the finalizer (JSON patch)",
            Request::Lookup => "look the Deployment up (GET, not found)",
            Request::Apply => "apply the Deployment (server-side apply)",
            Request::Status => "write the status (merge patch)",
            Request::Event => "record the Created event",
        }
    }
}

/// The same requests the controller makes, for the `MyOwnShell` `shell` already created.
async fn send(kind: Request, client: &Client, recorder: &Recorder, shell: &MyOwnShell) -> Result<(), kube::Error> {
    let ns = shell.namespace().unwrap_or_default();
    let name = shell.name_any();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    match kind {
        Request::Create => shells.create(&PostParams::default(), shell).await.map(|_| ()),
        Request::Finalizer => {
            // What kube's finalizer helper sends.
            let patch = serde_json::json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [names::FINALIZER]},
            ]);
            let patch: json_patch::Patch = serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
            shells.patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch)).await.map(|_| ())
        }
        Request::Lookup => Api::<Deployment>::namespaced(client.clone(), &ns).get_opt(&name).await.map(|_| ()),
        Request::Apply => {
            let desired = deployment::desired(shell, None).map_err(|e| kube::Error::Service(e.to_string().into()))?;
            Api::<Deployment>::namespaced(client.clone(), &ns)
                .patch(&name, &PatchParams::apply(names::FIELD_MANAGER).force(), &Patch::Apply(&desired))
                .await
                .map(|_| ())
        }
        Request::Status => {
            let status = status::compute(shell, None, &status::Inputs::default(), &Time(Timestamp::now()));
            let patch = Patch::Merge(serde_json::json!({ "status": status }));
            shells.patch_status(&name, &PatchParams::default(), &patch).await.map(|_| ())
        }
        Request::Event => {
            let event = Event {
                type_: EventType::Normal,
                reason: reasons::CREATED.into(),
                note: Some(format!("Created Deployment {name} with 1 shell pod(s)")),
                action: actions::APPLY.into(),
                secondary: None,
            };
            recorder.publish(&event, &shell.object_ref(&())).await
        }
    }
}

fn recorder(client: &Client) -> Recorder {
    Recorder::new(client.clone(), Reporter { controller: "myownshell-bench".into(), instance: None })
}

/// One object through every kind of write, in a namespace of its own.
async fn warm_up(client: &Client) {
    let ns = create_namespace(client, "bench-warmup").await.unwrap();
    let recorder = recorder(client);
    let mut shell = shell(0);
    shell.metadata.namespace = Some(ns.clone());
    send(Request::Create, client, &recorder, &shell).await.unwrap();
    let shell = Api::<MyOwnShell>::namespaced(client.clone(), &ns).get(&shell.name_any()).await.unwrap();
    for &kind in FOLLOW_UPS {
        send(kind, client, &recorder, &shell).await.unwrap();
    }
}

/// The same-writes floor (see the crate docs): how long it takes.
async fn same_writes_floor(client: Client, ns: &str, options: &Options) -> Duration {
    let recorder = recorder(&client);
    // Unbounded: it never holds more than the N objects anyway.
    let (created_tx, created_rx) = futures::channel::mpsc::unbounded::<MyOwnShell>();
    let start = Instant::now();
    // The same watcher stops this clock as the controller's: it loads the apiserver alike.
    let done = tokio::spawn(converged(client.clone(), ns.to_owned(), options.objects));
    let creates = {
        let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
        let (objects, concurrency) = (options.objects, options.concurrency);
        tokio::spawn(async move {
            futures::stream::iter((0..objects).map(|i| {
                let (shells, created_tx) = (shells.clone(), created_tx.clone());
                async move {
                    let created = shells.create(&PostParams::default(), &shell(i)).await?;
                    // The follow-up writes need the created object (uid, generation).
                    let _ = created_tx.unbounded_send(created);
                    Ok::<(), kube::Error>(())
                }
            }))
            .buffer_unordered(concurrency)
            .try_collect::<Vec<()>>()
            .await
        })
    };
    let follow_ups = created_rx
        .map(|created| {
            let (client, recorder) = (client.clone(), recorder.clone());
            async move {
                for &kind in FOLLOW_UPS {
                    send(kind, &client, &recorder, &created).await?;
                }
                Ok::<(), kube::Error>(())
            }
        })
        .buffer_unordered(options.concurrency)
        .try_collect::<Vec<()>>();
    follow_ups.await.unwrap();
    creates.await.unwrap().unwrap();
    tokio::time::timeout(DEADLINE, done).await.expect("the same-writes floor did not converge").unwrap();
    start.elapsed()
}

/// Each kind of write alone, for N objects C at a time (each needs the ones before it).
async fn breakdown(client: Client, ns: &str, options: &Options) -> Vec<(Request, Duration)> {
    let recorder = recorder(&client);
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let mut times = Vec::new();
    for kind in REQUESTS {
        let objects: Vec<MyOwnShell> = if kind == Request::Create {
            (0..options.objects)
                .map(|i| {
                    let mut s = shell(i);
                    s.metadata.namespace = Some(ns.to_owned());
                    s
                })
                .collect()
        } else {
            shells.list(&Default::default()).await.unwrap().items
        };
        let start = Instant::now();
        futures::stream::iter(objects.iter().map(|s| send(kind, &client, &recorder, s)))
            .buffer_unordered(options.concurrency)
            .try_collect::<Vec<()>>()
            .await
            .unwrap();
        times.push((kind, start.elapsed()));
    }
    times
}

async fn floor(client: Client, ns: &str, options: &Options) -> Duration {
    let deployments: Api<Deployment> = Api::namespaced(client, ns);
    let start = Instant::now();
    create_all(&deployments, options.objects, options.concurrency, |i| {
        let mut s = shell(i);
        s.metadata.namespace = Some(ns.to_owned());
        s.metadata.uid = Some(format!("00000000-0000-0000-0000-{i:012}"));
        deployment::desired(&s, None).unwrap()
    })
    .await;
    start.elapsed()
}

/// Resolves when `n` Deployments exist and `n` MyOwnShells report their current generation.
async fn converged(client: Client, ns: String, n: usize) {
    let deployments = watcher(Api::<Deployment>::namespaced(client.clone(), &ns), watcher::Config::default());
    let shells = watcher(Api::<MyOwnShell>::namespaced(client, &ns), watcher::Config::default());
    let mut seen_deployments = HashSet::new();
    let mut settled_shells = HashSet::new();
    let mut events = futures::stream::select(
        deployments.map_ok(|e| (Some(e), None)).boxed(),
        shells.map_ok(|e| (None, Some(e))).boxed(),
    );
    while seen_deployments.len() < n || settled_shells.len() < n {
        match events.next().await {
            Some(Ok((Some(watcher::Event::Apply(d) | watcher::Event::InitApply(d)), _))) => {
                seen_deployments.insert(d.name_any());
            }
            Some(Ok((_, Some(watcher::Event::Apply(s) | watcher::Event::InitApply(s))))) => {
                let current = s.status.as_ref().and_then(|st| st.observed_generation) == s.metadata.generation;
                if current && s.status.as_ref().is_some_and(|st| !st.conditions.is_empty()) {
                    settled_shells.insert(s.name_any());
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("watch failed: {e}"),
            None => panic!("watch ended"),
        }
    }
}

/// The controller binary under test, with its probe and metrics ports.
struct Controller {
    process: ManagedProcess,
    probe: SocketAddr,
    metrics: SocketAddr,
}

impl Controller {
    /// Start it (watching only `ns`) and wait until `/readyz` answers 200: both caches synced.
    /// Returns it and how long that took.
    async fn start(cp: &ControlPlane, ns: &str, options: &Options, name: &str) -> (Self, Duration) {
        let probe_port = free_port().unwrap();
        let metrics_port = free_port().unwrap();
        let log = cp.layout().dir.join(format!("controller-bench-{name}.log"));
        let binary = env!("CARGO_BIN_EXE_myownshell-controller");
        let spec = match &options.heap_profile {
            // One profile per controller process (`PATH.first.zst`, `PATH.restarted.zst`): heaptrack
            // would overwrite one file with the next.
            Some(path) => ProcessSpec::new("controller", "heaptrack", &log)
                .arg("-o")
                .arg(format!("{}.{name}", path.display()))
                .arg(binary),
            None => ProcessSpec::new("controller", binary, &log),
        };
        let spec = spec
            .arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .arg(format!("--namespace={ns}"))
            .arg(format!("--concurrency={}", options.concurrency))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{probe_port}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .env("RUST_LOG", "warn");
        let start = Instant::now();
        let process = ManagedProcess::spawn(spec).unwrap();
        let controller = Self {
            process,
            probe: SocketAddr::from(([127, 0, 0, 1], probe_port)),
            metrics: SocketAddr::from(([127, 0, 0, 1], metrics_port)),
        };
        eventually("the controller to be ready", Duration::from_secs(120), || async {
            match plain_get(controller.probe, "/readyz").await? {
                (200, _) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.process.log_tail(20)));
        (controller, start.elapsed())
    }

    /// A memory figure from /proc/PID/status (`VmRSS:` now, `VmHWM:` peak), in MiB.
    fn rss_mib(&self, field: &str) -> f64 {
        rss_mib(self.process.pid(), field)
    }

    /// Start the peak (VmHWM) over from the current RSS, so the next phase reports its own.
    fn reset_peak(&self) {
        let pid = self.process.pid();
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap_or_else(|e| panic!("resetting VmHWM: {e}"));
    }
}

/// The controller's peak RSS (VmHWM) now, and its RSS once idle for [`STEADY_AFTER`]
/// (allocators give freed memory back over seconds, not at once).
async fn peak_and_steady(controller: &Controller) -> (f64, f64) {
    let peak = controller.rss_mib("VmHWM:");
    tokio::time::sleep(STEADY_AFTER).await;
    (peak, controller.rss_mib("VmRSS:"))
}

/// A memory figure of a process from /proc/PID/status (`VmRSS:` now, `VmHWM:` peak), in MiB.
fn rss_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(f64::NAN);
    kb / 1024.0
}

/// Reads the controller's `/metrics` as an authorized scraper (one token for the whole run).
struct Scraper {
    token: String,
}

impl Scraper {
    async fn new(client: &Client) -> Self {
        Self { token: myownshell_tests::scrape::scraper_token(client).await.unwrap() }
    }

    async fn scrape(&self, controller: &Controller) -> String {
        let path = myownshell_runtime::paths::METRICS;
        match myownshell_tests::scrape::https_get(controller.metrics, path, Some(&self.token)).await {
            Ok((200, body)) => body,
            other => panic!("scraping the controller: {other:?}\n{}", controller.process.log_tail(20)),
        }
    }
}

/// The sum of every series of the counter family `name` (e.g. all `writes_total{kind}`).
fn family_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.split(' ').next() == Some(name))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// Wait until the controller has run at least `reconciles` reconciles since it started, none is
/// in flight and its reconcile count has not moved for two seconds. Returns how long it took.
async fn settled(scraper: &Scraper, controller: &Controller, reconciles: f64) -> Duration {
    let start = Instant::now();
    let mut last = (-1.0, Instant::now());
    loop {
        let text = scraper.scrape(controller).await;
        let done = family_sum(&text, "myownshell_controller_reconciles_total");
        let in_flight = metric_value(&text, "myownshell_controller_reconciles_in_flight").unwrap_or(0.0);
        if done != last.0 {
            last = (done, Instant::now());
        } else if done >= reconciles && in_flight == 0.0 && last.1.elapsed() >= Duration::from_secs(2) {
            return last.1.duration_since(start);
        }
        assert!(start.elapsed() < DEADLINE, "not settled: {done} of {reconciles} reconciles, {in_flight} in flight");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Write requests the apiserver served for MyOwnShells, Deployments and Events since it started
/// (`apiserver_request_total`, every write verb, any response code).
async fn apiserver_writes(client: &Client) -> f64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| ["POST", "PUT", "PATCH", "APPLY", "DELETE"].iter().any(|v| l.contains(&format!("verb=\"{v}\""))))
        .filter(|l| ["myownshells", "deployments", "events"].iter().any(|r| l.contains(&format!("resource=\"{r}\""))))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .fold(0.0, |sum, v| sum + v)
}

/// Objects written between two readings of every MyOwnShell's, Deployment's and Event's
/// resourceVersion in `ns`: the reading after is taken now.
async fn changed(client: &Client, ns: &str, before: &std::collections::BTreeMap<String, String>) -> usize {
    written_between(before, &resource_versions(client, ns).await.unwrap()).len()
}

/// Resolves when every MyOwnShell in `ns` reports its current generation.
async fn statuses_current(client: &Client, ns: &str) {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    eventually("every status to show its generation", DEADLINE, || async {
        let list = shells.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let behind = list
            .items
            .iter()
            .filter(|s| s.status.as_ref().and_then(|st| st.observed_generation) != s.metadata.generation)
            .count();
        if behind == 0 { Ok(()) } else { Err(format!("{behind} behind")) }
    })
    .await
    .unwrap();
}

/// A small deterministic generator for picking objects (splitmix64).
struct Picker(u64);

impl Picker {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// One churn phase: `rate` updates per second to random objects for `seconds`, then until every
/// status is current again; the SLO figures from the controller's histograms over the phase.
async fn churn(
    client: &Client,
    ns: &str,
    sizes: &mut [i32],
    rate: u32,
    seconds: u64,
    scraper: &Scraper,
    controller: &Controller,
) {
    let before = scraper.scrape(controller).await;
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let mut picker = Picker(u64::from(rate));
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    // Enough in flight for the rate at a few hundred ms per update; beyond it the rate falls.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(512));
    let mut sent = tokio::task::JoinSet::new();
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    while Instant::now() < end {
        ticks.tick().await;
        let i = picker.below(sizes.len());
        sizes[i] = if sizes[i] == 1 { 2 } else { 1 };
        let patch = Patch::Merge(serde_json::json!({"spec": {"size": sizes[i]}}));
        let (shells, slot) = (shells.clone(), slots.clone().acquire_owned().await.unwrap());
        sent.spawn(async move {
            let result = shells.patch(&shell(i).name_any(), &PatchParams::default(), &patch).await;
            drop(slot);
            result.map(|_| ())
        });
    }
    let mut failed = 0;
    let updates = sent.len();
    while let Some(result) = sent.join_next().await {
        failed += usize::from(!matches!(result, Ok(Ok(()))));
    }
    let sending = start.elapsed();
    statuses_current(client, ns).await;
    let drained = start.elapsed().saturating_sub(sending);
    let after = scraper.scrape(controller).await;
    let figures = |name: &str| {
        let delta = histogram_delta(&histogram_buckets(&after, name), &histogram_buckets(&before, name));
        let ms = |q| histogram_quantile(q, &delta).map_or(f64::NAN, |s| s * 1000.0);
        (ms(0.5), ms(0.99))
    };
    let (q50, q99) = figures(QUEUE_LATENCY);
    let (r50, r99) = figures(RECONCILE_DURATION);
    let verdict = |p99_ms: f64, slo_ms: f64| if p99_ms <= slo_ms { "within" } else { "OVER" };
    println!(
        "  churn {rate}/s for {seconds} s: {updates} updates ({:.0}/s achieved, {failed} failed); statuses current {drained:.2?} after the last",
        updates as f64 / sending.as_secs_f64()
    );
    println!(
        "    queue latency p50 {q50:.1} ms, p99 {q99:.1} ms ({} the SLO p99 <= 1 s); reconcile p50 {r50:.1} ms, p99 {r99:.1} ms ({} the SLO p99 <= 5 s)",
        verdict(q99, 1000.0),
        verdict(r99, 5000.0)
    );
    println!(
        "    reconciles {:.0}, writes {:.0}; controller RSS now {:.1} MiB, peak {:.1} MiB",
        family_sum(&after, "myownshell_controller_reconciles_total")
            - family_sum(&before, "myownshell_controller_reconciles_total"),
        family_sum(&after, "myownshell_controller_writes_total")
            - family_sum(&before, "myownshell_controller_writes_total"),
        controller.rss_mib("VmRSS:"),
        controller.rss_mib("VmHWM:"),
    );
}

/// The controller phases (see the crate docs). Returns the time to converge.
async fn with_controller(cp: &ControlPlane, ns: &str, options: &Options) -> Duration {
    let n = options.objects;
    let client = cp.client().unwrap();
    let scraper = Scraper::new(&client).await;
    let (mut controller, _) = Controller::start(cp, ns, options, "first").await;
    let idle = controller.rss_mib("VmRSS:");
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let done = tokio::spawn(converged(cp.client().unwrap(), ns.to_owned(), n));
    create_all(&shells, n, options.concurrency, shell).await;
    tokio::time::timeout(DEADLINE, done)
        .await
        .unwrap_or_else(|_| panic!("not converged after {DEADLINE:?}\n{}", controller.process.log_tail(20)))
        .unwrap();
    let took = start.elapsed();
    let peak = controller.rss_mib("VmHWM:");
    let text = scraper.scrape(&controller).await;
    println!("  after converging (the controller's own counters):");
    for line in text.lines().filter(|l| {
        l.starts_with("myownshell_controller_writes_total") || l.starts_with("myownshell_controller_reconciles_total")
    }) {
        println!("    {line}");
    }
    settled(&scraper, &controller, 0.0).await;
    tokio::time::sleep(STEADY_AFTER).await;
    let steady = controller.rss_mib("VmRSS:");
    let per_object = |mib: f64| (mib - idle) * 1024.0 / n as f64;
    println!(
        "  controller RSS: ready and empty {idle:.1} MiB; peak (VmHWM) {peak:.1} MiB = {:.1} KiB/object; steady (VmRSS {STEADY_AFTER:?} after converging) {steady:.1} MiB = {:.1} KiB/object",
        per_object(peak),
        per_object(steady)
    );

    if options.churn_seconds > 0 {
        let mut sizes = vec![1; n];
        for &rate in &options.churn_rates {
            churn(&client, ns, &mut sizes, rate, options.churn_seconds, &scraper, &controller).await;
        }
    }

    // Restart the controller over converged objects: it must write nothing.
    settled(&scraper, &controller, 0.0).await;
    let before = resource_versions(&client, ns).await.unwrap();
    let requests_before = apiserver_writes(&client).await;
    assert!(controller.process.is_running(), "the controller died:\n{}", controller.process.log_tail(20));
    controller.process.stop(Duration::from_secs(10)).unwrap();
    let (restarted, ready) = Controller::start(cp, ns, options, "restarted").await;
    controller = restarted;
    let reconciled = ready + settled(&scraper, &controller, n as f64).await;
    let requests = apiserver_writes(&client).await - requests_before;
    let rewritten = changed(&client, ns, &before).await;
    let (peak, steady) = peak_and_steady(&controller).await;
    println!(
        "  controller restart: ready (caches synced) in {ready:.2?}, every object reconciled in {reconciled:.2?}; writes: {requests:.0} requests at the apiserver, {rewritten} objects changed (must be 0, 0); RSS peak {peak:.1} MiB, steady {steady:.1} MiB",
    );

    // Restart kube-apiserver under the controller: the relist must write nothing either.
    let reconciles_before = family_sum(&scraper.scrape(&controller).await, "myownshell_controller_reconciles_total");
    let before = resource_versions(&client, ns).await.unwrap();
    controller.reset_peak();
    cp.stop_apiserver().unwrap();
    let down = Instant::now();
    cp.start_apiserver().await.unwrap();
    let back = down.elapsed();
    // Clients hold connections to the old process.
    let client = cp.client().unwrap();
    let resynced = settled(&scraper, &controller, reconciles_before + n as f64).await;
    let requests = apiserver_writes(&client).await;
    let rewritten = changed(&client, ns, &before).await;
    let (peak, steady) = peak_and_steady(&controller).await;
    println!(
        "  apiserver restart: apiserver back in {back:.2?}, every object relisted and reconciled {resynced:.2?} after; writes: {requests:.0} requests at the apiserver, {rewritten} objects changed (must be 0, 0); controller RSS peak {peak:.1} MiB, steady {steady:.1} MiB",
    );
    assert!(controller.process.is_running(), "the controller died:\n{}", controller.process.log_tail(20));
    controller.process.stop(Duration::from_secs(10)).unwrap();
    took
}

fn main() {
    let options = options();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let cp = ControlPlane::start().await.unwrap_or_else(|e| panic!("control plane: {e}"));
        eprintln!("{}", cp.summary());
        let client = cp.client().unwrap();
        warm_up(&client).await;
        let floor_ns = create_namespace(&client, "bench-floor").await.unwrap();
        let same_ns = create_namespace(&client, "bench-same-writes").await.unwrap();
        let ctrl_ns = create_namespace(&client, "bench-controller").await.unwrap();
        let parts_ns = create_namespace(&client, "bench-breakdown").await.unwrap();

        let n = options.objects;
        println!("controller bench: {n} objects, concurrency {}", options.concurrency);
        let floor = floor(client.clone(), &floor_ns, &options).await;
        let same = same_writes_floor(client.clone(), &same_ns, &options).await;
        let controller = with_controller(&cp, &ctrl_ns, &options).await;
        // The apiserver restarted: a fresh client.
        let client = cp.client().unwrap();
        let parts = breakdown(client, &parts_ns, &options).await;
        let per_sec = |d: Duration| n as f64 / d.as_secs_f64();
        println!("  floor: {n} Deployments created directly              {floor:>10.2?}  ({:.0}/s)", per_sec(floor));
        println!("  same-writes floor: the controller path's requests    {same:>10.2?}  ({:.0}/s)", per_sec(same));
        println!(
            "  controller: {n} MyOwnShells -> Deployments + status   {controller:>10.2?}  ({:.0}/s)",
            per_sec(controller)
        );
        println!("  ratio = controller/floor = {:.2}", controller.as_secs_f64() / floor.as_secs_f64());
        println!("  ratio = controller/same-writes floor = {:.2}", controller.as_secs_f64() / same.as_secs_f64());
        println!("  each kind of write alone ({n} objects, concurrency {}):", options.concurrency);
        for (kind, took) in &parts {
            println!(
                "    {:<42} {took:>10.2?}  ({:.2}x a Deployment create)",
                kind.label(),
                took.as_secs_f64() / floor.as_secs_f64()
            );
        }
        let sum: Duration = parts.iter().map(|(_, t)| *t).sum();
        println!(
            "    {:<42} {sum:>10.2?}  ({:.2}x)",
            "all of them, one after another",
            sum.as_secs_f64() / floor.as_secs_f64()
        );
    });
}
