//! The `myownshell-rbac-proxy` binary in front of an HTTP upstream started by the test, against
//! the real kube-apiserver.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::StreamBody;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, ObjectMeta, PostParams};
use myownshell_envtest::http::plain_get;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::{
    ControlPlane, assets, create_namespace, eventually, service_account_token, service_account_user, shared,
};
use myownshell_tests::rbac_proxy::*;
use tokio_util::sync::CancellationToken;

const BIG_DOWNLOAD: u64 = 48 << 20;
const BIG_UPLOAD: usize = 40 << 20;
/// A proxy that buffered either body would need more than this much memory (its peak is
/// about 26 MiB in a debug build, whatever the body sizes).
const STREAMING_MEMORY_LIMIT_KIB: u64 = 56 << 10;
const CHUNK: usize = 1 << 20;
/// Generated bodies repeat with this period (a prime, so chunk boundaries do not line up).
const PERIOD: u64 = 251;

/// `CHUNK + PERIOD` bytes of the pattern; any chunk of any body is a slice of it (no copy).
fn template() -> &'static Bytes {
    static TEMPLATE: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| (0..(CHUNK as u64 + PERIOD)).map(|i| (i % PERIOD) as u8).collect::<Vec<u8>>().into())
}

/// The pattern's bytes `start..start + len` (`len` at most `CHUNK`).
fn pattern_chunk(start: u64, len: usize) -> Bytes {
    let offset = (start % PERIOD) as usize;
    template().slice(offset..offset + len)
}

/// Checks a body against the pattern as it streams by, holding none of it.
#[derive(Debug, Default)]
struct PatternCheck {
    len: u64,
    first_mismatch: Option<u64>,
}

impl PatternCheck {
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let n = data.len().min(CHUNK);
            if self.first_mismatch.is_none() && data[..n] != pattern_chunk(self.len, n)[..] {
                self.first_mismatch = Some(self.len);
            }
            self.len += n as u64;
            data = &data[n..];
        }
    }

    /// `"<len> intact"` or `"<len> corrupt at <offset>"`.
    fn verdict(&self) -> String {
        match self.first_mismatch {
            None => format!("{} intact", self.len),
            Some(at) => format!("{} corrupt at {at}", self.len),
        }
    }
}

fn headers_json(headers: &HeaderMap) -> String {
    let map: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), serde_json::Value::String(v.to_str().unwrap_or("<binary>").to_owned())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// The upstream: a fixed metrics body, an echo of the request headers, a generated download
