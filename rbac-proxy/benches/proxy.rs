//! `cargo xtask bench proxy`: authenticated GETs of a fixed metrics body with a warm cache,
//! through the standalone `myownshell-rbac-proxy` (TLS + auth + forwarding) versus straight to
//! the same upstream, in the same run at the same concurrency. Prints requests/s, p50, p99 and
//! `ratio = proxied / direct` (requests/s), and two bounds measured alongside: the same upstream
//! over TLS (what any TLS endpoint costs) and a null proxy that forwards over TLS with no
//! authentication at all (what any TLS-terminating forwarder costs).
//!
//! Requests/s of a single-threaded proxy on a small machine that also runs the load generator
//! and the upstream swings with scheduling from run to run; the CPU each proxied request costs
//! against the null proxy's (from the kernel's per-thread counters, same run) is printed too.
//!
//! A real control plane (the test harness) issues the token and answers the one TokenReview and
//! SubjectAccessReview the warm-up costs; after that every request is served from the caches.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is the report

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use clap::Parser;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::rbac;
use myownshell_envtest::tls::LoopbackTls;
use myownshell_envtest::{ControlPlane, create_namespace, eventually, service_account_token};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};

#[derive(Parser)]
struct Args {
    /// Seconds measured per target.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Concurrent keep-alive connections (one request in flight on each).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Size of the metrics body.
    #[arg(long, default_value_t = 16 * 1024)]
    body_bytes: usize,
    /// The proxy's `--worker-threads`.
    #[arg(long, default_value_t = 1)]
    proxy_worker_threads: u16,
    /// cargo bench passes `--bench`; accepted and ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

struct Figures {
    requests: usize,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

/// A Prometheus-looking body of about `len` bytes.
fn metrics_body(len: usize) -> Bytes {
    let mut text = String::from("# HELP bench_series A series.\n# TYPE bench_series gauge\n");
    let mut i = 0;
    while text.len() < len {
        text.push_str(&format!("bench_series{{shard=\"{i}\"}} {i}\n"));
        i += 1;
    }
    text.truncate(len);
    Bytes::from(text)
}

fn upstream_app(body: Bytes) -> Router {
    Router::new().route("/metrics", get(move || std::future::ready(body.clone())))
}

async fn start_upstream(body: Bytes) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, upstream_app(body)).await.unwrap() });
    addr
}

/// The same upstream over TLS (same certificate stack as the proxy), to tell the cost of TLS
/// apart from the cost of the extra hop and the auth layer.
async fn start_tls_upstream(body: Bytes, config: Arc<rustls::ServerConfig>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(myownshell_runtime::server::serve_tls(
        listener,
        config,
        upstream_app(body),
        Default::default(),
        shutdown,
    ));
    addr
}

/// Nanoseconds the thread `task` (a `/proc/PID/task/TID` directory) has run on a CPU.
fn thread_cpu_ns(task: &std::path::Path) -> Option<u64> {
    let stat = std::fs::read_to_string(task.join("schedstat")).ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Nanoseconds all threads of process `pid` have run on a CPU.
fn process_cpu_ns(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks.filter_map(|task| thread_cpu_ns(&task.ok()?.path())).sum()
}

/// The least any TLS-terminating forwarder must do, with no authentication at all: a rustls +
/// hyper server and a pooled hyper client to the upstream, bodies streamed. It runs on its own
/// threads with as many runtime threads as the proxy gets (`--worker-threads`), so the two
/// compare like for like. Returns its address and, with one runtime thread (all of its work on
/// the thread started here), that thread's `/proc/PID/task/TID` directory.
fn start_null_proxy(
    upstream: SocketAddr,
    config: Arc<rustls::ServerConfig>,
    threads: u16,
) -> (SocketAddr, Option<std::path::PathBuf>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let (sender, thread) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // `/proc/thread-self` is `PID/task/TID`.
        let _ = sender.send(std::fs::read_link("/proc/thread-self").unwrap());
        let rt =
            myownshell_runtime::process::runtime(myownshell_runtime::process::Threads::Exactly(usize::from(threads)))
                .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
            connector.set_nodelay(true);
            let client: hyper_util::client::legacy::Client<_, hyper::body::Incoming> =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                tcp.set_nodelay(true).unwrap();
                let (acceptor, client) = (acceptor.clone(), client.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let client = client.clone();
                        async move {
                            let (mut parts, body) = req.into_parts();
                            let pq = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_owned();
                            parts.uri = format!("http://{upstream}{pq}").parse().unwrap();
                            parts.headers.remove(http::header::HOST);
                            client.request(Request::from_parts(parts, body)).await
                        }
                    });
                    let _ =
                        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
                });
            }
        });
    });
    let task = std::path::Path::new("/proc").join(thread.recv().unwrap());
    (addr, (threads == 1).then_some(task))
}

