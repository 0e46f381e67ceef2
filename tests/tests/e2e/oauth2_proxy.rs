//! The gateway behind oauth2-proxy, as the README's recipe puts it (the same command line,
//! `myownshell_envtest::oidc::oauth2_proxy`): oauth2-proxy runs on the host in front of the
//! deployed gateway (reached through `kubectl port-forward`, its serving certificate verified
//! against its CA), signs people in through the test bed's Hydra, and sends each request on with
//! the person's ID token as a bearer, which the gateway shows to TokenReview and the apiserver
//! (trusting Hydra through `--authentication-config`) names `oidc:alice`. In Chromium: alice
//! signs in on Hydra's login page, opens her shell and types `id -u`; bob signs in from another
//! browser and the connect gate refuses him in its words; requests from another origin with
//! alice's oauth2-proxy cookie, and so with her bearer, open no terminal and change nothing.
//! Neither oauth2-proxy's log nor the gateway's holds a token or a code.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::Method;
use myownshell_envtest::control_plane::write_private;
use myownshell_envtest::oidc::admin::Client;
use myownshell_envtest::oidc::oauth2_proxy::{self, CLIENT_ID, ProxyConfig};
use myownshell_envtest::oidc::random_secret;
use myownshell_envtest::oidc::users::{ALICE, BOB, User};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::ManagedProcess;
use myownshell_tests::browser::{Browser, Tab};
use myownshell_tests::gateway::GatewayClient;
use serde_json::json;

use super::gateway_browser::{run, screen, shot, type_line, until};
use super::{E2e, SYSTEM, gateway};

/// oauth2-proxy, running in front of the gateway.
struct Proxy {
    process: ManagedProcess,
    origin: String,
    addr: SocketAddr,
    /// A TLS client trusting its certificate.
    tls: Arc<rustls::ClientConfig>,
}

/// The phase.
pub async fn through_oauth2_proxy(e2e: &E2e) {
    let (_forward, gateway_port) = gateway::port_forward(e2e).await;
    let proxy = start(e2e, gateway_port).await;
    let ns = e2e.namespace("e2e-oauth2-proxy").await;
    let (alice, bob) = (format!("oidc:{}", ALICE.name), format!("oidc:{}", BOB.name));
    for user in [&alice, &bob] {
        let binding = format!("{}-edit", user.replace(':', "-"));
        run(&e2e.kubectl, &["create", "rolebinding", &binding, "--clusterrole=edit", "--user", user, "-n", &ns]).await;
    }
    let shell = "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata: {name: web}\nspec: {size: 1}\n";
    let groups = ["--as-group", "oidc:myownshell:users", "--as-group", "system:authenticated"];
    let apply = [&["--as", alice.as_str()][..], &groups, &["apply", "-n", &ns, "-f", "-"]].concat();
    let out = e2e.kubectl.run_with_stdin(&apply, Some(shell)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    e2e.wait_for("shell web ready", &["get", "mos", "web", "-n", &ns, "-o", "jsonpath={.status.readyReplicas}"], |s| {
        s.trim() == "1"
    })
    .await;

    let dir = super::gateway_browser::artifacts();
    let mut alices = Browser::launch().await.unwrap();
    let tab = alices.new_tab().await.unwrap();
    sign_in(&mut alices, &tab, &proxy.origin, e2e, &ALICE).await;
    until(&mut alices, &tab, "the gateway's page names alice", WHO, |v| v == alice.as_str()).await;
    shot(&mut alices, &tab, "oauth2-proxy-1-signed-in", &dir).await;
    alices.evaluate(&tab, &format!("location.hash = '#/{ns}/web'; true")).await.unwrap();
    until(&mut alices, &tab, "connected", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.starts_with("started session ") && s.contains(" in pod web-"))
    })
    .await;
    type_line(&mut alices, &tab, "id -u").await;
    screen(&mut alices, &tab, "`id -u` answered 65534", |s| s.lines().any(|l| l.trim() == "65534")).await;
    shot(&mut alices, &tab, "oauth2-proxy-2-id-u", &dir).await;

    let mut bobs = Browser::launch().await.unwrap();
    let bobs_tab = bobs.new_tab().await.unwrap();
    sign_in(&mut bobs, &bobs_tab, &proxy.origin, e2e, &BOB).await;
    until(&mut bobs, &bobs_tab, "the gateway's page names bob", WHO, |v| v == bob.as_str()).await;
    bobs.evaluate(&bobs_tab, &format!("location.hash = '#/{ns}/web'; true")).await.unwrap();
    let refusal = until(&mut bobs, &bobs_tab, "bob's refusal", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.contains("may not"))
    })
    .await;
    let refusal = refusal.as_str().unwrap_or_default();
    assert!(
        refusal.contains(&bob) && refusal.contains("which only its owner") && refusal.contains(&alice),
        "{refusal}"
    );
    shot(&mut bobs, &bobs_tab, "oauth2-proxy-3-bob-refused", &dir).await;
    drop(bobs);

    another_origin_gets_nothing(e2e, &mut alices, &tab, &proxy, &ns).await;
    drop(alices);
    no_token_in_the_logs(e2e, &proxy.process).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

