//! `cargo xtask bench webhook` (or `cargo bench -p myownshell-webhook --bench webhook`):
//! AdmissionReview requests over TLS with keep-alive against the real webhook service, the same
//! decisions made with kube's own review types (`kube_types.rs`: the row that says whether the
//! webhook's hand-written request/response types earn their keep), and a minimal rustls + hyper
//! server answering a fixed body (the floor), all in this process and in the same run, at
//! concurrency 1, 8 and 32. Two bodies: a minimal review, and one captured from kube-apiserver
//! for `kubectl apply`. Prints p50/p99 latency, requests/s, and `ratio = server/floor` for
//! throughput.
//!
//! Flags after `--`: `--seconds N` per measurement (default 1), `--concurrency 1,8,32`,
//! `--rounds N` (default 5): webhook and floor are measured back to back N times (alternating
//! which goes first); the ratio is the median of the per-round ratios, so a burst of other work
//! on the machine moves one round, not the result. `--processes N` (default 3): all of that in
//! N fresh processes, summarised as the median over processes. Then the class row
//! (`classes.rs`): a shell of a class that needs a grant, against a real kube-apiserver for its
//! SubjectAccessReview (`KUBEBUILDER_ASSETS`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod classes;
mod connect;
mod kube_types;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use myownshell_api::names;
use myownshell_envtest::tls::LoopbackTls;
use myownshell_webhook::admission::Policy;
use myownshell_webhook::dispatch::Webhook;
use myownshell_webhook::metrics::Metrics;
use myownshell_webhook::server::{AppState, admission_service};
use rustls_pki_types::ServerName;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const WARMUP: Duration = Duration::from_millis(500);

struct Options {
    seconds: u64,
    concurrency: Vec<usize>,
    rounds: usize,
    /// Fresh processes to measure in; 0 means "this process is one of them".
    processes: usize,
}

fn options() -> Options {
    let mut o = Options { seconds: 1, concurrency: vec![1, 8, 32], rounds: 5, processes: 3 };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--seconds" if i + 1 < args.len() => {
                o.seconds = args[i + 1].parse().unwrap_or(o.seconds);
                i += 1;
            }
            "--rounds" if i + 1 < args.len() => {
                o.rounds = args[i + 1].parse().unwrap_or(o.rounds).max(1);
                i += 1;
            }
            "--concurrency" if i + 1 < args.len() => {
                o.concurrency = args[i + 1].split(',').filter_map(|c| c.trim().parse().ok()).collect();
                i += 1;
            }
            "--processes" if i + 1 < args.len() => {
                o.processes = args[i + 1].parse().unwrap_or(o.processes).max(1);
                i += 1;
            }
            "--trial" => o.processes = 0,
            _ => {} // `--bench` and the like from cargo
        }
        i += 1;
    }
    o
}

/// What kube-apiserver 1.35 sent the webhook for `kubectl apply` of a MyOwnShell (captured from
/// the test control plane): managedFields, the last-applied annotation, userInfo extras.
const KUBECTL_APPLY_REVIEW: &[u8] = include_bytes!("fixtures/review-kubectl-apply.json");

/// A CREATE of a MyOwnShell with a partial spec: the mutating webhook patches, the validating
/// one checks every field.
fn review_body() -> Bytes {
    let spec = json!({"size": 3, "image": "registry.example.com/tools/shell:1.4.2",
                      "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}});
    create_review(spec, "kubernetes-admin")
}

/// The AdmissionReview of a CREATE of shell `bench` in `team-a` with `spec`, by `user` (in
/// `system:masters`).
fn create_review(spec: serde_json::Value, user: &str) -> Bytes {
    let object = json!({
        "apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell",
        "metadata": {"name": "bench", "namespace": "team-a", "uid": "8d5b7f0e-2b1c-4c1e-9b3a-1f2e3d4c5b6a",
                     "labels": {"team": "a"}, "annotations": {"owner": "someone@example.com"}},
        "spec": spec
    });
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "myownshell.io", "version": "v1alpha1", "kind": "MyOwnShell"},
            "resource": {"group": "myownshell.io", "version": "v1alpha1", "resource": "myownshells"},
            "requestKind": {"group": "myownshell.io", "version": "v1alpha1", "kind": "MyOwnShell"},
            "requestResource": {"group": "myownshell.io", "version": "v1alpha1", "resource": "myownshells"},
            "name": "bench", "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": user, "groups": ["system:masters", "system:authenticated"]},
            "object": object, "oldObject": null, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    });
    Bytes::from(serde_json::to_vec(&review).unwrap())
}

