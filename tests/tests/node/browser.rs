//! The tests' browser keeps loading pages while the host's network changes: the other lane of
//! `cargo xtask test` starts and stops clusters, each adding an address on the host and
//! removing it, and Chromium, when it shared the host's network, failed every connection it was
//! still setting up at that moment with `ERR_NETWORK_CHANGED` (the e2e's page phase did once,
//! through a port-forward's TLS handshake).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use myownshell_envtest::node::netns::HeldNetwork;
use myownshell_tests::browser::Browser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How long the server waits before its TLS handshake: about what a handshake through
/// `kubectl port-forward` (the apiserver, the kubelet, the pod) takes, the window in which a
/// change of the host's addresses failed the browser's connection.
const HANDSHAKE_DELAY: Duration = Duration::from_millis(300);
const PAGES: u32 = 12;

/// HTTPS on the host's loopback, each handshake after [`HANDSHAKE_DELAY`]; every request gets a
/// page titled `loaded`.
async fn slow_https() -> u16 {
    let tls = myownshell_envtest::tls::loopback("browser-network").unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server);
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // The delay stands for the port-forward's path; it waits for no state.
                tokio::time::sleep(HANDSHAKE_DELAY).await;
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut request = [0u8; 4096];
                let _ = tls.read(&mut request).await;
                let page = "<title>loaded</title>";
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

/// Add an address on the host and take it away again, over and over, as clusters starting and
/// stopping do: a veth whose other end is in a namespace of its own (so the link goes with
/// that namespace's holder if this test is killed), with an address from the benchmarking range
/// (RFC 2544) and up, then deleted. Counts the rounds in `rounds`.
async fn change_the_hosts_addresses(peer: &HeldNetwork, rounds: Arc<AtomicU32>) {
    let link = format!("mosbrw{}", std::process::id() % 100_000);
    let pid = peer.pid().to_string();
    let ip = |args: Vec<&str>| {
        let mut command = tokio::process::Command::new("ip");
        command.args(args).kill_on_drop(true);
        command
    };
    loop {
        let steps = [
            ip(vec!["link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &pid]),
            ip(vec!["addr", "add", "198.18.0.1/32", "dev", &link]),
            ip(vec!["link", "set", &link, "up"]),
            ip(vec!["link", "del", &link]),
        ];
        for mut step in steps {
            let out = step.output().await.unwrap();
            assert!(out.status.success(), "{step:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        rounds.fetch_add(1, Ordering::Relaxed);
        // Pacing, so the rounds spread over the page loads rather than keep a core busy.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn pages_load_while_the_hosts_addresses_come_and_go() {
    let port = slow_https().await;
    let dir = tempfile::Builder::new().prefix("browser-network-").tempdir().unwrap();
    let peer = HeldNetwork::start("address-changes", &dir.path().join("holder.log")).unwrap();
    let mut browser = Browser::launch().await.unwrap();
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    let browsers = std::fs::read_link(format!("/proc/{}/ns/net", browser.network_pid())).unwrap();
    assert_ne!(own, browsers, "the browser has a network namespace of its own");
    let tab = browser.new_tab().await.unwrap();

    let rounds = Arc::new(AtomicU32::new(0));
    let changes = change_the_hosts_addresses(&peer, rounds.clone());
    let pages = async {
        let mut failed = Vec::new();
        for page in 0..PAGES {
            let url = format!("https://127.0.0.1:{port}/{page}");
            if let Err(e) = browser.navigate(&tab, &url).await {
                failed.push(e);
            }
        }
        failed
    };
    let failed = tokio::select! {
        failed = pages => failed,
        () = changes => unreachable!("the changes go on until the pages are done"),
    };
    let rounds = rounds.load(Ordering::Relaxed);
    assert!(
        failed.is_empty(),
        "{} of {PAGES} pages failed while the host's addresses changed: {failed:?}",
        failed.len()
    );
    // The pages took PAGES × HANDSHAKE_DELAY at least; the changes must have overlapped them,
    // or this test proved nothing.
    assert!(rounds >= PAGES / 2, "only {rounds} rounds of address changes during {PAGES} page loads");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut title = browser.evaluate(&tab, "document.title").await;
    while title.as_ref().ok().and_then(|t| t.as_str()) != Some("loaded") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        title = browser.evaluate(&tab, "document.title").await;
    }
    assert_eq!(
        title.ok().and_then(|t| t.as_str().map(str::to_owned)).as_deref(),
        Some("loaded"),
        "the last page's title"
    );
}
