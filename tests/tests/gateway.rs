//! The gateway against the real kube-apiserver and the real connect gate (a `myownshell-webhook`
//! process): sign-in with tokens the cluster authenticates, the session cookie, CSRF and
//! `Origin` checks, and terminals opened **as the user**: the owner gets through the gate, a
//! stranger gets the gate's refusal naming them. The gateway runs as a ServiceAccount bound to
//! exactly the ClusterRole `config/rbac/gateway_role.yaml` ships.
//!
//! No pod runs on the API-only plane, so the owner's exec, once admitted, ends at the apiserver
//! with "does not have a host assigned"; the real node's e2e types into a real shell in
//! Chromium (`tests/tests/e2e/gateway.rs`).

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt;
use http::Method;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use myownshell_api::MyOwnShell;
use myownshell_certs::pki::{CertificateAuthority, LeafSpec};
use myownshell_envtest::Kubectl;
use myownshell_envtest::assets::workspace_root;
use myownshell_envtest::control_plane::{ControlPlane, Options, write_kubeconfig};
use myownshell_envtest::kustomize::render;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{
    create_shell_namespace, eventually, rbac, service_account_token, service_account_user, shared, shared_with,
};
use myownshell_tests::access::{namespace_editors, shell_manifest};
use myownshell_tests::gateway::{GatewayProcess, session_cookie};
use myownshell_tests::shell_pods;
use myownshell_tests::tokens::forge_service_account_token;
use myownshell_tests::webhooks::{InstalledWebhooks, WebhookProcess};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const READY: Duration = Duration::from_secs(60);
const HOUR: i64 = 3600;

struct World {
    cp: &'static ControlPlane,
    client: Client,
    ns: String,
    gateway: GatewayProcess,
    _webhook: Option<(InstalledWebhooks, WebhookProcess)>,
}

/// The ClusterRole `config/rbac/gateway_role.yaml` ships.
fn shipped_role() -> ClusterRole {
    let text = std::fs::read_to_string(workspace_root().join("config/rbac/gateway_role.yaml")).unwrap();
    let role = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "ClusterRole")
        .expect("a ClusterRole in gateway_role.yaml");
    serde_json::from_value(role).unwrap()
}

/// `role`, bound to this test's gateway ServiceAccount under a name of its own; its token.
async fn gateway_identity(client: &Client, ns: &str, mut role: ClusterRole) -> String {
    let name = format!("{ns}-gateway");
    role.metadata = kube::api::ObjectMeta { name: Some(name.clone()), ..Default::default() };
    let apply = PatchParams::apply("myownshell-tests").force();
    Api::<ClusterRole>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&role)).await.unwrap();
    let binding = rbac::cluster_role_binding(&name, &name, rbac::service_account_subject(ns, "gateway"));
    Api::<ClusterRoleBinding>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&binding)).await.unwrap();
    service_account_token(client, ns, "gateway", &[], HOUR).await.unwrap()
}

impl World {
    /// A namespace opened to shells whose editors are the ServiceAccounts alice and bob, a
    /// gateway, and (with `gate`) the connect webhook for the namespace.
    async fn start(prefix: &str, gate: bool, flags: &[&str]) -> World {
        World::start_on(shared(), shipped_role(), prefix, gate, flags, &[]).await
    }

    /// [`World::start`] on `cp`, the gateway granted `role`, and `people` editors too.
    async fn start_on(
        cp: &'static ControlPlane,
        role: ClusterRole,
        prefix: &str,
        gate: bool,
        flags: &[&str],
        people: &[&str],
    ) -> World {
        let client = cp.client().unwrap();
        let ns = create_shell_namespace(&client, prefix).await.unwrap();
        let users = [service_account_user(&ns, "alice"), service_account_user(&ns, "bob")];
        let mut editors = vec![users[0].as_str(), users[1].as_str()];
        editors.extend(people);
        namespace_editors(&client, &ns, &editors, &[]).await.unwrap();
        let token = gateway_identity(&client, &ns, role).await;
        let kubeconfig = cp.layout().dir.join(format!("{ns}-gateway.kubeconfig"));
        write_kubeconfig(&kubeconfig, &cp.kubeconfig_for_token(&token)).unwrap();
        let webhook = match gate {
            true => Some(myownshell_tests::webhooks::connect_gate(cp, &client, &ns).await.unwrap()),
            false => None,
        };
        let gateway = GatewayProcess::start(cp, kubeconfig, &format!("{ns}-gateway"), flags).await.unwrap();
        World { cp, client, ns, gateway, _webhook: webhook }
    }

    async fn token(&self, who: &str) -> String {
        service_account_token(&self.client, &self.ns, who, &[], HOUR).await.unwrap()
    }

    /// Sign in with `token` from the page: the session cookie and the CSRF token.
    async fn sign_in(&self, token: &str) -> (String, String) {
        let origin = self.gateway.origin();
        let (status, headers, body) = self
            .gateway
            .request(Method::POST, "/api/session", &[("origin", &origin)], Some(json!({ "token": token })))
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        (session_cookie(&headers).expect("a session cookie"), answer["csrf"].as_str().unwrap().to_owned())
    }

    /// `who`'s shell `name`, applied as them (so they are its owner).
    async fn shell(&self, who: &str, name: &str) {
        let cp = self.cp;
        let user = service_account_user(&self.ns, who);
        let manifest = shell_manifest(name, "{size: 1}");
        let mut args = myownshell_tests::access::as_user(&user, &["system:authenticated"]);
        args.extend(["apply", "-n", &self.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cp.kubectl().run_with_stdin(&args, Some(&manifest)).await.unwrap();
        assert!(out.success, "{}", out.stderr);
    }

    /// A ready pod for shell `name`, and the selector in its status (no controller runs here).
    async fn ready_pod(&self, name: &str) -> String {
        shell_pods::ready(&self.client, &self.ns, name).await.unwrap()
    }

    /// Open shell `name`'s terminal as the holder of `cookie`; every JSON message until the
    /// socket closes (or the 20th).
    async fn terminal_messages(&self, cookie: &str, name: &str) -> Vec<Value> {
        let origin = self.gateway.origin();
        self.terminal_messages_with(&[("cookie", cookie), ("origin", &origin)], name).await
    }

    /// [`World::terminal_messages`] with these headers instead of the cookie's.
    async fn terminal_messages_with(&self, headers: &[(&str, &str)], name: &str) -> Vec<Value> {
        let path = format!("/api/terminal/{}/{name}?cols=80&rows=24", self.ns);
        let mut socket = self.gateway.websocket(&path, headers).await.unwrap();
        let mut messages = Vec::new();
        while let Ok(Some(Ok(message))) = tokio::time::timeout(Duration::from_secs(30), socket.next()).await {
            match message {
                Message::Text(text) => messages.push(serde_json::from_str(text.as_str()).unwrap()),
                Message::Close(_) => break,
                _ => {}
            }
            if messages.len() >= 20 {
                break;
            }
        }
        messages
    }
}

#[tokio::test]
async fn sign_in_opens_a_locked_down_session_and_never_echoes_the_token() {
    let w = World::start("gw-signin", false, &[]).await;
    let token = w.token("alice").await;
    let origin = w.gateway.origin();
    let (status, headers, body) = w
        .gateway
        .request(Method::POST, "/api/session", &[("origin", &origin)], Some(json!({ "token": token })))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains(&token), "the answer holds the token: {body}");
    let set_cookie = headers.get("set-cookie").unwrap().to_str().unwrap().to_owned();
    for part in ["__Host-myownshell-session=", "HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(part), "{set_cookie} lacks {part}");
    }
    assert!(!set_cookie.contains(&token));
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["user"], json!(service_account_user(&w.ns, "alice")));
    assert_eq!(answer["csrf"].as_str().map(str::len), Some(64));
    for (name, value) in headers.iter() {
        assert!(!value.as_bytes().windows(token.len()).any(|w| w == token.as_bytes()), "header {name} holds the token");
    }
    let csp = headers.get("content-security-policy").unwrap().to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"), "{csp}");