/// The webhook: its real service on the real TLS server.
async fn start_webhook(tls: Arc<rustls::ServerConfig>, shutdown: CancellationToken) -> SocketAddr {
    start_webhook_with(tls, AppState::new(Policy::default(), Arc::new(Metrics::new())), shutdown).await
}

/// The webhook's real service with `state` on the real TLS server.
async fn start_webhook_with(
    tls: Arc<rustls::ServerConfig>,
    state: AppState,
    shutdown: CancellationToken,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(myownshell_runtime::server::serve_tls_with(
        listener,
        tls,
        move |_| admission_service(state.clone()),
        Default::default(),
        shutdown,
    ));
    addr
}

/// The same decisions on kube's review types, on the same TLS server.
async fn start_kube_types(tls: Arc<rustls::ServerConfig>, shutdown: CancellationToken) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(myownshell_runtime::server::serve_tls_with(
        listener,
        tls,
        move |_| kube_types::service(Policy::default()),
        Default::default(),
        shutdown,
    ));
    addr
}

/// The floor: rustls + hyper, reading the body and answering a fixed one. Nothing else.
async fn start_floor(tls: Arc<rustls::ServerConfig>, body: Bytes, shutdown: CancellationToken) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                _ = shutdown.cancelled() => return,
                a = listener.accept() => match a { Ok(c) => c, Err(_) => continue },
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let body = body.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else { return };
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let body = body.clone();
                    async move {
                        let _ = req.into_body().collect().await;
                        Ok::<_, Infallible>(
                            hyper::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(body))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

#[derive(Debug, Clone, Copy)]
struct Figures {
    p50: Duration,
    p99: Duration,
    rps: f64,
}

/// `concurrency` keep-alive connections, each sending requests back to back for `duration`
/// (after a warm-up that is not counted).
async fn load(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    concurrency: usize,
    duration: Duration,
    paths: [&'static str; 2],
    body: Bytes,
) -> Figures {
    let start_at = Instant::now() + WARMUP;
    let end_at = start_at + duration;
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (tls, body) = (tls.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
                .await
                .unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(conn);
            let mut latencies = Vec::with_capacity(100_000);
            let mut n = worker;
            loop {
                let now = Instant::now();
                if now >= end_at {
                    break;
                }
                let path = paths[n % 2];
                n += 1;
                let request = hyper::Request::post(path)
                    .header("host", "127.0.0.1")
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .unwrap();
                sender.ready().await.unwrap();
                let response = sender.send_request(request).await.unwrap();
                assert_eq!(response.status(), 200);
                let _ = response.into_body().collect().await.unwrap();
                if now >= start_at {
                    latencies.push(now.elapsed());
                }
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_unstable();
    let pick = |q: f64| {
        all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1))).copied().unwrap_or_default()
    };
    Figures { p50: pick(0.50), p99: pick(0.99), rps: all.len() as f64 / duration.as_secs_f64() }
}

/// The round with the median throughput (its latencies come with it).
fn median_round(rounds: &[Figures]) -> Figures {
    let mut sorted = rounds.to_vec();
    sorted.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    sorted[sorted.len() / 2]
}

fn median(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

/// Where the three servers of a run listen.
#[derive(Clone, Copy)]
struct Servers {
    webhook: SocketAddr,
    kube: SocketAddr,
    floor: SocketAddr,
}

/// Rounds of the webhook, kube's types and the floor at each concurrency; prints the figures.
async fn measure(opts: &Options, tls: &LoopbackTls, servers: Servers, body: &Bytes, body_index: usize) {
    let duration = Duration::from_secs(opts.seconds);
    println!("{:>11} {:>8} {:>11} {:>11} {:>11}", "concurrency", "server", "p50", "p99", "req/s");
    let paths = [names::MUTATE_PATH, names::VALIDATE_PATH];
    for &c in &opts.concurrency {
        let (mut w, mut k, mut f) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..opts.rounds {
            // Each round measures all three back to back, in rotating order, so drift and
            // bursts of other work on the machine fall on all alike.
            let run = |addr| load(addr, tls.client.clone(), c, duration, paths, body.clone());
            for turn in 0..3 {
                match (round + turn) % 3 {
                    0 => w.push(run(servers.webhook).await),
                    1 => k.push(run(servers.kube).await),
                    _ => f.push(run(servers.floor).await),
                }
            }
        }
        let ratios = |of: &[Figures]| {
            let mut r: Vec<f64> = of.iter().zip(&f).map(|(a, f)| a.rps / f.rps).collect();
            r.sort_by(f64::total_cmp);
            r
        };
        let (wr, kr) = (ratios(&w), ratios(&k));
        let (w, k, f) = (median_round(&w), median_round(&k), median_round(&f));
        println!("{c:>11} {:>8} {:>11} {:>11} {:>11.0}", "webhook", ms(w.p50), ms(w.p99), w.rps);
        println!("{c:>11} {:>8} {:>11} {:>11} {:>11.0}", "kube", ms(k.p50), ms(k.p99), k.rps);
        println!("{c:>11} {:>8} {:>11} {:>11} {:>11.0}", "floor", ms(f.p50), ms(f.p99), f.rps);
        let each = |r: &[f64]| r.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(" ");
        println!("{c:>11} ratio = webhook/floor = {:.2} (median of rounds: {})", median(&wr), each(&wr));
        println!("{c:>11} ratio = kube types/floor = {:.2} (median of rounds: {})", median(&kr), each(&kr));
        // For the parent process's summary.
        println!(
            "result {body_index} {c} {:.4} {:.4} {:.4} {:.4}",
            median(&wr),
            w.p99.as_secs_f64() * 1e3,
            median(&kr),
            k.p99.as_secs_f64() * 1e3
        );
    }
}

/// Run this benchmark in `options.processes` fresh processes, one after another, and summarise:
/// the same binary measures ±0.04 apart from one process to the next (placement and layout),
/// while rounds within one process agree, so the median over processes is the figure to trust.
fn run_trials(options: &Options) {
    let exe = std::env::current_exe().unwrap();
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    type Run = (f64, f64, f64, f64);
    let mut results: std::collections::BTreeMap<(usize, usize), Vec<Run>> = Default::default();
    for trial in 1..=options.processes {
        println!("--- process {trial} of {}", options.processes);
        let output = std::process::Command::new(&exe).args(&args).arg("--trial").output().unwrap();
        assert!(output.status.success(), "trial failed: {}", String::from_utf8_lossy(&output.stderr));
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["result", body, c, ratio, p99, kube_ratio, kube_p99] => {
                    results.entry((body.parse().unwrap(), c.parse().unwrap())).or_default().push((
                        ratio.parse().unwrap(),
                        p99.parse().unwrap(),
                        kube_ratio.parse().unwrap(),
                        kube_p99.parse().unwrap(),
                    ))
                }
                _ => println!("{line}"),
            }
        }
    }
    println!("=== summary over {} processes (median of each process's median ratio)", options.processes);
    for ((body, c), runs) in results {
        let summary = |ratio: fn(&Run) -> f64, p99: fn(&Run) -> f64| {
            let mut sorted = runs.clone();
            sorted.sort_by(|a, b| ratio(a).total_cmp(&ratio(b)));
            let each: Vec<String> = sorted.iter().map(|r| format!("{:.2}", ratio(r))).collect();
            let mid = &sorted[sorted.len() / 2];
            (ratio(mid), each.join(" "), p99(mid))
        };
        let (ratio, each, p99) = summary(|r| r.0, |r| r.1);
        let name = BODY_NAMES[body];
        println!(
            "{name:<8} concurrency {c:>2}: ratio = webhook/floor = {ratio:.2} (processes: {each}), webhook p99 {p99:.3} ms"
        );
        if body == 2 {
            // The class row has no kube-types server.
            continue;
        }
        let (ratio, each, p99) = summary(|r| r.2, |r| r.3);
        println!(
            "{name:<8} concurrency {c:>2}: ratio = kube types/floor = {ratio:.2} (processes: {each}), kube types p99 {p99:.3} ms"
        );
    }
}

