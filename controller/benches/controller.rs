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
//! Prints the times, `ratio = controller/floor`, `ratio = controller/same-writes floor`, what
//! each kind of write costs alone, and the controller process's peak RSS (VmHWM).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use myownshell_api::{MyOwnShell, MyOwnShellSpec, names};
use myownshell_controller::events::{actions, reasons};
use myownshell_controller::{deployment, status};
use myownshell_envtest::http::plain_get;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::{ControlPlane, create_namespace, eventually};

const DEADLINE: Duration = Duration::from_secs(600);

struct Options {
    objects: usize,
    concurrency: usize,
}

fn options() -> Options {
    let mut options = Options { objects: 1000, concurrency: 16 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse::<usize>().ok()).filter(|v| *v > 0);
        match args[i].as_str() {
            "--objects" => options.objects = value().unwrap_or_else(|| usage("--objects needs a positive number")),
            "--concurrency" => {
                options.concurrency = value().unwrap_or_else(|| usage("--concurrency needs a positive number"))
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
    eprintln!("{problem}\nusage: cargo xtask bench controller [--objects N] [--concurrency C]");
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
            let status = status::compute(shell, None, None, None, &Time(Timestamp::now()));
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

/// (time to converge, RSS when ready with nothing to do, peak RSS) in MiB.
async fn with_controller(cp: &ControlPlane, ns: &str, options: &Options) -> (Duration, f64, f64) {
    let probe_port = free_port().unwrap();
    let metrics_port = free_port().unwrap();
    let log = cp.layout().dir.join("controller-bench.log");
    let spec = ProcessSpec::new("controller", env!("CARGO_BIN_EXE_myownshell-controller"), &log)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .arg(format!("--namespace={ns}"))
        .arg(format!("--concurrency={}", options.concurrency))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{probe_port}"))
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
        .env("RUST_LOG", "warn");
    let mut controller = ManagedProcess::spawn(spec).unwrap();
    eventually("the controller to be ready", Duration::from_secs(30), || async {
        match plain_get(std::net::SocketAddr::from(([127, 0, 0, 1], probe_port)), "/readyz").await? {
            (200, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(20)));

    let idle = rss_mib(controller.pid(), "VmRSS:");
    let client = cp.client().unwrap();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let done = tokio::spawn(converged(cp.client().unwrap(), ns.to_owned(), options.objects));
    create_all(&shells, options.objects, options.concurrency, shell).await;
    tokio::time::timeout(DEADLINE, done)
        .await
        .unwrap_or_else(|_| panic!("not converged after {DEADLINE:?}\n{}", controller.log_tail(20)))
        .unwrap();
    let took = start.elapsed();
    let rss = rss_mib(controller.pid(), "VmHWM:");
    // What the controller did to get there, from its own counters.
    let metrics_addr = std::net::SocketAddr::from(([127, 0, 0, 1], metrics_port));
    if let Ok(text) = myownshell_tests::scrape::scrape(&client, metrics_addr).await {
        for line in text.lines().filter(|l| {
            l.starts_with("myownshell_controller_writes_total")
                || l.starts_with("myownshell_controller_reconciles_total")
        }) {
            println!("  {line}");
        }
    }
    assert!(controller.is_running(), "the controller died:\n{}", controller.log_tail(20));
    controller.stop(Duration::from_secs(10)).unwrap();
    (took, idle, rss)
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
        let floor = floor(client.clone(), &floor_ns, &options).await;
        let same = same_writes_floor(client.clone(), &same_ns, &options).await;
        let (controller, idle, rss) = with_controller(&cp, &ctrl_ns, &options).await;
        let parts = breakdown(client, &parts_ns, &options).await;
        let per_sec = |d: Duration| n as f64 / d.as_secs_f64();
        println!("controller bench: {n} objects, concurrency {}", options.concurrency);
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
        println!("  controller RSS idle = {idle:.1} MiB, peak (VmHWM) = {rss:.1} MiB");
    });
}
