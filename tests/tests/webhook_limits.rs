//! The webhook's limits, reached: nobody but the apiserver is answered on any path when its
//! client CA is given (`--apiserver-client-ca-file`), before a byte of a body is read; and
//! without it, bodies no apiserver sends (20 at once, each 8 MiB) keep the process well inside its
//! pod's 128 Mi and never hold up the small reviews every exec and shell waits on.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use myownshell_api::names;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{create_namespace, shared};
use myownshell_tests::tls_client::{HttpsConnection, tls_client};
use myownshell_tests::webhooks::{InstalledWebhooks, Target, WebhookOptions, WebhookProcess};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const READY: Duration = Duration::from_secs(60);
const BIG: usize = 8 * 1024 * 1024;

async fn webhook(prefix: &str, args: Vec<String>) -> (InstalledWebhooks, WebhookProcess) {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_namespace(&client, prefix).await.unwrap();
    let port = free_port().unwrap();
    let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.clone() };
    let installed = InstalledWebhooks::install(&client, &ns, &target).await.unwrap();
    let mut options = WebhookOptions::for_installed(&installed, &ns, port);
    options.args = args;
    let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
    webhook.wait_ready(READY).await.unwrap();
    (installed, webhook)
}

/// A small review, as the apiserver sends for a shell's creation.
fn small_review() -> Vec<u8> {
    let request = json!({"uid": "limits-1", "kind": {"group": names::GROUP, "version": "v1alpha1", "kind": names::KIND},
        "resource": {"group": names::GROUP, "version": "v1alpha1", "resource": "myownshells"},
        "name": "web", "namespace": "limits", "operation": "CREATE", "userInfo": {"username": "alice"},
        "object": {"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "web"}, "spec": {}}});
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .unwrap()
}

/// Announce a body of `length` bytes on `path` and send `sent` of them; the status line of the
/// answer, if one comes within `wait`.
async fn announce(addr: SocketAddr, path: &str, length: usize, sent: usize, wait: Duration) -> Option<String> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls_client(None).unwrap()));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 64 * 1024];
    let mut left = sent;
    while left > 0 {
        let n = left.min(chunk.len());
        if tls.write_all(&chunk[..n]).await.is_err() {
            break;
        }
        left -= n;
    }
    let mut answer = vec![0u8; 256];
    match tokio::time::timeout(wait, tls.read(&mut answer)).await {
        Ok(Ok(n)) if n > 0 => Some(String::from_utf8_lossy(&answer[..n]).lines().next().unwrap_or_default().to_owned()),
        _ => None,
    }
}

/// The process's peak resident memory (VmHWM), in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024
}

#[tokio::test]
async fn with_the_apiserver_ca_no_other_caller_is_answered_on_any_path_nor_its_body_read() {
    let ca = shared().webhook_client_ca_file();
    let (_installed, webhook) =
        webhook("limits-ca", vec![format!("--apiserver-client-ca-file={}", ca.display())]).await;
    for path in [names::MUTATE_PATH, names::VALIDATE_PATH, names::CONNECT_PATH] {
        // An 8 MiB body announced and never sent: the answer comes at once, the body unread.
        let started = Instant::now();
        let answer = announce(webhook.addr(), path, BIG, 0, Duration::from_secs(5)).await;
        assert_eq!(answer.as_deref(), Some("HTTP/1.1 403 Forbidden"), "{path}");
        assert!(started.elapsed() < Duration::from_secs(2), "{path}: answered after {:?}", started.elapsed());
        let mut conn = HttpsConnection::connect(webhook.addr(), None, "127.0.0.1").await.unwrap();
        let (status, text) = conn.post(path, small_review()).await.unwrap();
        assert_eq!(status, 403, "{path}: {}", String::from_utf8_lossy(&text));
        assert!(String::from_utf8_lossy(&text).contains("answers only the apiserver"), "{path}");
    }
}

#[tokio::test]
async fn bodies_no_apiserver_sends_keep_the_webhook_inside_its_pod_and_small_reviews_flowing() {
    let (_installed, webhook) = webhook("limits-open", Vec::new()).await;
    let before = peak_rss_mib(webhook.pid());
    // 20 connections each sending a whole 8 MiB body (the flood that once took it to 197 MB),
    // while a small review is asked for again and again.
    let addr = webhook.addr();
    let flood: Vec<_> = (0..20)
        .map(|i| {
            let path = [names::MUTATE_PATH, names::VALIDATE_PATH][i % 2];
            tokio::spawn(async move { announce(addr, path, BIG, BIG, Duration::from_secs(60)).await })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let mut conn = HttpsConnection::connect(addr, None, "127.0.0.1").await.unwrap();
        let (status, text) = conn.post(names::MUTATE_PATH, small_review()).await.unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&text));
        slowest = slowest.max(started.elapsed());
    }
    // Each big body is read in its turn and refused as no review (400), or, still waiting for
    // its turn at the request deadline, closed unread: either way, never held all at once.
    let mut refused = 0;
    for answer in flood {
        match answer.await.unwrap() {
            Some(line) if line.starts_with("HTTP/1.1 400") => refused += 1,
            None => {}
            Some(other) => panic!("a big body was answered {other}"),
        }
    }
    let peak = peak_rss_mib(webhook.pid());
    eprintln!(
        "webhook limits: peak RSS {before} MiB before, {peak} MiB after 20 bodies of 8 MiB ({refused} read and refused, the rest closed at the deadline); slowest small review {slowest:?}"
    );
    // 32 MiB of bodies at most (the large bodies' pool), on top of what it held before, and the
    // buffers of 21 connections: before the pools, 197 MB.
    assert!(peak < 112, "the webhook's peak RSS reached {peak} MiB (its pod's limit is 128 Mi)");
    // Within the apiserver's timeoutSeconds (config/webhook: 5 s), past which a review fails: a
    // small review never waits its turn behind the big ones (they draw on a pool of their own).
    assert!(slowest < Duration::from_secs(5), "a small review waited {slowest:?} behind the big bodies");
}
