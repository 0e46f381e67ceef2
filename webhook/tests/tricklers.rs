//! The admission port under a slow-request flood, over real TLS: clients that fill every
//! connection slot with requests whose bodies trickle in a byte at a time, or stop half-way, are
//! cut at the request deadline, so a real AdmissionReview queued behind them is still answered,
//! and answered right, soon after it. The webhook's own service on the workspace's TLS server,
//! at a small connection limit and a short deadline so the test takes seconds.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use myownshell_api::names;
use myownshell_runtime::guard::GuardConfig;
use myownshell_runtime::server::{ServeOptions, serve_tls_with};
use myownshell_webhook::admission::Policy;
use myownshell_webhook::metrics::Metrics;
use myownshell_webhook::server::{AppState, admission_service};
use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

const SLOTS: usize = 4;

/// Idle connections stay open for the whole test: only the request deadline frees a slot.
const GUARD: GuardConfig = GuardConfig {
    idle: Duration::from_secs(60),
    request: Duration::from_millis(800),
    tick: Duration::from_millis(100),
};

/// How late past the deadline the queued review may be answered: the guard looks every tick,
/// plus room for a busy machine.
const SLACK: Duration = Duration::from_secs(2);

async fn tls_connect(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tokio_rustls::TlsConnector::from(tls).connect(ServerName::try_from("127.0.0.1").unwrap(), tcp).await.unwrap()
}

/// A review of a `MyOwnShell` whose size breaks the policy.
fn review_of_a_bad_spec() -> Bytes {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "3f0e0b1c-trickler-test",
            "kind": {"group": names::GROUP, "version": names::VERSION, "kind": names::KIND},
            "resource": {"group": names::GROUP, "version": names::VERSION, "resource": names::PLURAL},
            "name": "queued", "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": {
                "apiVersion": names::API_VERSION, "kind": names::KIND,
                "metadata": {"name": "queued", "namespace": "team-a"},
                "spec": {"size": 500, "image": "busybox:1.37.0"}
            },
            "oldObject": null, "dryRun": false
        }
    });
    Bytes::from(serde_json::to_vec(&review).unwrap())
}

/// Hold a slot with a validating request whose announced body never arrives whole: one byte
/// per tick (`trickle`), or a few bytes and then silence. Connect again whenever cut; report
/// each connection that got its request head through.
async fn hold_a_slot(addr: SocketAddr, tls: Arc<rustls::ClientConfig>, trickle: bool, holding: mpsc::Sender<()>) {
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
        names::VALIDATE_PATH
    );
    loop {
        let mut stream = tls_connect(addr, tls.clone()).await;
        if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(b"{\"kind\":").await.is_err() {
            continue;
        }
        let _ = holding.send(()).await;
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout(GUARD.tick, stream.read(&mut buf)).await {
                // EOF, a reset, or a close without close_notify: cut, so start over.
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(_)) => {}
                Err(_) if trickle => {
                    if stream.write_all(b" ").await.is_err() || stream.flush().await.is_err() {
                        break;
                    }
                }
                Err(_) => {}
            }
        }
    }
}

#[tokio::test]
async fn admission_is_answered_while_trickled_bodies_hold_every_slot() {
    answered_while_slots_are_held(true).await;
}

#[tokio::test]
async fn admission_is_answered_while_bodies_stopped_half_way_hold_every_slot() {
    answered_while_slots_are_held(false).await;
}

/// Fill every slot with requests whose bodies trickle (`trickle`) or stop half-way, then send a
/// real review and check it is answered, and answered right, within the deadline and the slack.
async fn answered_while_slots_are_held(trickle: bool) {
    let myownshell_envtest::tls::LoopbackTls { server: server_tls, client: client_tls, .. } =
        myownshell_envtest::tls::loopback("tricklers-test-ca").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let state = AppState::new(Policy::default(), Arc::new(Metrics::new()));
    let options = ServeOptions { guard: GUARD, max_connections: SLOTS, ..ServeOptions::default() };
    let server = tokio::spawn(serve_tls_with(
        listener,
        server_tls,
        move |_| admission_service(state.clone()),
        options,
        shutdown.clone(),
    ));

    let (holding, mut held) = mpsc::channel(64);
    let holders: Vec<_> =
        (0..SLOTS).map(|_| tokio::spawn(hold_a_slot(addr, client_tls.clone(), trickle, holding.clone()))).collect();
    for _ in 0..SLOTS {
        tokio::time::timeout(Duration::from_secs(5), held.recv()).await.expect("a holder never got a slot");
    }

    // A real review, queued behind them.
    let started = Instant::now();
    let answer = tokio::time::timeout(GUARD.request + SLACK, async {
        let io = TokioIo::new(tls_connect(addr, client_tls.clone()).await);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let request = http::Request::post(names::VALIDATE_PATH)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(review_of_a_bad_spec()))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status();
        (status, response.into_body().collect().await.unwrap().to_bytes())
    })
    .await;
    let took = started.elapsed();
    for holder in &holders {
        holder.abort();
    }
    let (status, body) =
        answer.unwrap_or_else(|_| panic!("no answer in {took:?} while slow requests held all {SLOTS} slots"));
    eprintln!("trickle {trickle}: a queued review was answered after {took:?} (request deadline {:?})", GUARD.request);
    assert_eq!(status, http::StatusCode::OK);
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["response"]["uid"], "3f0e0b1c-trickler-test", "{review}");
    assert_eq!(review["response"]["allowed"], false, "{review}");
    let message = review["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("spec.size: must be between 0 and 50, got 500"), "{review}");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(15), server).await.expect("the server did not stop").unwrap().unwrap();
}