    let cookie = session_cookie(&headers).unwrap();
    let (status, _, body) = w.gateway.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&service_account_user(&w.ns, "alice")), "{body}");
    let log = std::fs::read_to_string(&w.gateway.log).unwrap();
    assert!(!log.contains(&token), "the gateway's log holds the token");
}

#[tokio::test]
async fn sign_in_is_refused_to_bad_tokens_and_to_other_sites() {
    let w = World::start("gw-refused", false, &[]).await;
    let origin = w.gateway.origin();
    let sign_in = |token: String, headers: Vec<(&'static str, String)>| {
        let gateway = &w.gateway;
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            gateway.request(Method::POST, "/api/session", &headers, Some(json!({ "token": token }))).await.unwrap()
        }
    };
    let good = w.token("alice").await;
    // A token of a ServiceAccount that no longer exists.
    let revoked = w.token("gone").await;
    Api::<ServiceAccount>::namespaced(w.client.clone(), &w.ns).delete("gone", &DeleteParams::default()).await.unwrap();
    // (what, token, headers, status, words of the answer)
    type Case = (&'static str, String, Vec<(&'static str, String)>, u16, &'static str);
    let cases: Vec<Case> = vec![
        ("not a token", "garbage".into(), vec![("origin", origin.clone())], 401, "did not accept this token"),
        ("a revoked token", revoked, vec![("origin", origin.clone())], 401, "did not accept this token"),
        ("another site", good.clone(), vec![("origin", "https://evil.example".into())], 403, "gateway's page"),
        ("no origin", good.clone(), vec![], 403, "gateway's page"),
    ];
    for (name, token, headers, want, words) in cases {
        let (status, headers, body) = sign_in(token, headers).await;
        assert_eq!(status, want, "{name}: {body}");
        assert!(body.contains(words), "{name}: {body}");
        assert!(session_cookie(&headers).is_none(), "{name}: a cookie was set");
    }
}

/// A body beyond 32 KiB is refused before anyone is authenticated (150 sign-ins announcing 2 MiB
/// once took the gateway from 37 to 311 MB), and one user holds at most
/// `--max-sessions-per-user` sessions: signing in once more ends their oldest, so one token
/// cannot fill the gateway for everyone else.
#[tokio::test]
async fn sign_in_bodies_are_bounded_before_authentication_and_one_user_holds_their_share() {
    let w = World::start("gw-limits", false, &["--max-sessions-per-user=3"]).await;
    let origin = w.gateway.origin();
    let huge = json!({ "token": "x".repeat(2 * 1024 * 1024) });
    let (status, _, body) =
        w.gateway.request(Method::POST, "/api/session", &[("origin", &origin)], Some(huge)).await.unwrap();
    assert_eq!(status, 413, "a 2 MiB sign-in: {body}");
    let token = w.token("alice").await;
    let mut cookies = Vec::new();
    for _ in 0..5 {
        cookies.push(w.sign_in(&token).await.0);
    }
    for (i, cookie) in cookies.iter().enumerate() {
        let (status, _, body) =
            w.gateway.request(Method::GET, "/api/session", &[("cookie", cookie)], None).await.unwrap();
        let want = if i < 2 { 401 } else { 200 };
        assert_eq!(status, want, "alice's sign-in #{}: {body}", i + 1);
    }
    // Someone else still signs in.
    let bob = w.token("bob").await;
    w.sign_in(&bob).await;
}

