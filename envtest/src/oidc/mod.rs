//! A real OpenID Connect provider for tests: Ory Hydra ([`hydra`]) and a login and consent page
//! of our own ([`login`], Hydra being headless) with the test bed's people ([`users`]), both on
//! 127.0.0.1 over TLS with a certificate of the test bed's own CA; a browser that signs a person
//! in through them ([`sign_in`]); and a control plane that trusts the provider as an issuer of
//! ID tokens ([`apiserver`], [`TrustingCluster`]), so that a person signed in by Hydra is that
//! person, with their groups, to Kubernetes.

pub mod admin;
pub mod apiserver;
pub mod browser;
mod cluster;
pub mod https;
pub mod hydra;
pub mod login;
pub mod oauth2_proxy;
pub mod sign_in;
pub mod users;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

pub use cluster::{GATEWAY_CLIENT_ID, GATEWAY_CLIENT_IDS, Order, REDIRECT_URI, TrustingCluster, shared};
use rustls::ClientConfig;

use crate::ports::free_port;
use crate::process::ManagedProcess;
use crate::tls::{LoopbackTls, loopback};
use crate::wait::eventually;
use admin::Admin;
use hydra::HydraConfig;
use login::LoginPage;

/// Hydra and the login page, running; both stop when it is dropped (and die with the test
/// process if it never is).
pub struct Provider {
    // Declared first: dropped (stopped) before the page it sends browsers to.
    hydra: Mutex<ManagedProcess>,
    login: LoginPage,
    config: HydraConfig,
    tls: LoopbackTls,
    admin: Admin,
    /// How many gateways were registered ([`Provider::register_gateway`]).
    gateways: AtomicUsize,
    /// Held through a browser's steps at Hydra ([`Provider::one_flow_at_a_time`]).
    flows: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider").field("issuer", &self.issuer()).field("login", &self.login.url()).finish()
    }
}

/// A provider laid out but not started yet: its ports, certificate and issuer are fixed, and its
/// login page is up, so that an apiserver can be told to trust an issuer that comes up later.
pub struct Planned {
    binary: PathBuf,
    dir: PathBuf,
    login: LoginPage,
    config: HydraConfig,
    tls: LoopbackTls,
    admin: Admin,
}

impl Planned {
    /// The issuer URL Hydra will have.
    pub fn issuer(&self) -> String {
        self.config.issuer()
    }

    /// PEM of the CA that signs Hydra's certificate.
    pub fn ca_pem(&self) -> &str {
        self.tls.ca.cert_pem()
    }

    /// Start Hydra and wait until it serves its discovery document and says it is ready.
    pub async fn start(self) -> Result<Provider, String> {
        let Self { binary, dir, login, config, tls, admin } = self;
        let hydra = Mutex::new(hydra::spawn(&binary, &config, &dir)?);
        let provider =
            Provider { hydra, login, config, tls, admin, gateways: AtomicUsize::new(0), flows: Default::default() };
        provider.wait_ready().await?;
        Ok(provider)
    }
}

impl Provider {
    /// Lay a provider out with its files and logs in `dir`: Hydra's ports, a certificate, and
    /// the login page, started.
    pub fn plan(dir: &Path) -> Result<Planned, String> {
        let binary = hydra::locate()?;
        let tls = loopback("myownshell-oidc-test-bed")?;
        let (cert, key) = (dir.join("oidc-serving.crt"), dir.join("oidc-serving.key"));
        write_private(&cert, &tls.leaf.cert_pem)?;
        write_private(&key, &tls.leaf.key_pem)?;
        let port = || free_port().map_err(|e| format!("a port for Hydra: {e}"));
        let (public_port, admin_port) = (port()?, port()?);
        let admin = Admin::new(format!("https://127.0.0.1:{admin_port}"), tls.client.clone());
        let login = LoginPage::start(tls.server.clone(), admin.clone())?;
        let config =
            HydraConfig { public_port, admin_port, login_url: login.url(), cert, key, secret: random_secret()? };
        Ok(Planned { binary, dir: dir.to_owned(), login, config, tls, admin })
    }

    /// [`Provider::plan`] and [`Planned::start`].
    pub async fn start(dir: &Path) -> Result<Self, String> {
        Self::plan(dir)?.start().await
    }

    async fn wait_ready(&self) -> Result<(), String> {
        let issuer = self.issuer();
        eventually("Hydra to serve its discovery document and be ready", hydra::START_TIMEOUT, || async {
            if let Some(exit) = self.hydra.lock().unwrap_or_else(PoisonError::into_inner).exit_status() {
                let log = self.log_tail(30);
                // Not worth polling further: said at once.
                return Ok(Err(format!("Hydra exited ({exit}); its log ends:\n{log}")));
            }
            let get = |url: String| async move {
                let request = http::Request::get(url).body(Vec::new()).map_err(|e| e.to_string())?;
                https::send(&self.tls.client, request).await
            };
            let ready = get(format!("{}/health/ready", self.config.admin_url())).await?;
            if ready.status != 200 {
                return Err(format!("admin /health/ready: {} {}", ready.status, ready.text()));
            }
            let discovery = get(format!("{issuer}/.well-known/openid-configuration")).await?;
            let doc: serde_json::Value = serde_json::from_slice(&discovery.body).map_err(|e| e.to_string())?;
            match doc["issuer"].as_str() {
                Some(named) if named == issuer => Ok(Ok(())),
                other => Err(format!("discovery names the issuer {other:?}, expected {issuer}")),
            }
        })
        .await?
    }