async fn tls_connection(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> Connection {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let stream =
        tokio_rustls::TlsConnector::from(tls).connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    Connection::open(stream).await
}

/// Give `ns/sa` `get` on `/metrics` and wait until RBAC says so.
async fn grant(
    admin: &kube::Client,
    ns: &str,
    sa: &str,
    token: &str,
    proxy: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
) {
    let name = format!("{ns}-bench-metrics-reader");
    let role = rbac::non_resource_reader_role(&name, &["/metrics"]);
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding = rbac::cluster_role_binding(&name, &name, rbac::service_account_subject(ns, sa));
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&PostParams::default(), &binding).await.unwrap();
    // Warm-up: the first 200 also fills the proxy's caches.
    eventually("the proxy to answer 200", Duration::from_secs(60), || async {
        let tcp = tokio::net::TcpStream::connect(proxy).await.map_err(|e| e.to_string())?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .map_err(|e| e.to_string())?;
        let mut conn = Connection::open(stream).await;
        match conn.get(Some(token)).await {
            StatusCode::OK => Ok(()),
            other => Err(other.to_string()),
        }
    })
    .await
    .unwrap();
}

struct Connection {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl Connection {
    async fn open<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(stream: S) -> Self {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        Self { sender }
    }

    async fn get(&mut self, token: Option<&str>) -> StatusCode {
        self.sender.ready().await.unwrap();
        let mut req = Request::get("/metrics").header("host", "localhost");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let response = self.sender.send_request(req.body(Empty::new()).unwrap()).await.unwrap();
        let status = response.status();
        // Read the whole body: that is what a scrape costs.
        response.into_body().collect().await.unwrap();
        status
    }
}

/// `concurrency` connections made by `connect`, each sending GETs back to back for `seconds`.
async fn measure<F, Fut>(concurrency: usize, seconds: u64, token: Option<String>, connect: F) -> Figures
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Connection>,
{
    let mut connections = Vec::new();
    for _ in 0..concurrency {
        connections.push(connect().await);
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let workers = connections.into_iter().map(|mut conn| {
        let token = token.clone();
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let sent = Instant::now();
                let status = conn.get(token.as_deref()).await;
                assert_eq!(status, StatusCode::OK);
                latencies.push(sent.elapsed());
            }
            latencies
        })
    });
    let mut latencies: Vec<Duration> = Vec::new();
    for worker in futures::future::join_all(workers).await {
        latencies.extend(worker.unwrap());
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    Figures { requests: latencies.len(), elapsed, p50: pct(0.50), p99: pct(0.99) }
}

fn print(name: &str, f: &Figures) {
    println!(
        "{name:<10} {:>10.0} req/s   p50 {:>8.2} ms   p99 {:>8.2} ms   ({} requests in {:.1?})",
        f.rate(),
        f.p50.as_secs_f64() * 1e3,
        f.p99.as_secs_f64() * 1e3,
        f.requests,
        f.elapsed
    );
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(bench(args));
}