#[tokio::test]
async fn an_expired_token_signs_nobody_in_and_a_session_ends_with_its_token() {
    let w = World::start("gw-expiry", false, &[]).await;
    let cp = shared();
    w.token("alice").await;
    let uid =
        Api::<ServiceAccount>::namespaced(w.client.clone(), &w.ns).get("alice").await.unwrap().metadata.uid.unwrap();
    let origin = w.gateway.origin();
    let expired = forge_service_account_token(cp, &w.ns, "alice", &uid, -60);
    let (status, _, body) = w
        .gateway
        .request(Method::POST, "/api/session", &[("origin", &origin)], Some(json!({ "token": expired })))
        .await
        .unwrap();
    assert_eq!(status, 401, "an expired token: {body}");

    // A token good for 8 more seconds: the session it opens ends with it, whatever
    // --session-max-age says.
    let brief = forge_service_account_token(cp, &w.ns, "alice", &uid, 8);
    let (cookie, _) = w.sign_in(&brief).await;
    let (status, _, body) = w.gateway.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    eventually("the session to end with its token", Duration::from_secs(30), || async {
        let (status, _, body) = w.gateway.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await?;
        if status == 401 && body.contains("session has ended") { Ok(()) } else { Err(format!("{status}: {body}")) }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn changes_need_the_csrf_token_and_terminals_need_a_session_from_the_page() {
    let w = World::start("gw-csrf", false, &[]).await;
    let (cookie, csrf) = w.sign_in(&w.token("alice").await).await;
    let origin = w.gateway.origin();
    let terminal = format!("/api/terminal/{}/web", w.ns);
    let refused = [
        ("no session", vec![("origin", origin.as_str())], "401", "not signed in"),
        (
            "another site",
            vec![("cookie", cookie.as_str()), ("origin", "https://evil.example")],
            "403",
            "gateway's page",
        ),
        ("no origin", vec![("cookie", cookie.as_str())], "403", "gateway's page"),
        (
            "a made-up session",
            vec![("cookie", "__Host-myownshell-session=00ff"), ("origin", &origin)],
            "401",
            "session has ended",
        ),
    ];
    for (name, headers, status, words) in refused {
        let err = w.gateway.websocket(&terminal, &headers).await.err().unwrap_or_else(|| panic!("{name}: upgraded"));
        assert!(err.starts_with(&format!("HTTP {status}")) && err.contains(words), "{name}: {err}");
    }
    let sign_out = |headers: Vec<(&'static str, String)>| {
        let gateway = &w.gateway;
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            gateway.request(Method::DELETE, "/api/session", &headers, None).await.unwrap()
        }
    };
    let with = |extra: &[(&'static str, &str)]| {
        let mut h = vec![("cookie", cookie.clone()), ("origin", origin.clone())];
        h.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        h
    };
    let (status, _, body) = sign_out(with(&[])).await;
    assert_eq!(status, 403, "no CSRF token: {body}");
    let (status, _, body) = sign_out(with(&[("x-csrf-token", &"0".repeat(64))])).await;
    assert_eq!(status, 403, "a wrong CSRF token: {body}");
    let (status, headers, body) = sign_out(with(&[("x-csrf-token", &csrf)])).await;
    assert_eq!(status, 204, "{body}");
    assert!(headers.get("set-cookie").unwrap().to_str().unwrap().contains("Max-Age=0"));
    let (status, _, _) = w.gateway.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await.unwrap();
    assert_eq!(status, 401, "signed out, the cookie opens nothing");
}

#[tokio::test]
async fn the_terminal_is_opened_as_the_user_and_the_gate_refuses_a_stranger() {
    let w = World::start("gw-exec", true, &[]).await;
    w.shell("alice", "web").await;
    let pod = w.ready_pod("web").await;
    let (alice, _) = w.sign_in(&w.token("alice").await).await;
    let (bob, _) = w.sign_in(&w.token("bob").await).await;

    // Bob can list the namespace's shells (he is an editor), but the gate keeps him out.
    let (status, _, body) = w
        .gateway
        .request(Method::GET, &format!("/api/shells?namespace={}", w.ns), &[("cookie", &bob)], None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"name\":\"web\"") && body.contains(&service_account_user(&w.ns, "alice")), "{body}");
    let bobs = w.terminal_messages(&bob, "web").await;
    let refusal = bobs.iter().find(|m| m["type"] == "refused").unwrap_or_else(|| panic!("no refusal: {bobs:?}"));
    let message = refusal["message"].as_str().unwrap();
    let bob_user = service_account_user(&w.ns, "bob");
    for words in [bob_user.as_str(), pod.as_str(), "which only its owner", &service_account_user(&w.ns, "alice")] {
        assert!(message.contains(words), "the refusal names the stranger, the pod and who may connect: {message}");
    }

    // Alice gets through the gate; the exec then ends at the apiserver, for want of a node.
    let alices = w.terminal_messages(&alice, "web").await;
    let error = alices.iter().find(|m| m["type"] == "refused").unwrap_or_else(|| panic!("no end: {alices:?}"));
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("does not have a host assigned"),
        "alice was admitted: {message}\n{}",
        w.gateway.log_tail()
    );

    // Someone who may not even read the namespace's shells hears the apiserver's refusal.
    let (carol, _) = w.sign_in(&w.token("carol").await).await;
    let (status, _, body) = w
        .gateway
        .request(Method::GET, &format!("/api/shells?namespace={}", w.ns), &[("cookie", &carol)], None)
        .await
        .unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("cannot list resource \\\"myownshells\\\""), "{body}");
    let carols = w.terminal_messages(&carol, "web").await;
    assert!(
        carols.iter().any(|m| m["type"] == "refused" && m["message"].as_str().unwrap().contains("cannot get resource")),
        "{carols:?}"
    );
    let shells = Api::<MyOwnShell>::namespaced(w.client.clone(), &w.ns);
    assert_eq!(
        shells.get("web").await.unwrap().spec.owner.as_deref(),
        Some(service_account_user(&w.ns, "alice").as_str())
    );

    // Alice loses her access while signed in: her next terminal is refused by the apiserver.
    // (An exec already open stays open, as a `kubectl exec` does: Kubernetes authorizes a
    // connection when it is made.)
    let bindings: Api<RoleBinding> = Api::namespaced(w.client.clone(), &w.ns);
    for binding in ["editors", "edit-sources", "view-sources", "shells-and-debug"] {
        bindings.delete(binding, &DeleteParams::default()).await.unwrap();
    }
    eventually("alice's next terminal refused", Duration::from_secs(30), || async {
        let messages = w.terminal_messages(&alice, "web").await;
        let refused = messages.iter().find(|m| m["type"] == "refused").and_then(|m| m["message"].as_str());
        match refused {
            Some(m) if m.contains("cannot get resource") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_shell_without_a_ready_pod_says_what_it_waits_for_then_gives_up() {
    let w = World::start("gw-wait", false, &["--connect-timeout=2s"]).await;
    w.shell("alice", "web").await;
    let (alice, _) = w.sign_in(&w.token("alice").await).await;
    let messages = w.terminal_messages(&alice, "web").await;
    assert!(
        messages
            .iter()
            .any(|m| m["type"] == "notice" && m["message"].as_str().unwrap().starts_with("waiting for shell web")),
        "{messages:?}"
    );
    let last = messages.last().unwrap();
    assert_eq!(last["type"], "refused", "{messages:?}");
    assert!(last["message"].as_str().unwrap().starts_with("gave up after 2s: waiting for shell web"), "{messages:?}");
}

/// `GET /api/session` with the proxy's headers for `user`.
async fn proxied_session(gateway: &GatewayProcess, user: &str) -> (u16, http::HeaderMap, String) {
    let headers = [("x-remote-user", user), ("x-remote-group", "system:authenticated")];
    gateway.request(Method::GET, "/api/session", &headers, None).await.unwrap()
}

#[tokio::test]
async fn an_authenticating_proxy_in_front_names_the_user_and_nobody_else_can() {
    let proxy_ca = CertificateAuthority::generate("front-proxy-ca", Duration::from_secs(3600)).unwrap();
    let ca_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca_file.path(), proxy_ca.cert_pem()).unwrap();
    let flags =
        [format!("--client-ca-file={}", ca_file.path().display()), "--requestheader-allowed-names=front-proxy".into()];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut w = World::start("gw-proxy", true, &flags).await;
    w.shell("alice", "web").await;
    let pod = w.ready_pod("web").await;
    let alice = service_account_user(&w.ns, "alice");
    let bob = service_account_user(&w.ns, "bob");
    // Without the proxy's certificate, the headers are nobody's word.
    let (status, _, body) = proxied_session(&w.gateway, &alice).await;
    assert_eq!(status, 401, "headers without a certificate: {body}");

    // A certificate of the CA but another name: refused.
    let other = proxy_ca.issue(&LeafSpec::client("someone-else", vec![], Duration::from_secs(3600))).unwrap();
    w.gateway.use_client(w.gateway.client_with_certificate((&other.cert_pem, &other.key_pem)).unwrap());
    let (status, _, body) = proxied_session(&w.gateway, &alice).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("--requestheader-allowed-names"), "{body}");

    // The proxy: its user is the caller, and the exec is made as that user.
    let front = proxy_ca.issue(&LeafSpec::client("front-proxy", vec![], Duration::from_secs(3600))).unwrap();
    w.gateway.use_client(w.gateway.client_with_certificate((&front.cert_pem, &front.key_pem)).unwrap());
    let (status, _, body) = proxied_session(&w.gateway, &alice).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&alice), "{body}");
    let origin = w.gateway.origin();
    let open = |user: String| {
        let (w, origin) = (&w, origin.clone());
        async move {
            let headers =
                [("x-remote-user", user.as_str()), ("x-remote-group", "system:authenticated"), ("origin", &origin)];
            w.terminal_messages_with(&headers, "web").await.pop().unwrap()
        }
    };
    let bobs = open(bob.clone()).await;
    let refusal = bobs["message"].as_str().unwrap();
    assert!(refusal.contains(&bob) && refusal.contains(&pod) && refusal.contains("which only its owner"), "{refusal}");
    let alices = open(alice.clone()).await;
    assert!(alices["message"].as_str().unwrap().contains("does not have a host assigned"), "{alices}");
    // From another site, even the proxy's user opens nothing.
    let path = format!("/api/terminal/{}/web", w.ns);
    let headers = [("x-remote-user", alice.as_str()), ("origin", "https://evil.example")];
    let err = w.gateway.websocket(&path, &headers).await.err().unwrap();
    assert!(err.starts_with("HTTP 403"), "{err}");
}