/// The signed-in user's name on the gateway's page.
const WHO: &str = "document.getElementById('who') && document.getElementById('who').textContent";

/// oauth2-proxy in front of the gateway at `https://localhost:{gateway_port}/`, registered at
/// the provider as [`CLIENT_ID`], its files and log in the cluster's directory.
async fn start(e2e: &E2e, gateway_port: u16) -> Proxy {
    let dir = e2e.cluster.control_plane().layout().dir.join("oauth2-proxy");
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, contents: &str| -> PathBuf {
        let path = dir.join(name);
        write_private(&path, contents).unwrap();
        path
    };
    let port = free_port().unwrap();
    let origin = format!("https://127.0.0.1:{port}");
    let tls = myownshell_envtest::tls::loopback("e2e-oauth2-proxy").unwrap();
    let client_secret = random_secret().unwrap();
    // 32 hex digits: oauth2-proxy reads them as base64, 24 bytes, an AES-192 key.
    let cookie_secret = random_secret().unwrap()[..32].to_owned();
    let config = ProxyConfig {
        issuer: e2e.provider.issuer(),
        issuer_ca_file: file("issuer-ca.crt", e2e.provider.ca_pem()),
        client_secret_file: file("client-secret", &client_secret),
        cookie_secret_file: file("cookie-secret", &cookie_secret),
        origin: origin.clone(),
        listen: format!("127.0.0.1:{port}"),
        cert_file: file("tls.crt", &tls.leaf.cert_pem),
        key_file: file("tls.key", &tls.leaf.key_pem),
        // The name the gateway's serving certificate carries (see `gateway.rs`).
        upstream: format!("https://localhost:{gateway_port}/"),
    };
    let client = Client {
        client_id: CLIENT_ID.into(),
        client_secret,
        redirect_uris: vec![config.redirect_url()],
        id_token_lifespan: None,
        refresh_id_token_lifespan: None,
    };
    e2e.provider.create_client(&client).await.unwrap();
    let binary = oauth2_proxy::locate().unwrap();
    let process = oauth2_proxy::start(&binary, &config, &gateway::serving_ca_file(e2e), &dir, &tls.client)
        .await
        .unwrap_or_else(|e| panic!("oauth2-proxy in front of the gateway: {e}"));
    Proxy { process, origin, addr: ([127, 0, 0, 1], port).into(), tls: tls.client }
}