async fn bench(args: Args) {
    let cp = ControlPlane::start().await.unwrap();
    eprintln!("{}", cp.summary());
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "bench-proxy").await.unwrap();
    let token = service_account_token(&admin, &ns, "scraper", &[], 3600).await.unwrap();

    let body = metrics_body(args.body_bytes);
    let upstream = start_upstream(body.clone()).await;

    let dir = tempfile::tempdir().unwrap();
    let LoopbackTls { leaf, server: serving, client: tls, .. } = myownshell_envtest::tls::loopback("bench-ca").unwrap();
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_file, &leaf.cert_pem).unwrap();
    std::fs::write(&key_file, &leaf.key_pem).unwrap();
    let proxy: SocketAddr = format!("127.0.0.1:{}", free_port().unwrap()).parse().unwrap();
    let spec = ProcessSpec::new(
        "myownshell-rbac-proxy",
        env!("CARGO_BIN_EXE_myownshell-rbac-proxy"),
        dir.path().join("proxy.log"),
    )
    .arg(format!("--secure-listen-address={proxy}"))
    .arg(format!("--upstream=http://{upstream}/"))
    .arg("--health-probe-bind-address=0")
    .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
    .arg(format!("--tls-cert-file={}", cert_file.display()))
    .arg(format!("--tls-private-key-file={}", key_file.display()))
    .arg("--authz-deny-cache-ttl=200ms")
    .arg(format!("--worker-threads={}", args.proxy_worker_threads))
    .env("RUST_LOG", "warn");
    let mut process = ManagedProcess::spawn(spec).unwrap();

    grant(&admin, &ns, "scraper", &token, proxy, &tls).await;

    println!(
        "rbac-proxy bench: {} B body, {} connections, {} s each, warm caches, proxy --worker-threads={}",
        body.len(),
        args.concurrency,
        args.seconds,
        args.proxy_worker_threads
    );
    let direct = measure(args.concurrency, args.seconds, Some(token.clone()), || async {
        Connection::open(tokio::net::TcpStream::connect(upstream).await.unwrap()).await
    })
    .await;
    print("direct", &direct);
    let tls_upstream = start_tls_upstream(body.clone(), serving.clone()).await;
    let direct_tls =
        measure(args.concurrency, args.seconds, Some(token.clone()), || tls_connection(tls_upstream, tls.clone()))
            .await;
    print("direct+tls", &direct_tls);
    let (null_proxy, null_task) = start_null_proxy(upstream, serving, args.proxy_worker_threads);
    // CPU per request: what the forwarder's threads ran during the phase, over its requests.
    let per_request = |ns: u64, f: &Figures| ns as f64 / f.requests as f64 / 1e3;
    let null_cpu_before = null_task.as_deref().and_then(thread_cpu_ns);
    let null =
        measure(args.concurrency, args.seconds, Some(token.clone()), || tls_connection(null_proxy, tls.clone())).await;
    let null_cpu =
        null_cpu_before.zip(null_task.as_deref().and_then(thread_cpu_ns)).map(|(a, b)| per_request(b - a, &null));
    print("null proxy", &null);
    let proxy_cpu_before = process_cpu_ns(process.pid());
    let proxied =
        measure(args.concurrency, args.seconds, Some(token.clone()), || tls_connection(proxy, tls.clone())).await;
    let proxy_cpu = per_request(process_cpu_ns(process.pid()) - proxy_cpu_before, &proxied);
    print("proxied", &proxied);
    let of_direct = |f: &Figures| f.rate() / direct.rate();
    println!("ratio = proxied/direct = {:.2} (target >= 0.8)", of_direct(&proxied));
    println!("  bounds on this machine, same run: any TLS server = direct+tls/direct = {:.2};", of_direct(&direct_tls));
    println!("  any TLS-terminating forwarder = null proxy/direct = {:.2}", of_direct(&null));
    println!(
        "proxied/null proxy = {:.2} (what authentication, authorization and this proxy's forwarding cost over the least a forwarder does)",
        proxied.rate() / null.rate()
    );
    match null_cpu {
        Some(null_cpu) => println!(
            "CPU per request: proxied {proxy_cpu:.1} us, null proxy {null_cpu:.1} us; null proxy/proxied = {:.2} \
             (each forwarder's own threads, from the kernel's counters)",
            null_cpu / proxy_cpu
        ),
        None => println!(
            "CPU per request: proxied {proxy_cpu:.1} us (the null proxy's is read with one worker thread only)"
        ),
    }
    let status = process.stop(Duration::from_secs(10)).unwrap();
    assert!(status.success(), "the proxy exited with {status}: {}", process.log_tail(20));
}