/// A bearer that a proxy in front adds from its own cookie (oauth2-proxy's
/// `--pass-authorization-header`) rides along with whatever the browser sends, a request that
/// another site's page makes included, so it is as ambient as the session cookie: sent from a
/// browser (with an `Origin`), a terminal or a change must come from the page. A client that is
/// no browser (the plugin, curl) sends no `Origin` and gets through as before
/// (`kubectl_myownshell_connects_through_the_gateway_as_the_user` runs the plugin itself).
#[tokio::test]
async fn a_bearer_sent_from_another_site_opens_no_terminal_and_changes_nothing() {
    let w = World::start("gw-bearer-origin", true, &[]).await;
    w.shell("alice", "web").await;
    w.ready_pod("web").await;
    let bearer = format!("Bearer {}", w.token("alice").await);
    let (page, evil) = (w.gateway.origin(), "https://evil.example");
    let terminal = format!("/api/terminal/{}/web?cols=80&rows=24", w.ns);
    let extend = format!("/api/shells/{}/web/extend", w.ns);

    let err = w.gateway.websocket(&terminal, &[("authorization", &bearer), ("origin", evil)]).await.err();
    let err = err.expect("another site's WebSocket handshake is refused");
    assert!(err.starts_with("HTTP 403"), "{err}");
    let headers = [("authorization", bearer.as_str()), ("origin", evil)];
    let (status, _, body) = w.gateway.request(Method::POST, &extend, &headers, None).await.unwrap();
    assert_eq!((status, body.contains("gateway's page")), (403, true), "another site's POST: {body}");
    let shells = Api::<MyOwnShell>::namespaced(w.client.clone(), &w.ns);
    let lifetime = shells.get("web").await.unwrap().spec.lifetime;
    assert!(lifetime.and_then(|l| l.extended_until).is_none(), "another site's POST changed nothing");
    // A read may come from anywhere: CORS keeps the answer from the other site.
    let shells_path = format!("/api/shells?namespace={}", w.ns);
    let (status, _, body) = w.gateway.request(Method::GET, &shells_path, &headers, None).await.unwrap();
    assert_eq!(status, 200, "{body}");

    // No Origin (the plugin, curl) and the page's own: through the gate to the apiserver, which
    // ends the exec for want of a node; the change is made.
    for (what, headers) in
        [("no Origin", vec![("authorization", bearer.as_str())]), ("the page", headers_with(&bearer, &page))]
    {
        let messages = w.terminal_messages_with(&headers, "web").await;
        let end = messages.iter().find(|m| m["type"] == "refused").and_then(|m| m["message"].as_str());
        assert!(end.is_some_and(|m| m.contains("does not have a host assigned")), "{what}: {messages:?}");
        let (status, _, body) = w.gateway.request(Method::POST, &extend, &headers, None).await.unwrap();
        assert_eq!(status, 200, "{what}: {body}");
    }
    assert!(!w.gateway.log_tail().contains(&bearer[7..]), "the token is never logged");
}

fn headers_with<'a>(bearer: &'a str, origin: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![("authorization", bearer), ("origin", origin)]
}

#[tokio::test]
async fn kubectl_myownshell_connects_through_the_gateway_as_the_user() {
    let w = World::start("gw-plugin", true, &[]).await;
    w.shell("alice", "web").await;
    let pod = w.ready_pod("web").await;
    let cp = shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("gateway-ca.crt");
    std::fs::write(&ca, w.gateway.ca_pem()).unwrap();
    let url = w.gateway.origin();
    let connect = ["connect", "web", "--gateway", &url, "--gateway-certificate-authority", ca.to_str().unwrap()];
    let bob_token = w.token("bob").await;
    let bob_kubeconfig = dir.path().join("bob.kubeconfig");
    write_kubeconfig(&bob_kubeconfig, &cp.kubeconfig_for_token(&bob_token)).unwrap();

    // Bob's kubeconfig token: the gate refuses him by name, said once.
    let bob = myownshell_tests::plugin::run(&bob_kubeconfig, &w.ns, &connect).unwrap();
    assert_eq!(bob.code, 1, "{}", bob.stderr);
    let bob_user = service_account_user(&w.ns, "bob");
    assert_eq!(bob.stderr.matches(&format!("{bob_user} may not exec")).count(), 1, "{}", bob.stderr);
    assert!(bob.stderr.contains(&pod) && bob.stderr.contains("which only its owner"), "{}", bob.stderr);

    // Alice by --token over the admin's kubeconfig: let through the gate (the exec then ends at the
    // apiserver, for want of a node).
    let alice_token = w.token("alice").await;
    let mut args = connect.to_vec();
    args.extend(["--token", &alice_token]);
    let alice = myownshell_tests::plugin::run(&cp.kubeconfig_path(), &w.ns, &args).unwrap();
    assert_eq!(alice.code, 1, "{}", alice.stderr);
    assert!(alice.stderr.contains("does not have a host assigned"), "{}", alice.stderr);
    assert!(!alice.stderr.contains(&alice_token), "the token is never printed");

    // A kubeconfig user without a token cannot use the gateway, and is told how else to connect.
    let admin = myownshell_tests::plugin::run(&cp.kubeconfig_path(), &w.ns, &connect).unwrap();
    assert_eq!(admin.code, 1, "{}", admin.stderr);
    assert!(admin.stderr.contains("needs a bearer token") && admin.stderr.contains("--direct"), "{}", admin.stderr);
}

/// A plane with Kubernetes' constrained impersonation on (alpha in 1.35), kept from the others.
fn constrained_plane() -> &'static ControlPlane {
    shared_with("constrained impersonation", || Options {
        apiserver_args: vec!["--feature-gates=ConstrainedImpersonation=true".into()],
        ..Options::default()
    })
}

/// `config/overlays/constrained-impersonation` as it renders: the gateway's ClusterRole and args.
fn constrained_overlay() -> (ClusterRole, Vec<String>) {
    let objects = render("overlays/constrained-impersonation").unwrap();
    let role = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "myownshell-gateway-impersonator-role")
        .expect("the gateway's ClusterRole");
    let gateway = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "myownshell-gateway")
        .expect("the gateway's Deployment");
    let args = serde_json::from_value(gateway["spec"]["template"]["spec"]["containers"][0]["args"].clone()).unwrap();
    (serde_json::from_value(role.clone()).unwrap(), args)
}