/// Open the proxy's `origin` in `tab`: oauth2-proxy sends the browser to Hydra, Hydra to its
/// login page, where `user` logs in as a person does (the form filled in and submitted).
async fn sign_in(browser: &mut Browser, tab: &Tab, origin: &str, e2e: &E2e, user: &User) {
    browser.navigate(tab, origin).await.unwrap();
    let login = e2e.provider.login_url();
    let at_login = format!("location.origin === {} && !!document.querySelector('input[name=username]')", js(&login));
    until(browser, tab, "Hydra's login page", &at_login, |v| v == true).await;
    let fill = format!(
        "document.querySelector('input[name=username]').value = {}; \
         document.querySelector('input[name=password]').value = {}; \
         document.querySelector('form').submit(); true",
        js(user.name),
        js(user.password)
    );
    browser.evaluate(tab, &fill).await.unwrap();
}

fn js(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// alice's oauth2-proxy cookie, as her browser holds it, sent from another origin: what a page
/// of another origin of the same site would make her browser send (her cookie is `SameSite=Lax`,
/// so only such a page gets it sent; Chromium did not send it from one in this test, so the
/// requests are made here with the browser's own cookie, as a browser that does would send them).
/// oauth2-proxy sends them on with her bearer, and the gateway refuses the WebSocket handshake
/// and the POST in its own words; the same POST from the page's origin is made as alice.
async fn another_origin_gets_nothing(e2e: &E2e, browser: &mut Browser, tab: &Tab, proxy: &Proxy, ns: &str) {
    let cookies = browser.call("Network.getCookies", json!({ "urls": [proxy.origin] }), Some(tab)).await.unwrap();
    let cookie: Vec<String> = cookies["cookies"]
        .as_array()
        .map(|all| {
            all.iter().map(|c| format!("{}={}", c["name"].as_str().unwrap(), c["value"].as_str().unwrap())).collect()
        })
        .unwrap_or_default();
    assert!(cookie.iter().any(|c| c.starts_with("_oauth2_proxy")), "alice's browser holds no oauth2-proxy cookie");
    let cookie = cookie.join("; ");
    let client = GatewayClient { addr: proxy.addr, tls: proxy.tls.clone() };
    let (evil, page) = ("https://evil.example", proxy.origin.as_str());
    let terminal = format!("/api/terminal/{ns}/web?cols=80&rows=24");
    let refused = client.websocket(&terminal, &[("cookie", &cookie), ("origin", evil)]).await.err();
    let refused = refused.expect("another origin's WebSocket handshake is refused");
    assert!(refused.starts_with("HTTP 403") && refused.contains("gateway's page"), "{refused}");
    let extend = format!("/api/shells/{ns}/web/extend");
    let (status, _, body) =
        client.request(Method::POST, &extend, &[("cookie", &cookie), ("origin", evil)], None).await.unwrap();
    assert_eq!((status, body.contains("gateway's page")), (403, true), "another origin's POST: {body}");
    let extended = ["get", "mos", "web", "-n", ns, "-o", "jsonpath={.spec.lifetime.extendedUntil}"];
    assert_eq!(run(&e2e.kubectl, &extended).await, "", "another origin's POST changed nothing");
    let (status, _, body) =
        client.request(Method::POST, &extend, &[("cookie", &cookie), ("origin", page)], None).await.unwrap();
    assert_eq!(status, 200, "the page's own POST, with the same cookie: {body}");
    assert_ne!(run(&e2e.kubectl, &extended).await, "", "the page's POST extended alice's shell");
}

/// No JWT (`eyJ…`, a JSON header in base64url) and no authorization code in oauth2-proxy's log,
/// Hydra's, or any gateway pod's.
async fn no_token_in_the_logs(e2e: &E2e, proxy: &ManagedProcess) {
    let gateway =
        run(&e2e.kubectl, &["logs", "-n", SYSTEM, "-l", "app.kubernetes.io/component=gateway", "--tail=-1"]).await;
    let logs =
        [("oauth2-proxy", read(proxy.log_path())), ("Hydra", read(&e2e.provider.log_path())), ("the gateway", gateway)];
    for (whose, log) in logs {
        assert!(!log.is_empty() || whose == "Hydra", "{whose}'s log is empty: nothing was looked at");
        assert!(!log.contains("eyJ"), "{whose}'s log holds a JWT");
        assert!(!log.contains("code="), "{whose}'s log holds an authorization code");
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
