//! What the tests of the gateway's sign-in through the identity provider share
//! (`gateway_oidc_gate.rs`, `gateway_oidc_attacks.rs`): on a control plane that trusts the test
//! bed's Hydra, a namespace open to shells whose editors are the provider's alice and bob, the
//! connect gate (a `myownshell-webhook` process) for it, and a gateway process with `--oidc-*`
//! running as a ServiceAccount bound to exactly the ClusterRole `config/rbac/gateway_role.yaml`
//! ships (it impersonates the person who signed in); a browser that signs a person in through
//! the gateway's page link.
//!
//! Each test binary uses what it needs of it.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use http::Method;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use myownshell_api::MyOwnShell;
use myownshell_envtest::assets::workspace_root;
use myownshell_envtest::control_plane::{ControlPlane, write_kubeconfig};
use myownshell_envtest::oidc::apiserver::{GROUPS_PREFIX, USERNAME_PREFIX};
use myownshell_envtest::oidc::browser::{Browser, Landed};
use myownshell_envtest::oidc::sign_in::log_in;
use myownshell_envtest::oidc::users::User;
use myownshell_envtest::oidc::{Provider, TrustingCluster};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{create_shell_namespace, rbac, service_account_token};
use myownshell_tests::access::{as_user, namespace_editors, shell_manifest};
use myownshell_tests::gateway::GatewayProcess;
use myownshell_tests::shell_pods;
use myownshell_tests::webhooks::{InstalledWebhooks, WebhookProcess};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// The session cookie's name.
pub const SESSION: &str = "__Host-myownshell-session";
/// The pending sign-in's cookie's name.
pub const PENDING: &str = "__Host-myownshell-oidc";
/// Where the browsers' cookies live (every server of the test runs on it).
pub const HOST: &str = "127.0.0.1";

const READY: Duration = Duration::from_secs(60);
const HOUR: i64 = 3600;

/// The namespace, the gate and the gateway of one test.
pub struct World<'a> {
    pub cp: &'a ControlPlane,
    pub provider: &'a Provider,
    pub client: Client,
    pub ns: String,
    pub gateway: GatewayProcess,
    /// `https://127.0.0.1:PORT` of the gateway.
    pub origin: String,
    /// A browser's TLS: it trusts the provider's and the gateway's certificates.
    pub tls: Arc<rustls::ClientConfig>,
    _gate: (InstalledWebhooks, WebhookProcess),
    _files: tempfile::TempDir,
}

/// `user`'s name as the apiserver (and so the gateway and the gate) says it: `oidc:alice`.
pub fn cluster_name(user: &User) -> String {
    format!("{USERNAME_PREFIX}{}", user.name)
}

/// `user`'s groups as the apiserver says them, with `system:authenticated`.
pub fn cluster_groups(user: &User) -> Vec<String> {
    let mut groups: Vec<String> = user.groups.iter().map(|g| format!("{GROUPS_PREFIX}{g}")).collect();
    groups.push("system:authenticated".into());
    groups
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

/// The shipped role, bound to this test's gateway ServiceAccount under a name of its own; a
/// kubeconfig with its token.
async fn gateway_identity(cp: &ControlPlane, client: &Client, ns: &str) -> std::path::PathBuf {
    let name = format!("{ns}-gateway");
    let mut role = shipped_role();
    role.metadata = kube::api::ObjectMeta { name: Some(name.clone()), ..Default::default() };
    let apply = PatchParams::apply("myownshell-tests").force();
    Api::<ClusterRole>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&role)).await.unwrap();
    let binding = rbac::cluster_role_binding(&name, &name, rbac::service_account_subject(ns, "gateway"));
    Api::<ClusterRoleBinding>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&binding)).await.unwrap();
    let token = service_account_token(client, ns, "gateway", &[], HOUR).await.unwrap();
    let kubeconfig = cp.layout().dir.join(format!("{ns}-gateway.kubeconfig"));
    write_kubeconfig(&kubeconfig, &cp.kubeconfig_for_token(&token)).unwrap();
    kubeconfig
}