/// streamed in 1 MiB chunks, and an upload sink that streams and hashes what it receives.
async fn start_upstream(shutdown: CancellationToken) -> SocketAddr {
    let echo = get(|headers: HeaderMap| async move { headers_json(&headers) });
    let app = Router::new()
        .route("/metrics", get(|| async { METRICS_BODY }))
        .route("/headers", echo.clone())
        .route("/public/headers", echo)
        .route("/public/info", get(|| async { "public\n" }))
        .route(
            "/big",
            get(|| async {
                let chunks = (0..BIG_DOWNLOAD).step_by(CHUNK).map(|start| {
                    let n = (BIG_DOWNLOAD - start).min(CHUNK as u64) as usize;
                    Ok::<_, std::io::Error>(pattern_chunk(start, n))
                });
                Body::from_stream(futures::stream::iter(chunks))
            }),
        )
        .route(
            "/upload",
            post(|body: Body| async move {
                let mut body = body.into_data_stream();
                let mut check = PatternCheck::default();
                while let Some(chunk) = futures::StreamExt::next(&mut body).await {
                    check.feed(&chunk.map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?);
                }
                Ok::<_, (StatusCode, String)>(check.verdict())
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await.unwrap();
    });
    addr
}

/// One `myownshell-rbac-proxy` process with its own ports and serving certificate.
struct Proxy {
    process: ManagedProcess,
    addr: SocketAddr,
    health: SocketAddr,
    https: Https,
    _pki: ServingPki,
}

impl Proxy {
    async fn start(cp: &ControlPlane, upstream: SocketAddr, extra: &[&str]) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let pki = ServingPki::new();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port().unwrap()).parse().unwrap();
        let health: SocketAddr = format!("127.0.0.1:{}", free_port().unwrap()).parse().unwrap();
        let log = cp.layout().dir.join(format!("rbac-proxy-{}.log", N.fetch_add(1, Ordering::Relaxed)));
        let spec =
            ProcessSpec::new("myownshell-rbac-proxy", assets::workspace_binary("myownshell-rbac-proxy").unwrap(), log)
                .arg(format!("--secure-listen-address={addr}"))
                .arg(format!("--upstream=http://{upstream}/"))
                .arg(format!("--health-probe-bind-address={health}"))
                .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
                .arg(format!("--tls-cert-file={}", pki.cert_file.display()))
                .arg(format!("--tls-private-key-file={}", pki.key_file.display()))
                // Tests grant permissions after a first denial; do not wait out the 30 s default.
                .arg("--authz-deny-cache-ttl=500ms")
                .args(extra.iter().copied())
                .env("RUST_LOG", "info");
        let mut process = ManagedProcess::spawn(spec).unwrap();
        let ready = eventually("the proxy's /healthz", TIMEOUT, || async {
            plain_get(health, "/healthz")
                .await
                .and_then(|(status, body)| if status == 200 { Ok(body) } else { Err(format!("status {status}")) })
        })
        .await;
        if let Err(e) = ready {
            panic!("{e}\n--- proxy log ---\n{}", process.log_tail(30));
        }
        assert!(process.is_running());
        let https = Https::trusting(pki.ca_pem());
        Self { process, addr, health, https, _pki: pki }
    }

    async fn get(&self, path: &str, token: Option<&str>, headers: &[(&str, &str)]) -> Reply {
        self.https.get_with(self.addr, path, token, headers).await.unwrap()
    }

    /// Peak resident memory of the proxy so far.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// SIGTERM; the proxy must exit 0 and leave a log without any token in it. Returns the log.
    fn stop(mut self, tokens: &[&str]) -> String {
        let status = self.process.stop(Duration::from_secs(10)).unwrap();
        let log = std::fs::read_to_string(self.process.log_path()).unwrap();
        assert!(status.success(), "proxy exited with {status}\n{log}");
        for token in tokens {
            assert!(!log.contains(token), "a token is in the proxy log");
        }
        log
    }
}