    /// The issuer URL (`https://127.0.0.1:PORT`), as discovery and every token say it.
    pub fn issuer(&self) -> String {
        self.config.issuer()
    }

    /// PEM of the CA that signed Hydra's and the login page's certificate.
    pub fn ca_pem(&self) -> &str {
        self.tls.ca.cert_pem()
    }

    /// A TLS client configuration trusting only [`Provider::ca_pem`].
    pub fn client_tls(&self) -> Arc<ClientConfig> {
        self.tls.client.clone()
    }

    /// Hydra's process id (the login page runs in this process).
    pub fn pid(&self) -> u32 {
        self.hydra.lock().unwrap_or_else(PoisonError::into_inner).pid()
    }

    /// Register `myownshell-gateway` serving at `origin` as a client (the next of
    /// [`GATEWAY_CLIENT_IDS`], [`GATEWAY_CLIENT_ID`] first, its redirect URI
    /// `<origin>/oidc/callback`, its ID tokens living `id_token_lifespan` or Hydra's default),
    /// write its secret and this provider's CA into `dir`, and give the gateway's `--oidc-*`
    /// flags for it, naming people as the apiserver's `--authentication-config` of
    /// [`apiserver`] does (`oidc:alice`).
    pub async fn register_gateway(
        &self,
        dir: &Path,
        origin: &str,
        id_token_lifespan: Option<std::time::Duration>,
    ) -> Result<Vec<String>, String> {
        let redirect = format!("{origin}/oidc/callback");
        let lifespan = id_token_lifespan.map(|d| format!("{}s", d.as_secs()));
        let n = self.gateways.fetch_add(1, Ordering::Relaxed);
        let client_id = GATEWAY_CLIENT_IDS
            .get(n)
            .ok_or_else(|| format!("the test bed registers at most {} gateways", GATEWAY_CLIENT_IDS.len()))?;
        let client = admin::Client {
            client_id: (*client_id).into(),
            client_secret: random_secret()?,
            redirect_uris: vec![redirect.clone()],
            id_token_lifespan: lifespan.clone(),
            refresh_id_token_lifespan: lifespan,
        };
        self.create_client(&client).await?;
        let (secret_file, ca_file) = (dir.join("gateway-client-secret"), dir.join("issuer-ca.crt"));
        write_private(&secret_file, &client.client_secret)?;
        write_private(&ca_file, self.ca_pem())?;
        Ok(vec![
            format!("--oidc-issuer-url={}", self.issuer()),
            format!("--oidc-client-id={client_id}"),
            format!("--oidc-client-secret-file={}", secret_file.display()),
            format!("--oidc-redirect-url={redirect}"),
            format!("--oidc-ca-file={}", ca_file.display()),
            format!("--oidc-username-prefix={}", apiserver::USERNAME_PREFIX),
            "--oidc-groups-claim=groups".into(),
            format!("--oidc-groups-prefix={}", apiserver::GROUPS_PREFIX),
        ])
    }

    /// Held while a browser goes through Hydra (the authorization endpoint, the login and
    /// consent, and the client's code exchange after), and while a client is registered
    /// ([`Provider::create_client`]): Hydra on SQLite in memory (`dsn: memory`)
    /// refuses a flow that meets another's write ("Unable to serialize access due to a
    /// concurrent update in another session", a 400 the client sees as "The error is
    /// unrecognizable"), which the tests of one binary, sharing the provider, otherwise meet.
    /// A production Hydra on PostgreSQL takes concurrent flows.
    pub async fn one_flow_at_a_time(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.flows.lock().await
    }

    /// Stop Hydra (SIGTERM, then SIGKILL after 10 s), as an identity provider that goes down;
    /// the login page stays. Nothing answers at the issuer afterwards.
    pub fn stop(&self) -> Result<(), String> {
        let mut hydra = self.hydra.lock().unwrap_or_else(PoisonError::into_inner);
        hydra.stop(std::time::Duration::from_secs(10)).map(drop).map_err(|e| format!("stopping Hydra: {e}"))
    }

    /// Register `client` with Hydra's admin API, the one way a test writes to Hydra outside a
    /// flow (the login page's writes come inside one). It waits for
    /// [`Provider::one_flow_at_a_time`]: a registration meets another test's flow just as two
    /// flows meet (CI, 2026-12-02: "Unable to serialize access due to a concurrent update in
    /// another session", a 400 to this POST while a gateway test signed someone in).
    pub async fn create_client(&self, client: &admin::Client) -> Result<(), String> {
        let _one = self.one_flow_at_a_time().await;
        self.admin.create_client(client).await
    }

    /// The login page's base URL.
    pub fn login_url(&self) -> String {
        self.login.url()
    }

    /// Hydra's log file.
    pub fn log_path(&self) -> PathBuf {
        self.hydra.lock().unwrap_or_else(PoisonError::into_inner).log_path().to_owned()
    }

    /// The last `lines` of Hydra's log (for failure messages).
    pub fn log_tail(&self, lines: usize) -> String {
        self.hydra.lock().unwrap_or_else(PoisonError::into_inner).log_tail(lines)
    }
}

/// 32 random bytes, hex: Hydra's system secret for one run, or a client's secret.
pub fn random_secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("random bytes: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_private(path: &Path, contents: &str) -> Result<(), String> {
    crate::control_plane::write_private(path, contents).map_err(|e| e.to_string())
}
