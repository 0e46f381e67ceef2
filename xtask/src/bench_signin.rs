//! `cargo xtask bench signin`: what the gateway's sign-in through an identity provider costs,
//! against floors measured in the same run, on the test bed (Ory Hydra and its login page, and
//! an API-only control plane whose apiserver trusts Hydra):
//!
//! - the sign-in round trip as a person makes it: the page's "Sign in" link, the provider's
//!   login form posted, consent, back through the gateway's callback (the code traded, the ID
//!   token verified and shown to TokenReview, the session sealed) to the page, then a terminal
//!   opened with the new session until its first message. On the API-only plane that message is
//!   the end of the exec, which the gateway made as alice (the shell and its pods read as her,
//!   the exec impersonating her) and which the apiserver ends with "does not have a host
//!   assigned" for want of a node: it comes where a shell's first byte would. The floor is the
//!   same without the gateway: the same browser through Hydra's flow for a client of its own,
//!   the code traded by the same library the gateway trades it with (`myownshell_auth`'s
//!   `Verifier`, kept across sign-ins as the gateway keeps it), then the same reads and exec
//!   straight to the apiserver with the ID token. p50 and p99 of each, the two alternating;
//! - an ID token's verification per request with the issuer's keys cached, against the bare
//!   signature check of the same token and key (`auth/benches/verify.rs`, optimized).
//!
//! The gateway is the release binary with the admin's kubeconfig (it impersonates, as in
//! production); the browser, and the floor's code exchange, run here in the dev profile (so the
//! floor's exchange is, if anything, slower than the gateway's).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use myownshell_api::{MyOwnShell, names};
use myownshell_auth::oidc::{ClaimRules, ClientSecret, OidcOptions, Verifier, flow};
use myownshell_envtest::oidc::browser::{Browser, Landed};
use myownshell_envtest::oidc::sign_in::log_in;
use myownshell_envtest::oidc::users::ALICE;
use myownshell_envtest::oidc::{REDIRECT_URI, TrustingCluster, apiserver::USERNAME_PREFIX};
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::tls::loopback;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const SHELL: &str = "web";
const TIMEOUT: Duration = Duration::from_secs(60);
/// The gateway let the exec through, as alice: the apiserver ends it for want of a node.
const PAST_THE_GATE: &str = "does not have a host assigned";
/// Sign-ins of each path before the measured ones (connections, caches, Hydra's first keys).
const WARM_UP: usize = 3;

/// What the bench is asked for.
pub struct Options {
    /// Sign-ins measured per path.
    pub sign_ins: usize,
    /// Verifications per round of the verification bench.
    pub verifications: usize,
}

pub fn run(options: Options) -> anyhow::Result<()> {
    crate::envtest::ensure()?;
    let hydra = crate::hydra::ensure()?;
    let web = crate::web::ensure()?;
    let status = crate::cargo::cargo().args(["build", "--release", "-p", "myownshell-gateway"]).status()?;
    if !status.success() {
        bail!("cargo build --release -p myownshell-gateway failed ({status})");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(round_trips(options.sign_ins.max(10), web))?;
    println!();
    let status = crate::cargo::cargo()
        .env(myownshell_envtest::oidc::hydra::ENV, &hydra)
        .args(["bench", "--package", "myownshell-auth", "--bench", "verify", "--"])
        .args(["--iterations", &options.verifications.to_string()])
        .status()?;
    if !status.success() {
        bail!("the verification bench failed ({status})");
    }
    Ok(())
}

/// The test bed, alice's shell with a ready pod, and a gateway signing people in.
struct Bed {
    bed: TrustingCluster,
    ns: String,
    pod: String,
    origin: String,
    tls: Arc<rustls::ClientConfig>,
    /// The floor's client of the provider (the test bed's own client).
    client: Verifier,
    _gateway: ManagedProcess,
    _files: PathBuf,
}

async fn round_trips(sign_ins: usize, web: PathBuf) -> anyhow::Result<()> {
    let bed = set_up(web).await?;
    let (mut gateway, mut floor) = (Vec::new(), Vec::new());
    for i in 0..WARM_UP + sign_ins {
        let through = bed.through_gateway().await.context("a sign-in through the gateway")?;
        let straight = bed.straight().await.context("a sign-in straight to Hydra and the apiserver")?;
        if i >= WARM_UP {
            gateway.push(through);
            floor.push(straight);
        }
    }
    let (gateway, floor) = (Stats::of(gateway), Stats::of(floor));
    println!(
        "sign-in round trip, page -> provider -> back -> first terminal message, {sign_ins} sign-ins of alice each:"
    );
    println!("{:>44}  {:>8}  {:>8}", "", "p50 ms", "p99 ms");
    let row = |what: &str, p50: f64, p99: f64| println!("{what:>44}  {p50:>8.1}  {p99:>8.1}");
    row("through the gateway", gateway.p50, gateway.p99);
    row("floor: Hydra's flow, the exec straight", floor.p50, floor.p99);
    row("added by the gateway", gateway.p50 - floor.p50, gateway.p99 - floor.p99);
    println!(
        "(the first message: the exec the gateway made as {}{}, ended by the apiserver with \"{PAST_THE_GATE}\")",
        USERNAME_PREFIX, ALICE.name
    );
    Ok(())
}

struct Stats {
    p50: f64,
    p99: f64,
}

impl Stats {
    fn of(mut took: Vec<Duration>) -> Self {
        took.sort();
        let at = |q: f64| took[((took.len() as f64 * q).ceil() as usize).clamp(1, took.len()) - 1];
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Self { p50: ms(at(0.50)), p99: ms(at(0.99)) }
    }
}

async fn set_up(web: PathBuf) -> anyhow::Result<Bed> {
    let bed = TrustingCluster::start().await?;
    let cp = &bed.control_plane;
    let admin = cp.client()?;
    // alice may do what a shell's user does (and more): this measures sign-in, not RBAC.
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "bench-signin-alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": format!("{USERNAME_PREFIX}{}", ALICE.name)}]}))?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch("bench-signin-alice", &PatchParams::apply("bench-signin"), &Patch::Apply(&binding))
        .await?;
    let ns = myownshell_envtest::create_shell_namespace(&admin, "bench-signin").await?;
    let pod = ready_shell(&admin, &ns).await?;
    let files = cp.layout().dir.join("bench-signin");
    std::fs::create_dir_all(&files)?;
    let (gateway, origin, gateway_ca) = start_gateway(&bed, &files, web).await?;
    let tls = myownshell_envtest::tls::trusting(&[bed.provider.ca_pem(), &gateway_ca]).map_err(anyhow::Error::msg)?;
    let client = floor_client(&bed, &files).await?;
    Ok(Bed { bed, ns, pod, origin, tls, client, _gateway: gateway, _files: files })
}