/// The kube-types row must make the webhook's decisions, or the comparison means nothing: both
/// answers, read back with kube's types, allow alike, patch alike and warn alike. `ours` are the
/// webhook's answers to `body` on the mutating and the validating path.
fn same_answers(body: &[u8], ours: [&[u8]; 2]) {
    use base64::Engine;
    // (allowed, warnings, patch). kube writes the patch as an array of bytes, the webhook as
    // base64 text, as the apiserver's Go types read `[]byte` either way.
    let read = |json: &[u8]| {
        let review: serde_json::Value = serde_json::from_slice(json).unwrap();
        let response = &review["response"];
        let patch: Option<Vec<u8>> = match &response["patch"] {
            serde_json::Value::String(text) => Some(base64::engine::general_purpose::STANDARD.decode(text).unwrap()),
            serde_json::Value::Null => None,
            bytes => Some(serde_json::from_value(bytes.clone()).unwrap()),
        };
        let patch = patch.map(|p| serde_json::from_slice::<serde_json::Value>(&p).unwrap());
        (response["allowed"].clone(), response["warnings"].clone(), patch)
    };
    for (path, ours) in [names::MUTATE_PATH, names::VALIDATE_PATH].into_iter().zip(ours) {
        let theirs = kube_types::answer(path, body, &Policy::default()).unwrap();
        assert_eq!(read(ours), read(&theirs), "{path}: the two answers differ");
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Short names of the two bodies, for the summary.
const BODY_NAMES: [&str; 3] = ["minimal", "kubectl", "classed"];

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let opts = options();
    if opts.processes > 0 {
        run_trials(&opts);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let tls = myownshell_envtest::tls::loopback("bench-ca").unwrap();
        let shutdown = CancellationToken::new();
        let webhook = start_webhook(tls.server.clone(), shutdown.clone()).await;
        let kube = start_kube_types(tls.server.clone(), shutdown.clone()).await;
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let bodies = [
            ("a minimal review", review_body()),
            ("a kubectl-apply review as kube-apiserver 1.35 sends it", Bytes::from_static(KUBECTL_APPLY_REVIEW)),
        ];
        for (body_index, (what, body)) in bodies.into_iter().enumerate() {
            // The floor answers with what the webhook would answer, byte for byte.
            let state = AppState::new(Policy::default(), Arc::new(Metrics::new()));
            let answer = |webhook| {
                let response = myownshell_webhook::server::answer(webhook, &body, &state, Instant::now());
                response.into_body().collect()
            };
            let sample = answer(Webhook::Mutate).await.unwrap().to_bytes();
            let validated = answer(Webhook::Validate).await.unwrap().to_bytes();
            same_answers(&body, [&sample, &validated]);
            let floor = start_floor(tls.server.clone(), sample, shutdown.clone()).await;
            println!(
                "webhook bench: {what} ({} bytes, CREATE, alternating mutate/validate), TLS keep-alive, {} paired rounds of {}s, {cores} cores, release={}",
                body.len(),
                opts.rounds,
                opts.seconds,
                !cfg!(debug_assertions)
            );
            measure(&opts, &tls, Servers { webhook, kube, floor }, &body, body_index).await;
        }
        connect::measure(&tls, opts.seconds, opts.rounds, &shutdown).await;
        classes::measure(&opts, &tls, &shutdown).await;
        shutdown.cancel();
    });
}