#[tokio::test]
async fn constrained_impersonation_opens_the_users_terminal_and_nothing_else() {
    let (role, args) = constrained_overlay();
    assert!(args.contains(&"--impersonation=constrained".to_owned()), "{args:?}");
    let verbs: Vec<&str> = role.rules.iter().flatten().flat_map(|r| r.verbs.iter().map(String::as_str)).collect();
    assert!(!verbs.contains(&"impersonate"), "no fallback to legacy impersonation: {verbs:?}");

    // A person, through an authenticating proxy: impersonated whole (the user-info mode).
    let proxy_ca = CertificateAuthority::generate("front-proxy-ca", Duration::from_secs(3600)).unwrap();
    let ca_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca_file.path(), proxy_ca.cert_pem()).unwrap();
    let flags = [format!("--client-ca-file={}", ca_file.path().display()), "--impersonation=constrained".into()];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let carol = "carol@example.com";
    let mut w = World::start_on(constrained_plane(), role, "gw-constrained", true, &flags, &[carol]).await;
    w.shell("alice", "web").await;
    let pod = w.ready_pod("web").await;

    // ServiceAccounts signed in by token (the serviceaccount mode): bob lists the shells, the gate
    // refuses him by name, alice is let through (then the exec ends for want of a node).
    let (alice, alice_csrf) = w.sign_in(&w.token("alice").await).await;
    let (bob, _) = w.sign_in(&w.token("bob").await).await;
    let (status, _, body) = w
        .gateway
        .request(Method::GET, &format!("/api/shells?namespace={}", w.ns), &[("cookie", &bob)], None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}\n{}", w.gateway.log_tail());
    constrained_page(&w, &bob, (&alice, &alice_csrf)).await;
    let bobs = w.terminal_messages(&bob, "web").await;
    let refusal = bobs.iter().find(|m| m["type"] == "refused").unwrap_or_else(|| panic!("no refusal: {bobs:?}"));
    let bob_user = service_account_user(&w.ns, "bob");
    let message = refusal["message"].as_str().unwrap();
    assert!(
        message.contains(&bob_user) && message.contains(&pod) && message.contains("which only its owner"),
        "{message}"
    );
    let alices = w.terminal_messages(&alice, "web").await;
    let end = alices.iter().find(|m| m["type"] == "refused").unwrap_or_else(|| panic!("no end: {alices:?}"));
    assert!(end["message"].as_str().unwrap().contains("does not have a host assigned"), "{alices:?}");

    // Carol through the proxy: the gate sees carol, with the group the proxy named.
    let front = proxy_ca.issue(&LeafSpec::client("front-proxy", vec![], Duration::from_secs(3600))).unwrap();
    w.gateway.use_client(w.gateway.client_with_certificate((&front.cert_pem, &front.key_pem)).unwrap());
    let origin = w.gateway.origin();
    let headers = [("x-remote-user", carol), ("x-remote-group", "platform"), ("origin", origin.as_str())];
    let carols = w.terminal_messages_with(&headers, "web").await;
    let message = carols.last().and_then(|m| m["message"].as_str()).unwrap_or_default().to_owned();
    assert!(message.contains(&format!("{carol} may not exec")) && message.contains(&pod), "{carols:?}");

    // The grant is only for what a terminal asks: the gateway's own credentials, acting as alice,
    // may not read the namespace's Secrets (which alice may), nor send what only legacy
    // impersonation takes (a ServiceAccount with a uid).
    let gateway = Kubectl::new(w.cp.layout().dir.join(format!("{}-gateway.kubeconfig", w.ns)));
    let alice_user = service_account_user(&w.ns, "alice");
    let secrets = gateway.run(&["get", "secrets", "-n", &w.ns, "--as", &alice_user]).await.unwrap();
    assert!(!secrets.success, "{}", secrets.stdout);
    assert!(secrets.stderr.contains("impersonate-on:serviceaccount:list"), "{}", secrets.stderr);
    let admin_as_alice = w.cp.kubectl().run(&["get", "secrets", "-n", &w.ns, "--as", &alice_user]).await.unwrap();
    assert!(admin_as_alice.success, "alice herself may read them: {}", admin_as_alice.stderr);
    let shells = ["get", "myownshells", "-n", &w.ns, "--as", &alice_user];
    let whole = gateway.run(&[&shells[..], &["--as-uid", "u1"]].concat()).await.unwrap();
    assert!(!whole.success && whole.stderr.contains("cannot impersonate"), "{}", whole.stderr);
    let named = gateway.run(&shells).await.unwrap();
    assert!(named.success, "{}", named.stderr);
}