/// A ClusterRole `get` + `create` on `urls`, bound to the ServiceAccount `ns/sa`.
async fn grant(admin: &kube::Client, ns: &str, sa: &str, urls: &[&str]) {
    let name = format!("{ns}-{sa}-proxy");
    let role = ClusterRole {
        metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(urls.iter().map(|u| (*u).to_owned()).collect()),
            verbs: vec!["get".into(), "create".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    bind_cluster_role(admin, &name, &name, service_account_subject(ns, sa)).await;
    for url in urls {
        wait_for_rbac(admin, &service_account_user(ns, sa), &[], url, true).await;
    }
}

fn echoed(reply: &Reply) -> serde_json::Value {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    serde_json::from_str(&reply.text()).unwrap()
}

#[tokio::test]
async fn the_proxy_forwards_streams_both_ways_and_sends_only_its_own_identity_headers() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "standalone").await.unwrap();
    let stop_upstream = CancellationToken::new();
    let upstream = start_upstream(stop_upstream.clone()).await;
    let proxy = Proxy::start(cp, upstream, &["--auth-header-fields-enabled"]).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let user = service_account_user(&ns, "scraper");

    assert_eq!(proxy.get("/metrics", None, &[]).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(proxy.get("/metrics", Some(&token), &[]).await.status, StatusCode::FORBIDDEN);
    grant(&admin, &ns, "scraper", &["/metrics", "/headers", "/big", "/upload"]).await;
    let metrics = eventually("the proxy to allow /metrics", TIMEOUT, || async {
        let reply = proxy.https.get(proxy.addr, "/metrics", Some(&token)).await?;
        if reply.status == StatusCode::OK { Ok(reply) } else { Err(reply.status.to_string()) }
    })
    .await
    .unwrap();
    assert_eq!(metrics.text(), METRICS_BODY);

    // Identity headers from the caller never arrive; the proxy's own do.
    let spoofed = [
        ("x-remote-user", "admin"),
        ("x-remote-groups", "system:masters"),
        ("x-remote-group", "system:masters"),
        ("x-remote-extra-scopes", "everything"),
    ];
    let seen = echoed(&proxy.get("/headers", Some(&token), &spoofed).await);
    assert_eq!(seen["x-remote-user"], user.as_str(), "{seen}");
    let groups = seen["x-remote-groups"].as_str().unwrap();
    assert!(groups.split('|').any(|g| g == "system:serviceaccounts") && !groups.contains("system:masters"), "{seen}");
    assert!(seen.get("x-remote-group").is_none() && seen.get("x-remote-extra-scopes").is_none(), "{seen}");
    assert!(seen.get("authorization").is_none(), "the caller's token reached the upstream: {seen}");
    assert_eq!(seen["x-forwarded-proto"], "https");

    // Large bodies stream through in both directions.
    let mut download = PatternCheck::default();
    let status = proxy.https.get_streaming(proxy.addr, "/big", &token, |data| download.feed(data)).await.unwrap();
    assert_eq!((status, download.verdict()), (StatusCode::OK, format!("{BIG_DOWNLOAD} intact")));
    let upload = futures::stream::iter((0..BIG_UPLOAD).step_by(CHUNK).map(|start| {
        Ok::<_, std::io::Error>(hyper::body::Frame::data(pattern_chunk(start as u64, (BIG_UPLOAD - start).min(CHUNK))))
    }));
    let request = Request::post("/upload")
        .header("host", "localhost")
        .header("authorization", format!("Bearer {token}"))
        .body(StreamBody::new(upload))
        .unwrap();
    let reply = proxy.https.send(proxy.addr, request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.text(), format!("{BIG_UPLOAD} intact"));
    let peak = proxy.peak_rss_kib();
    assert!(peak < STREAMING_MEMORY_LIMIT_KIB, "proxy peaked at {peak} KiB: bodies were buffered");

    // Health on its own plain-HTTP port; the secure port authenticates everything.
    assert_eq!(plain_get(proxy.health, "/healthz").await.unwrap(), (200, "ok".to_owned()));
    assert_eq!(proxy.get("/healthz", None, &[]).await.status, StatusCode::UNAUTHORIZED);

    proxy.stop(&[&token]);
    stop_upstream.cancel();
}

#[tokio::test]
async fn allow_paths_answer_404_outside_them_before_authentication() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "allow-paths").await.unwrap();
    let stop_upstream = CancellationToken::new();
    let upstream = start_upstream(stop_upstream.clone()).await;
    let proxy = Proxy::start(cp, upstream, &["--allow-paths=/metrics,/head*"]).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();

    for path in ["/public/info", "/big", "/metrics/x", "/"] {
        let reply = proxy.get(path, None, &[]).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}: {}", reply.text());
    }
    assert_eq!(proxy.get("/metrics", None, &[]).await.status, StatusCode::UNAUTHORIZED);
    grant(&admin, &ns, "scraper", &["/metrics", "/headers"]).await;
    let seen = eventually("the proxy to allow /headers", TIMEOUT, || async {
        let reply = proxy.https.get_with(proxy.addr, "/headers", Some(&token), &[("x-remote-user", "admin")]).await?;
        if reply.status == StatusCode::OK { Ok(echoed(&reply)) } else { Err(reply.status.to_string()) }
    })
    .await
    .unwrap();
    // Without --auth-header-fields-enabled no identity header reaches the upstream at all.
    assert!(seen.get("x-remote-user").is_none(), "{seen}");
    proxy.stop(&[&token]);
    stop_upstream.cancel();
}

#[tokio::test]
async fn ignore_paths_skip_authentication_but_still_strip_identity_headers() {
    let cp = shared();
    let stop_upstream = CancellationToken::new();
    let upstream = start_upstream(stop_upstream.clone()).await;
    let proxy = Proxy::start(cp, upstream, &["--ignore-paths=/public/*", "--auth-header-fields-enabled"]).await;

    let public = proxy.get("/public/info", None, &[]).await;
    assert_eq!((public.status, public.text().as_str()), (StatusCode::OK, "public\n"));
    let seen =
        echoed(&proxy.get("/public/headers", None, &[("x-remote-user", "admin"), ("x-remote-groups", "x")]).await);
    assert!(seen.get("x-remote-user").is_none() && seen.get("x-remote-groups").is_none(), "{seen}");
    for path in ["/metrics", "/public", "/headers"] {
        assert_eq!(proxy.get(path, None, &[]).await.status, StatusCode::UNAUTHORIZED, "{path}");
    }
    proxy.stop(&[]);
    stop_upstream.cancel();
}