impl<'a> World<'a> {
    /// A namespace (`prefix-…`) of `bed`'s plane whose editors are alice and bob, its connect
    /// gate, and a gateway signing people in through `bed`'s provider, with `flags` besides.
    pub async fn start(bed: &'a TrustingCluster, prefix: &str, flags: &[&str]) -> World<'a> {
        Self::start_with(bed, prefix, flags, None).await
    }

    /// [`World::start`], the provider's ID tokens for the gateway living `id_tokens` (Hydra's
    /// hour if `None`).
    pub async fn start_with(
        bed: &'a TrustingCluster,
        prefix: &str,
        flags: &[&str],
        id_tokens: Option<Duration>,
    ) -> World<'a> {
        let cp = &bed.control_plane;
        let client = cp.client().unwrap();
        let ns = create_shell_namespace(&client, prefix).await.unwrap();
        let people = ["oidc:alice", "oidc:bob"];
        namespace_editors(&client, &ns, &people, &[]).await.unwrap();
        let kubeconfig = gateway_identity(cp, &client, &ns).await;
        let gate = myownshell_tests::webhooks::connect_gate(cp, &client, &ns).await.unwrap();
        let files = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        let origin = format!("https://127.0.0.1:{port}");
        let mut all = bed.provider.register_gateway(files.path(), &origin, id_tokens).await.unwrap();
        all.push(format!("--allowed-origins={origin}"));
        all.extend(flags.iter().map(|f| (*f).to_owned()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let gateway = GatewayProcess::start_on(cp, kubeconfig, &format!("{ns}-gateway"), port, &all).await.unwrap();
        let tls = myownshell_tests::tls_client::trusting(&[bed.provider.ca_pem(), &gateway.ca_pem()]).unwrap();
        World { cp, provider: &bed.provider, client, ns, gateway, origin, tls, _gate: gate, _files: files }
    }

    /// `user`'s shell `name`, applied as them (so they are its owner).
    pub async fn shell(&self, user: &User, name: &str) {
        let groups = cluster_groups(user);
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let mut args = as_user(&cluster_name(user), &groups);
        args.extend(["apply", "-n", &self.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.cp.kubectl().run_with_stdin(&args, Some(&shell_manifest(name, "{size: 1}"))).await.unwrap();
        assert!(out.success, "{}", out.stderr);
        let owner = Api::<MyOwnShell>::namespaced(self.client.clone(), &self.ns).get(name).await.unwrap().spec.owner;
        assert_eq!(owner, Some(cluster_name(user)), "the gate's webhook made them its owner");
    }

    /// `user` changes `sharedWith` of their shell `name` to `groups`.
    pub async fn share_with_groups(&self, user: &User, name: &str, groups: &[&str]) {
        let theirs = cluster_groups(user);
        let theirs: Vec<&str> = theirs.iter().map(String::as_str).collect();
        let patch = json!({ "spec": { "sharedWith": { "groups": groups } } }).to_string();
        let mut args = as_user(&cluster_name(user), &theirs);
        args.extend(["patch", "myownshell", name, "-n", &self.ns, "--type=merge", "-p", &patch].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.cp.kubectl().run(&args).await.unwrap();
        assert!(out.success, "{}", out.stderr);
    }

    /// A ready pod for shell `name`, and the selector in its status (no controller runs here).
    pub async fn ready_pod(&self, name: &str) -> String {
        shell_pods::ready(&self.client, &self.ns, name).await.unwrap()
    }

    /// A browser of this test: it trusts the provider and the gateway, and stops at `stop_at`.
    pub fn browser(&self, stop_at: &str) -> Browser {
        Browser::new(self.tls.clone(), stop_at)
    }

    /// The callback URL the provider sends `user`'s browser back with, once they have logged in
    /// at the provider after following the page's link (not followed yet).
    pub async fn callback_for(&self, browser: &mut Browser, user: &User) -> String {
        let _one = self.provider.one_flow_at_a_time().await;
        let at_provider = browser.get(&format!("{}/oidc/login", self.origin)).await.unwrap();
        match log_in(browser, at_provider, user.name, user.password).await.unwrap() {
            Landed::Stopped(callback) => callback,
            Landed::Page(url, response) => panic!("expected the callback, landed at {url}: {}", response.status),
        }
    }

    /// Sign `user` in through the page's link, as a browser does: the browser, and its
    /// `Cookie` header for the gateway.
    pub async fn sign_in(&self, user: &User) -> (Browser, String) {
        let mut browser = self.browser("https://nowhere.invalid/");
        let one = self.provider.one_flow_at_a_time().await;
        let at_provider = browser.get(&format!("{}/oidc/login", self.origin)).await.unwrap();
        let (url, status, _) = page(log_in(&mut browser, at_provider, user.name, user.password).await.unwrap());
        drop(one);
        assert_eq!((url.as_str(), status), (format!("{}/", self.origin).as_str(), 200), "back on the page");
        let cookie = session_cookie(&browser).unwrap_or_else(|| panic!("{} has no session", user.name));
        (browser, cookie)
    }

    /// `browser` follows `url` (a callback: the gateway trades its code at the provider) to
    /// where it lands: its URL, status and body.
    pub async fn follow(&self, browser: &mut Browser, url: &str) -> (String, u16, String) {
        let _one = self.provider.one_flow_at_a_time().await;
        page(browser.get(url).await.unwrap())
    }

    /// `GET /api/session` with `cookie`: the status and the body.
    pub async fn session(&self, cookie: &str) -> (u16, String) {
        let (status, _, body) =
            self.gateway.request(Method::GET, "/api/session", &[("cookie", cookie)], None).await.unwrap();
        (status, body)
    }

    /// Open shell `name`'s terminal with `cookie`; every JSON message until the socket closes
    /// (or the 20th).
    pub async fn terminal_messages(&self, cookie: &str, name: &str) -> Vec<Value> {
        let mut socket = self.terminal(cookie, name).await;
        let mut messages = Vec::new();
        while let Some(message) = next_json(&mut socket, Duration::from_secs(30)).await {
            messages.push(message);
            if messages.len() >= 20 {
                break;
            }
        }
        messages
    }

    /// Shell `name`'s terminal socket, opened with `cookie` from the page.
    pub async fn terminal(&self, cookie: &str, name: &str) -> Socket {
        let path = format!("/api/terminal/{}/{name}?cols=80&rows=24", self.ns);
        let headers = [("cookie", cookie), ("origin", self.origin.as_str())];
        self.gateway.websocket(&path, &headers).await.unwrap_or_else(|e| panic!("{e}\n{}", self.gateway.log_tail()))
    }
}

/// A terminal's socket, as the tests hold it.
pub type Socket = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// The next JSON message of `socket` within `within`; `None` once it closes or says nothing.
pub async fn next_json(socket: &mut Socket, within: Duration) -> Option<Value> {
    loop {
        match tokio::time::timeout(within, socket.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => return Some(serde_json::from_str(text.as_str()).unwrap()),
            Ok(Some(Ok(Message::Close(_))) | None | Some(Err(_))) | Err(_) => return None,
            Ok(Some(Ok(_))) => continue,
        }
    }
}

/// The `Cookie` header of `browser`'s gateway session, if it has one.
pub fn session_cookie(browser: &Browser) -> Option<String> {
    browser.cookie(HOST, SESSION).map(|value| format!("{SESSION}={value}"))
}

/// Where a navigation landed: its URL and status, and its body.
pub fn page(landed: Landed) -> (String, u16, String) {
    match landed {
        Landed::Page(url, response) => (url, response.status, response.text()),
        Landed::Stopped(url) => panic!("stopped at {url}"),
    }
}

/// The value of `name` in `url`'s query.
pub fn query_value(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == name).map(|(_, v)| v.into_owned())
}

/// The sentence the page is sent back with after a failed sign-in.
pub fn sign_in_error(url: &str) -> String {
    query_value(url, "sign-in-error").unwrap_or_else(|| panic!("{url} says no sign-in error"))
}

/// The message of the first `refused` of a terminal's messages.
pub fn refusal(messages: &[Value]) -> String {
    messages
        .iter()
        .find(|m| m["type"] == "refused")
        .and_then(|m| m["message"].as_str())
        .unwrap_or_else(|| panic!("no refusal among {messages:?}"))
        .to_owned()
}