/// The page's own requests under constrained impersonation: where bob may have shells (access
/// reviews as him), the live list (a watch as him), and alice's create and delete (dry runs).
async fn constrained_page(w: &World, bob: &str, (alice, csrf): (&str, &str)) {
    let (status, _, body) = w.gateway.request(Method::GET, "/api/places", &[("cookie", bob)], None).await.unwrap();
    assert!(status == 200 && body.contains(&w.ns), "{status} {body}");
    let live = format!("/api/shells/live?namespace={}", w.ns);
    let (status, mut events) = w.gateway.page().events(&live, &[("cookie", bob)]).await.unwrap();
    assert_eq!(status, 200, "{}", events.seen());
    let listed = |s: &str| s.contains("event: reset") && s.contains(r#""name":"web""#);
    events.until("the live list, constrained", 0, LIVE, listed).await.unwrap();
    let origin = w.gateway.origin();
    let headers = [("cookie", alice), ("origin", origin.as_str()), ("x-csrf-token", csrf)];
    let create = format!("/api/shells/{}?dryRun=All", w.ns);
    let (status, _, body) =
        w.gateway.request(Method::POST, &create, &headers, Some(json!({"name": "more"}))).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let delete = format!("/api/shells/{}/web?dryRun=All", w.ns);
    let (status, _, body) = w.gateway.request(Method::DELETE, &delete, &headers, None).await.unwrap();
    assert_eq!(status, 204, "{body}");
}

/// Whether the peer has closed `socket` (a read ends or fails) within `within`.
async fn closed_by_peer<S: tokio::io::AsyncRead + Unpin>(socket: &mut S, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    matches!(tokio::time::timeout(within, socket.read(&mut byte)).await, Ok(Ok(0) | Err(_)))
}

#[tokio::test]
async fn half_open_sockets_cost_a_bounded_while_and_never_the_gateway() {
    let mut w = World::start("gw-halfopen", false, &[]).await;
    let token = w.token("alice").await;
    let (cookie, _) = w.sign_in(&token).await;

    // More sockets than the gateway has connection slots (1024): TLS connections that never
    // send a request, then plain TCP that never starts TLS (the last wait in the kernel's
    // backlog, as would the page's next request).
    let mut tls = Vec::new();
    for _ in 0..50 {
        tls.push(w.gateway.connect().await.unwrap());
    }
    let mut tcp = Vec::new();
    for _ in 0..1100 {
        tcp.push(tokio::net::TcpStream::connect(w.gateway.addr).await.unwrap());
    }

    // A page's request is served once the silent ones are dropped: within the handshake and
    // first-request deadlines (10 s each), not the idle timeout (120 s).
    let started = std::time::Instant::now();
    eventually("a signed-in page is served past the half-open sockets", Duration::from_secs(45), || async {
        match w.gateway.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await {
            Ok((200, _, _)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap();
    eprintln!("served after {:?} behind 1100 half-open TCP and 50 silent TLS sockets", started.elapsed());

    // Every one of them was closed by the gateway, none left holding memory.
    let mut open = 0;
    for socket in &mut tls {
        open += usize::from(!closed_by_peer(socket, Duration::from_secs(20)).await);
    }
    for socket in &mut tcp {
        open += usize::from(!closed_by_peer(socket, Duration::from_secs(20)).await);
    }
    assert_eq!(open, 0, "sockets the gateway never closed");
    assert!(w.gateway.is_running(), "the gateway survived:\n{}", w.gateway.log_tail());
    let (status, _, body) = w.gateway.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await.unwrap();
    assert_eq!(status, 200, "{body}");
}

/// A stopping gateway (SIGTERM) turns not ready at once and goes on serving, pages and sign-ins
/// included, for its drain (`--shutdown-delay` here, with no pod address to follow): pages that
/// reconnect through the Service meanwhile, which still sends them here, are served rather than
/// lost; it exits only after.
#[tokio::test]
async fn a_stopping_gateway_is_not_ready_at_once_and_serves_through_its_drain() {
    let delay = Duration::from_secs(10);
    let mut w = World::start("gw-drain", false, &["--shutdown-delay=10s"]).await;
    let token = w.token("alice").await;
    assert_eq!(w.gateway.readyz().await, Ok(200), "ready before");
    let stopped = std::time::Instant::now();
    w.gateway.terminate().unwrap();
    eventually("not ready after SIGTERM", Duration::from_secs(5), || async {
        match w.gateway.readyz().await {
            Ok(503) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap();
    let (status, _, _) = w.gateway.request(Method::GET, "/", &[], None).await.unwrap();
    assert_eq!(status, 200, "the page, while draining");
    w.sign_in(&token).await;
    assert!(stopped.elapsed() < delay, "the checks above took longer than the drain: {:?}", stopped.elapsed());
    // Polled with a deadline (`eventually` cannot lend the process mutably).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while w.gateway.is_running() {
        assert!(std::time::Instant::now() < deadline, "still running 60 s after SIGTERM:\n{}", w.gateway.log_tail());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped.elapsed() >= delay, "exited {:?} after SIGTERM, before its drain", stopped.elapsed());
}

/// A stopping gateway or webhook follows its Service's EndpointSlices (`runtime/src/drain.rs`)
/// on the real apiserver: it keeps waiting while its address is listed ready, stops waiting
/// once it is not (or not listed at all), and stops waiting at once when the apiserver refuses
/// the read, 401 or 403, as in an uninstall (`kubectl delete -k` takes the ServiceAccount and
/// the Role with the Deployment): the gateway used to wait out its `max_wait` then.
#[tokio::test]
async fn a_draining_server_follows_its_endpoints_and_a_refused_read_does_not_hold_it() {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use myownshell_runtime::drain::{Endpoint, Waited, wait_out_of_endpoints};

    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_shell_namespace(&admin, "drain").await.unwrap();
    let slice = |ready: bool| -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "web-a", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.214.0.7"], "conditions": {"ready": ready}}],
        }))
        .unwrap()
    };
    let slices: Api<EndpointSlice> = Api::namespaced(admin.clone(), &ns);
    let endpoint = |ip: &str| Endpoint { service: "web".into(), namespace: ns.clone(), pod_ip: ip.parse().unwrap() };
    let nobody = cp.client_as_user("drain-nobody", &["system:authenticated"]).unwrap();
    let revoked = cp.client_with_token("a-token-the-cluster-never-issued").unwrap();
    // Long enough that a wait which returns before it did not merely run out of time.
    let long = Duration::from_secs(60);

    slices.create(&Default::default(), &slice(true)).await.unwrap();
    let short = Duration::from_secs(2);
    let started = std::time::Instant::now();
    let waited = wait_out_of_endpoints(&admin, &endpoint("10.214.0.7"), short).await;
    assert!(matches!(waited, Waited::StillListed(ref s) if s.contains("listed ready")), "listed ready: {waited:?}");
    assert!(started.elapsed() >= short / 2, "gave up after {:?} of {short:?}", started.elapsed());

    // Each of these returns long before `long`: it did not merely run out of time.
    let wait = async |client: &Client, ip: &str| {
        let started = std::time::Instant::now();
        let waited = wait_out_of_endpoints(client, &endpoint(ip), long).await;
        assert!(started.elapsed() < long, "waited out max_wait: {waited:?}");
        waited
    };
    assert_eq!(wait(&admin, "10.214.0.8").await, Waited::Left, "another address listed");
    let refused = wait(&nobody, "10.214.0.7").await;
    assert!(matches!(refused, Waited::Refused(ref s) if s.contains("forbidden")), "no RBAC (403): {refused:?}");
    let refused = wait(&revoked, "10.214.0.7").await;
    assert!(
        matches!(refused, Waited::Refused(ref s) if s.contains("Unauthorized")),
        "unknown token (401): {refused:?}"
    );
    let mut terminating = slice(false);
    terminating.metadata.resource_version = slices.get("web-a").await.unwrap().metadata.resource_version;
    slices.replace("web-a", &Default::default(), &terminating).await.unwrap();
    assert_eq!(wait(&admin, "10.214.0.7").await, Waited::Left, "listed, not ready");
    Api::<k8s_openapi::api::core::v1::Namespace>::all(admin).delete(&ns, &DeleteParams::default()).await.unwrap();
}

/// A shell of a class that asks for approval, on the page: listed as waiting for approval, with
/// what it waits for; its owner's approve refused in the webhook's words; an approver's
/// (`POST /api/shells/{namespace}/{shell}/approve`, made as him) recorded in his name.
#[tokio::test]
async fn an_approver_approves_on_the_page_and_the_owner_cannot() {
    let w = World::start("gw-approve", true, &[]).await;
    let (alice, bob) = (service_account_user(&w.ns, "alice"), service_account_user(&w.ns, "bob"));
    let class = format!("{}-four-eyes", w.ns);
    let admin = w.cp.kubectl();
    let setup = format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShellClass\nmetadata: {{name: {class}}}\nspec: {{approval: {{approvers: {{users: [\"{bob}\"]}}}}}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {class}}}\nrules:\n\
         - {{apiGroups: [myownshell.io], resources: [myownshellclasses], resourceNames: [{class}], verbs: [use]}}\n\
         - {{apiGroups: [myownshell.io], resources: [myownshells], verbs: [approve]}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {class}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {class}}}\n\
         subjects: [{{kind: User, name: \"{alice}\", apiGroup: rbac.authorization.k8s.io}}, {{kind: User, name: \"{bob}\", apiGroup: rbac.authorization.k8s.io}}]\n"
    );
    admin.run_with_stdin(&["apply", "-f", "-"], Some(&setup)).await.unwrap().ok().unwrap();
    let shell = shell_manifest("guarded", &format!("{{className: {class}, size: 1}}"));
    let mut args = myownshell_tests::access::as_user(&alice, &["system:authenticated"]);
    args.extend(["apply", "-n", &w.ns, "-f", "-"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    eventually("alice's shell of the class", READY, || async {
        let out = admin.run_with_stdin(&args, Some(&shell)).await?;
        if out.success { Ok(()) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
    // What the controller would say (none runs here).
    let waiting = json!({"status": {"conditions": [{"type": "Approved", "status": "False", "reason": "WaitingForApproval",
        "message": "waiting for approval: 0 of 1 (none yet)", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let shells = Api::<MyOwnShell>::namespaced(w.client.clone(), &w.ns);
    shells.patch_status("guarded", &PatchParams::default(), &Patch::Merge(&waiting)).await.unwrap();

    let (bobs, bobs_csrf) = w.sign_in(&w.token("bob").await).await;
    let (alices, alices_csrf) = w.sign_in(&w.token("alice").await).await;
    let (status, _, body) = w
        .gateway
        .request(Method::GET, &format!("/api/shells?namespace={}", w.ns), &[("cookie", &bobs)], None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"waitingForApproval\":\"waiting for approval: 0 of 1 (none yet)\""), "{body}");
    let origin = w.gateway.origin();
    let approve = format!("/api/shells/{}/guarded/approve", w.ns);
    let post = |cookie: String, csrf: String| {
        let (gateway, approve, origin) = (&w.gateway, approve.clone(), origin.clone());
        async move {
            let headers = [("cookie", cookie.as_str()), ("origin", origin.as_str()), ("x-csrf-token", csrf.as_str())];
            gateway.request(Method::POST, &approve, &headers, None).await.unwrap()
        }
    };
    let (status, _, body) = post(alices, alices_csrf).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("owns it, and nobody approves their own shell"), "alice's approve: {body}");
    let (status, _, body) = post(bobs, bobs_csrf).await;
    assert_eq!(status, 200, "bob's approve: {body}");
    let approvals = shells.get("guarded").await.unwrap().spec.approvals.unwrap_or_default();
    assert_eq!(approvals.iter().map(|a| a.by.as_deref()).collect::<Vec<_>>(), [Some(bob.as_str())]);
}

/// A signed-in page's request: cookie, `Origin` and CSRF token.
struct Page<'a> {
    w: &'a World,
    cookie: String,
    csrf: String,
}

impl Page<'_> {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let origin = self.w.gateway.origin();
        let headers = [("cookie", self.cookie.as_str()), ("origin", origin.as_str()), ("x-csrf-token", &self.csrf)];
        let (status, _, text) = self.w.gateway.request(method, path, &headers, body).await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

async fn page<'a>(w: &'a World, who: &str) -> Page<'a> {
    let (cookie, csrf) = w.sign_in(&w.token(who).await).await;
    Page { w, cookie, csrf }
}

const LIVE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_page_creates_stops_starts_and_deletes_as_the_user_and_its_list_follows_live() {
    let w = World::start("gw-page", true, &[]).await;
    let (alice, bob) = (page(&w, "alice").await, page(&w, "bob").await);
    let (status, places) = alice.call(Method::GET, "/api/places", None).await;
    assert_eq!((status, &places["places"]), (200, &json!([{"namespace": w.ns, "mayCreate": true}])), "{places}");

    let (status, mut live) = w.gateway.page().events("/api/shells/live", &[("cookie", &alice.cookie)]).await.unwrap();
    assert_eq!(status, 200, "{}", live.seen());
    live.until("the first list", 0, LIVE, |s| s.contains("event: reset") && s.contains(&w.ns)).await.unwrap();

    let shells = format!("/api/shells/{}", w.ns);
    let (status, made) =
        alice.call(Method::POST, &shells, Some(json!({"name": "dev", "sharedUsers": ["carol"]}))).await;
    assert_eq!(status, 200, "{made}");
    assert_eq!(made["shell"]["owner"], service_account_user(&w.ns, "alice"), "stamped by the webhook: {made}");
    let mark = live.seen().len();
    live.until("the new shell, live", mark, LIVE, |s| s.contains("event: row") && s.contains(r#""name":"dev""#))
        .await
        .unwrap();

    // Someone else's shell: bob may edit the namespace, yet the webhook keeps its spec its owner's.
    let dev = format!("{shells}/dev");
    let (status, refused) = bob.call(Method::POST, &format!("{dev}/stop"), None).await;
    assert!(status == 403 && refused["error"].as_str().is_some_and(|e| e.contains("owner")), "{status} {refused}");

    let mark = live.seen().len();
    let (status, stopped) = alice.call(Method::POST, &format!("{dev}/stop"), None).await;
    assert_eq!((status, &stopped["shell"]["stopped"]), (200, &json!(true)), "{stopped}");
    live.until("stopped, live", mark, LIVE, |s| s.contains(r#""stopped":true"#)).await.unwrap();
    let (status, started) = alice.call(Method::POST, &format!("{dev}/start"), None).await;
    assert_eq!((status, &started["shell"]["stopped"]), (200, &json!(false)), "{started}");

    let mark = live.seen().len();
    let (status, body) = alice.call(Method::DELETE, &dev, None).await;
    assert_eq!(status, 204, "{body}");
    live.until("deleting, live", mark, LIVE, |s| s.contains(r#""state":"Deleting""#)).await.unwrap();
    // No controller runs here: its part, the finalizer's removal, done by hand.
    let mark = live.seen().len();
    let shells_api: Api<MyOwnShell> = Api::namespaced(w.client.clone(), &w.ns);
    let unfinalized = json!({"metadata": {"finalizers": null}});
    shells_api.patch("dev", &PatchParams::default(), &Patch::Merge(&unfinalized)).await.unwrap();
    live.until("gone, live", mark, LIVE, |s| s.contains("event: gone") && s.contains(r#""name":"dev""#)).await.unwrap();

    // The apiserver's words for a bad name, and ours for none; nothing without the CSRF token.
    let (status, bad) = alice.call(Method::POST, &shells, Some(json!({"name": "Bad_Name"}))).await;
    assert!(status == 422 && bad["error"].as_str().is_some_and(|e| e.contains("Bad_Name")), "{status} {bad}");
    let (status, none) = alice.call(Method::POST, &shells, Some(json!({"name": " "}))).await;
    assert!(status == 400 && none["error"].as_str().is_some_and(|e| e.starts_with("name: ")), "{status} {none}");
    let origin = w.gateway.origin();
    let headers = [("cookie", alice.cookie.as_str()), ("origin", origin.as_str())];
    let (status, _, body) =
        w.gateway.request(Method::POST, &shells, &headers, Some(json!({"name": "x"}))).await.unwrap();
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = w.gateway.request(Method::GET, "/api/places", &[], None).await.unwrap();
    assert_eq!(status, 401, "{body}");
    live_lists_are_bounded_per_user(&w, &alice.cookie, live).await;
}

/// One user's live lists (tabs) are at most 8, each a watch per namespace: the next is refused
/// in words; one closed, another opens.
async fn live_lists_are_bounded_per_user(w: &World, cookie: &str, open: myownshell_tests::events::EventStream) {
    let mut more = Vec::new();
    for _ in 1..8 {
        let (status, stream) = w.gateway.page().events("/api/shells/live", &[("cookie", cookie)]).await.unwrap();
        assert_eq!(status, 200, "{}", stream.seen());
        more.push(stream);
    }
    let (status, mut ninth) = w.gateway.page().events("/api/shells/live", &[("cookie", cookie)]).await.unwrap();
    let said = ninth.until("the refusal", 0, LIVE, |s| s.contains("close a tab")).await;
    assert!(status == 429 && said.is_ok(), "{status} {said:?}");
    drop(open);
    eventually("a list again once one is closed", LIVE, || async {
        let (status, stream) = w.gateway.page().events("/api/shells/live", &[("cookie", cookie)]).await?;
        if status == 200 { Ok(()) } else { Err(format!("{status}: {}", stream.seen())) }
    })
    .await
    .unwrap();
}

/// A plane of its own: classes are cluster-wide, and other tests make default ones.
fn classes_plane() -> &'static ControlPlane {
    shared_with("page classes", Options::default)
}

fn class(name: &str, default: bool) -> Value {
    let mut class = json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShellClass",
        "metadata": {"name": name}, "spec": {"description": format!("{name} for the page"),
        "home": {"defaultSize": "2Gi", "maxSize": "5Gi"}}});
    if default {
        class["metadata"]["annotations"] = json!({"myownshell.io/is-default-class": "true"});
    }
    class
}

#[tokio::test]
async fn the_page_offers_the_classes_a_user_may_use_and_says_why_when_none() {
    let cp = classes_plane();
    let w = World::start_on(cp, shipped_role(), "gw-classes", false, &[], &[]).await;
    let alice = page(&w, "alice").await;
    // Everyone reads the classes, as the shipped class-viewer role says.
    let roles = std::fs::read_to_string(workspace_root().join("config/rbac/user_roles.yaml")).unwrap();
    let viewer: Vec<&str> = roles.split("\n---\n").filter(|doc| doc.contains("name: class-viewer")).collect();
    let out = cp.kubectl().run_with_stdin(&["apply", "-f", "-"], Some(&viewer.join("\n---\n"))).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    let offers = |w: &World| format!("/api/classes?namespace={}", w.ns);
    let (status, none) = alice.call(Method::GET, &offers(&w), None).await;
    assert_eq!((status, none.clone()), (200, json!({"classes": []})), "no classes at all: the operator's defaults");

    let kubectl = cp.kubectl();
    let apply = |class: Value| {
        let kubectl = &kubectl;
        async move {
            let out = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&class.to_string())).await.unwrap();
            assert!(out.success, "{}", out.stderr);
        }
    };
    apply(class("page-gpu", false)).await;
    let (status, why) = alice.call(Method::GET, &offers(&w), None).await;
    let said = why["whyNone"].as_str().unwrap_or_default();
    assert!(status == 200 && said.contains(&w.ns) && said.contains("\"use\""), "{status} {why}");

    let grant = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: use-gpu, namespace: {ns}}}\nrules: \
         [{{apiGroups: [myownshell.io], resources: [myownshellclasses], resourceNames: [page-gpu], verbs: [use]}}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: use-gpu, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: use-gpu}}\nsubjects: [{{kind: ServiceAccount, \
         name: alice, namespace: {ns}}}]\n",
        ns = w.ns
    );
    let out = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&grant)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    apply(class("page-default", true)).await;
    let (status, offered) = alice.call(Method::GET, &offers(&w), None).await;
    let names: Vec<(&str, bool)> = offered["classes"]
        .as_array()
        .map(|c| c.iter().map(|c| (c["name"].as_str().unwrap_or_default(), c["default"] == true)).collect())
        .unwrap_or_default();
    assert_eq!((status, names), (200, vec![("page-default", true), ("page-gpu", false)]), "{offered}");
    assert_eq!(offered["classes"][1]["spec"]["home"]["maxSize"], "5Gi", "the form's limits: {offered}");
    assert!(offered.get("whyNone").is_none(), "{offered}");
}

/// The gateway's namespaced Role as `config/rbac/gateway_role.yaml` ships it (the session key,
/// the record of sign-outs), made in `ns` and bound to this test's gateway there.
async fn shipped_namespace_role(w: &World) {
    let text = std::fs::read_to_string(workspace_root().join("config/rbac/gateway_role.yaml")).unwrap();
    let mut role = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "Role")
        .expect("a Role in gateway_role.yaml");
    role["metadata"]["namespace"] = json!(w.ns);
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": role["metadata"]["name"], "namespace": w.ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": "gateway", "namespace": w.ns}]});
    for object in [role, binding] {
        let out = w.cp.kubectl().run_with_stdin(&["apply", "-f", "-"], Some(&object.to_string())).await.unwrap();
        assert!(out.success, "{}", out.stderr);
    }
}

#[tokio::test]
async fn a_sign_out_on_one_replica_ends_the_session_on_every_replica() {
    let w = World::start("gw-signout", false, &[]).await;
    shipped_namespace_role(&w).await;
    let kubeconfig = w.cp.layout().dir.join(format!("{}-gateway.kubeconfig", w.ns));
    let env = [("POD_NAMESPACE", w.ns.as_str())];
    let replica = |name: &'static str| {
        let kubeconfig = kubeconfig.clone();
        let w = &w;
        async move {
            let port = free_port().unwrap();
            GatewayProcess::start_with(w.cp, kubeconfig, &format!("{}-{name}", w.ns), (port, &[]), &env).await.unwrap()
        }
    };
    let (a, b) = (replica("a").await, replica("b").await);
    let token = w.token("alice").await;
    let (cookie, csrf) = a.page().sign_in(&token).await.unwrap();
    let session = |g: &GatewayProcess, cookie: String| {
        let g = g.page();
        async move { g.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await.unwrap() }
    };
    let (status, _, body) = session(&b, cookie.clone()).await;
    assert_eq!(status, 200, "the copy is her session on the other replica too: {body}\n{}", b.log_tail());

    let origin = a.origin();
    let headers = [("cookie", cookie.as_str()), ("origin", origin.as_str()), ("x-csrf-token", csrf.as_str())];
    let (status, _, body) = a.request(Method::DELETE, "/api/session", &headers, None).await.unwrap();
    assert_eq!(status, 204, "{body}");
    eventually("the copy refused on the other replica", Duration::from_secs(15), || async {
        match session(&b, cookie.clone()).await {
            (401, _, _) => Ok(()),
            (status, _, body) => Err(format!("{status}: {body}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", b.log_tail()));

    // The record names a fingerprint of the session, never its id; a new sign-in still holds.
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(w.client.clone(), &w.ns);
    let record = maps.get("myownshell-gateway-signed-out").await.unwrap().data.unwrap_or_default();
    assert!(record.len() == 1 && record.keys().all(|k| k.len() == 32), "{record:?}");
    let (again, _) = b.page().sign_in(&token).await.unwrap();
    assert_eq!(session(&a, again).await.0, 200, "a new sign-in is not signed out");
}