#[tokio::test]
async fn bad_flags_fail_fast_with_a_reason() {
    let binary = assets::workspace_binary("myownshell-rbac-proxy").unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--upstream=http://127.0.0.1:1/", "--allow-paths=/a", "--ignore-paths=/b"], "cannot be used together"),
        (&["--upstream=https://127.0.0.1:1/"], "only http://"),
        (&["--upstream=http://127.0.0.1:1/", "--allow-paths=metrics"], "--allow-paths: path pattern \"metrics\""),
        (&["--upstream=http://127.0.0.1:1/", "--tls-cert-file=/x.crt"], "--tls-private-key-file"),
        (&["--upstream=http://127.0.0.1:1/", "--auth-cache-ttl=5"], "invalid duration"),
    ];
    for (args, want) in cases {
        let out = tokio::process::Command::new(&binary)
            .args(args)
            .args(["--health-probe-bind-address=0", "--secure-listen-address=127.0.0.1:0"])
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn the_upstream_being_down_is_a_502_not_a_hang() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "upstream-down").await.unwrap();
    let gone = format!("127.0.0.1:{}", free_port().unwrap()).parse().unwrap();
    let proxy = Proxy::start(cp, gone, &[]).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    grant(&admin, &ns, "scraper", &["/metrics"]).await;
    let status = eventually("a 502 from the proxy", TIMEOUT, || async {
        match proxy.https.status(proxy.addr, "/metrics", Some(&token)).await? {
            StatusCode::BAD_GATEWAY => Ok(()),
            other => Err(other.to_string()),
        }
    })
    .await;
    status.unwrap();
    proxy.stop(&[&token]);
}

/// A storm of refused scrapes: no refusal is logged one by one at info; one line per decision
/// and reason sums them up with its count (here at shutdown, before its minute is out).
#[tokio::test]
async fn denied_requests_are_summed_up_in_the_log_not_logged_one_by_one() {
    const NO_TOKEN: u64 = 60;
    const BAD_TOKEN: u64 = 20;
    const FORBIDDEN: u64 = 20;
    const BAD: &str = "not-a-real-token";
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "denial-log").await.unwrap();
    let stop_upstream = CancellationToken::new();
    let upstream = start_upstream(stop_upstream.clone()).await;
    let proxy = Proxy::start(cp, upstream, &["--log-format=json"]).await;
    let token = service_account_token(&admin, &ns, "nobody", &[], 600).await.unwrap();
    for (n, token, want) in [
        (NO_TOKEN, None, StatusCode::UNAUTHORIZED),
        (BAD_TOKEN, Some(BAD), StatusCode::UNAUTHORIZED),
        (FORBIDDEN, Some(token.as_str()), StatusCode::FORBIDDEN),
    ] {
        for _ in 0..n {
            let reply = proxy.get("/metrics", token, &[]).await;
            assert_eq!(reply.status, want, "{}", reply.text());
        }
    }
    let log = proxy.stop(&[&token, BAD]);
    stop_upstream.cancel();

    let lines: Vec<serde_json::Value> = log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    // The runtime's JSON lines carry an event's fields at the top level.
    let one_by_one = lines.iter().filter(|l| l["message"] == "request denied").count();
    assert_eq!(one_by_one, 0, "refusals logged one by one at info:\n{log}");
    let summaries: Vec<&serde_json::Value> = lines.iter().filter(|l| l["message"] == "requests denied").collect();
    let counted = |decision: &str, reason: Option<&str>| -> u64 {
        summaries
            .iter()
            .filter(|f| f["decision"] == decision && reason.is_none_or(|r| f["reason"] == r))
            .filter_map(|f| f["count"].as_u64())
            .sum()
    };
    assert_eq!(counted("unauthenticated", Some("no bearer token")), NO_TOKEN, "{log}");
    assert_eq!(counted("unauthenticated", Some("token rejected by TokenReview")), BAD_TOKEN, "{log}");
    assert_eq!(counted("deny", None), FORBIDDEN, "{log}");
    let forbidden = summaries.iter().find(|f| f["decision"] == "deny").unwrap();
    assert_eq!(forbidden["first_user"], service_account_user(&ns, "nobody"), "{log}");
    eprintln!("{} summary lines for {} refusals", summaries.len(), NO_TOKEN + BAD_TOKEN + FORBIDDEN);
}