/// The floor's client: the test bed's own client of the provider, through the library the
/// gateway uses, naming people as the apiserver does.
async fn floor_client(bed: &TrustingCluster, files: &Path) -> anyhow::Result<Verifier> {
    let ca = files.join("issuer-ca.crt");
    std::fs::write(&ca, bed.provider.ca_pem())?;
    let options = OidcOptions {
        issuer_url: bed.provider.issuer(),
        client_id: bed.client.client_id.clone(),
        ca_file: Some(ca),
        client_secret: Some(ClientSecret(bed.client.client_secret.clone())),
        claims: ClaimRules {
            username_claim: "sub".into(),
            username_prefix: Some(USERNAME_PREFIX.into()),
            groups_claim: Some("groups".into()),
            groups_prefix: myownshell_envtest::oidc::apiserver::GROUPS_PREFIX.into(),
        },
    };
    Ok(Verifier::discover(options).await?)
}

/// Shell [`SHELL`] with a running, ready pod (no controller runs here); the pod's name.
async fn ready_shell(admin: &kube::Client, ns: &str) -> anyhow::Result<String> {
    let shells: Api<MyOwnShell> = Api::namespaced(admin.clone(), ns);
    let shell: MyOwnShell = serde_json::from_value(
        json!({"apiVersion": names::API_VERSION, "kind": names::KIND, "metadata": {"name": SHELL}, "spec": {"size": 1}}),
    )?;
    shells.create(&PostParams::default(), &shell).await?;
    let selector = format!("{}={SHELL}", names::LABEL_INSTANCE);
    let status = json!({"status": {"selector": selector, "replicas": 1}});
    shells.patch_status(SHELL, &PatchParams::default(), &Patch::Merge(status)).await?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let name = format!("{SHELL}-5d8c7b9f4-bench");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {names::LABEL_INSTANCE: SHELL}},
        "spec": {"containers": [{"name": "shell", "image": myownshell_api::defaults::IMAGE}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let running = json!({"status": {"phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(running)).await?;
    Ok(name)
}

/// The release gateway signing people in through the bed's provider: the process, its origin,
/// and the CA of its certificate.
async fn start_gateway(
    bed: &TrustingCluster,
    files: &Path,
    web: PathBuf,
) -> anyhow::Result<(ManagedProcess, String, String)> {
    let tls = loopback("bench-signin-gateway").map_err(anyhow::Error::msg)?;
    std::fs::write(files.join("tls.crt"), &tls.leaf.cert_pem)?;
    std::fs::write(files.join("tls.key"), &tls.leaf.key_pem)?;
    let (port, probe) = (myownshell_envtest::ports::free_port()?, myownshell_envtest::ports::free_port()?);
    let origin = format!("https://127.0.0.1:{port}");
    let oidc = bed.provider.register_gateway(files, &origin, None).await.map_err(anyhow::Error::msg)?;
    let binary = myownshell_envtest::assets::target_dir().join("release/myownshell-gateway");
    let spec = ProcessSpec::new("gateway", binary, files.join("gateway.log"))
        .args([
            format!("--bind-address=127.0.0.1:{port}"),
            format!("--health-probe-bind-address=127.0.0.1:{probe}"),
            format!("--tls-cert-file={}", files.join("tls.crt").display()),
            format!("--tls-private-key-file={}", files.join("tls.key").display()),
            format!("--assets-dir={}", web.display()),
            format!("--kubeconfig={}", bed.control_plane.kubeconfig_path().display()),
            format!("--allowed-origins={origin}"),
        ])
        .args(oidc);
    let process = ManagedProcess::spawn(spec)?;
    let probe = std::net::SocketAddr::from(([127, 0, 0, 1], probe));
    crate::bench_gateway::wait_ready(&process, probe, TIMEOUT).await?;
    Ok((process, origin, tls.ca.cert_pem().to_owned()))
}

impl Bed {
    /// One sign-in through the gateway's page link to the first message of a terminal.
    async fn through_gateway(&self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let mut browser = Browser::new(self.tls.clone(), "https://nowhere.invalid/");
        let at_provider = browser.get(&format!("{}/oidc/login", self.origin)).await.map_err(anyhow::Error::msg)?;
        match log_in(&mut browser, at_provider, ALICE.name, ALICE.password).await? {
            Landed::Page(url, page) if url == format!("{}/", self.origin) && page.status == 200 => {}
            Landed::Page(url, page) => bail!("the sign-in ended at {url} with {}", page.status),
            Landed::Stopped(url) => bail!("the sign-in stopped at {url}"),
        }
        let session = browser.cookie("127.0.0.1", "__Host-myownshell-session").context("no session cookie")?;
        let first = self.first_message(&format!("__Host-myownshell-session={session}")).await?;
        let took = started.elapsed();
        if !first.contains(PAST_THE_GATE) {
            bail!("the terminal's first message: {first}");
        }
        Ok(took)
    }

    /// The first text message of shell [`SHELL`]'s terminal, opened with `cookie` from the page.
    async fn first_message(&self, cookie: &str) -> anyhow::Result<String> {
        let address = self.origin.trim_start_matches("https://");
        let tcp = tokio::net::TcpStream::connect(address).await?;
        let _ = tcp.set_nodelay(true);
        let name = rustls_pki_types::ServerName::try_from("localhost")?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp).await?;
        let url = format!("wss://{address}/api/terminal/{}/{SHELL}?cols=80&rows=24", self.ns);
        let mut request = url.into_client_request()?;
        request.headers_mut().insert("cookie", cookie.parse()?);
        request.headers_mut().insert("origin", self.origin.parse()?);
        let (mut socket, _) = tokio_tungstenite::client_async(request, tls).await?;
        loop {
            match tokio::time::timeout(TIMEOUT, socket.next()).await {
                Ok(Some(Ok(Message::Text(text)))) => return Ok(text.to_string()),
                Ok(Some(Ok(_))) => continue,
                other => bail!("no message from the terminal: {other:?}"),
            }
        }
    }

    /// The floor: Hydra's flow by the same browser for the floor's client, which trades the
    /// code itself, then the gateway's reads and exec made straight to the apiserver with the
    /// ID token.
    async fn straight(&self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let scopes = ["offline_access", "profile", "email"].map(String::from);
        let request = flow::begin(self.client.provider(), &self.bed.client.client_id, REDIRECT_URI, &scopes)?;
        let mut browser = Browser::new(self.tls.clone(), REDIRECT_URI);
        let at_provider = browser.get(&request.url).await.map_err(anyhow::Error::msg)?;
        let callback = match log_in(&mut browser, at_provider, ALICE.name, ALICE.password).await? {
            Landed::Stopped(callback) => callback,
            Landed::Page(url, page) => bail!("Hydra's flow ended at {url} with {}", page.status),
        };
        let query = callback.split_once('?').map_or("", |(_, q)| q);
        let value = |name: &str| form_urlencoded_value(query, name);
        if value("state").as_deref() != Some(request.state.as_str()) {
            bail!("the callback's state is not the one sent");
        }
        let code = value("code").context("the callback holds no code")?;
        let signed_in = self.client.exchange(&code, &request, REDIRECT_URI).await?;
        let id_token = signed_in.id_token;
        let alice = self.bed.control_plane.client_with_token(&id_token)?;
        let shell = Api::<MyOwnShell>::namespaced(alice.clone(), &self.ns).get(SHELL).await?;
        let selector = shell.status.and_then(|s| s.selector).unwrap_or_default();
        Api::<Pod>::namespaced(alice.clone(), &self.ns).list(&ListParams::default().labels(&selector)).await?;
        let uri = format!("/api/v1/namespaces/{}/pods/{}/exec?command=sh&stdout=true&tty=true", self.ns, self.pod);
        let ended = match alice.request_text(http::Request::post(uri).body(Vec::new())?).await {
            Err(kube::Error::Api(status)) => status.message,
            other => format!("{other:?}"),
        };
        let took = started.elapsed();
        if !ended.contains(PAST_THE_GATE) {
            bail!("the straight exec: {ended}");
        }
        Ok(took)
    }
}

/// The value of `name` in a URL's `query`.
fn form_urlencoded_value(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == name).map(|(_, v)| v.into_owned())
}
