//! Shared by the `rbac_proxy*` test binaries: a TLS client for the proxy, serving certificates,
//! an in-process secure metrics server, RBAC helpers, and a gate that holds TokenReviews
//! ([`review_gate`]). Each binary uses a subset.

// As in the test files that use it: a panic here is a test's failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod review_gate;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Extension;
use axum::routing::get;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Subject};
use kube::api::{Api, DeleteParams, PostParams};
use myownshell_auth::authn::AuthnCacheOptions;
use myownshell_auth::authz::AuthzCacheOptions;
use myownshell_auth::{AuthOptions, AuthenticatedUser, RbacAuth, SecureServer, SecureServingOptions, TlsFiles};
use myownshell_certs::pki::{CertificateAuthority, CertifiedKeyPem, LeafSpec};
use myownshell_envtest::eventually;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

/// How long these tests wait for any one state.
pub const TIMEOUT: Duration = Duration::from_secs(30);
const VALIDITY: Duration = Duration::from_secs(86_400);

/// What the in-process metrics endpoint serves.
pub const METRICS_BODY: &str =
    "# HELP myownshell_up Whether the test exporter is up.\n# TYPE myownshell_up gauge\nmyownshell_up 1\n# EOF\n";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

// ---------------------------------------------------------------------------------------------
// Certificates

/// A CA, a `localhost` serving certificate from it, and both written to files.
pub struct ServingPki {
    /// Where the files are (removed on drop).
    pub dir: tempfile::TempDir,
    /// The CA that issued the serving certificate.
    pub ca: CertificateAuthority,
    /// The serving certificate (PEM).
    pub cert_file: PathBuf,
    /// Its key (PEM).
    pub key_file: PathBuf,
}

impl Default for ServingPki {
    fn default() -> Self {
        Self::new()
    }
}

impl ServingPki {
    /// A fresh CA and `localhost` certificate, written to a new temporary directory.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let myownshell_envtest::tls::LoopbackTls { ca, leaf, .. } =
            myownshell_envtest::tls::loopback("rbac-proxy-test-serving-ca").unwrap();
        let cert_file = dir.path().join("tls.crt");
        let key_file = dir.path().join("tls.key");
        std::fs::write(&cert_file, &leaf.cert_pem).unwrap();
        std::fs::write(&key_file, &leaf.key_pem).unwrap();
        Self { dir, ca, cert_file, key_file }
    }

    /// The CA certificate (PEM), for a client that verifies the server.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }
}

/// A client CA written to a file, for `--client-ca-file`.
pub struct ClientPki {
    /// The client CA.
    pub ca: CertificateAuthority,
    /// Its certificate (PEM), for `--client-ca-file`.
    pub ca_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl ClientPki {
    /// A fresh client CA named `name`, written to a new temporary directory.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = CertificateAuthority::generate(name, VALIDITY).unwrap();
        let ca_file = dir.path().join("client-ca.crt");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        Self { ca, ca_file, _dir: dir }
    }

    /// A client certificate for `user` (CN) in `groups` (O).
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> CertifiedKeyPem {
        self.ca.issue(&LeafSpec::client(user, groups.iter().map(|g| (*g).to_owned()).collect(), VALIDITY)).unwrap()
    }
}

// ---------------------------------------------------------------------------------------------
// A TLS client

/// Accepts exactly one server certificate (a self-signed one whose CA the test never sees),
/// still checking the handshake signatures.
/// An answer, body read to the end.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Reply {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// An HTTPS client for one server (new connection per request: no state between calls).
#[derive(Clone)]
pub struct Https {
    config: Arc<ClientConfig>,
}

impl Https {
    fn build(
        verifier: Option<Arc<dyn ServerCertVerifier>>,
        ca_pem: Option<&str>,
        cert: Option<&CertifiedKeyPem>,
    ) -> Self {
        let builder = ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().unwrap();
        let builder = match (verifier, ca_pem) {
            (Some(v), _) => builder.dangerous().with_custom_certificate_verifier(v),
            (None, Some(pem)) => {
                let mut roots = RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots.add(c.unwrap()).unwrap();
                }
                builder.with_root_certificates(roots)
            }
            (None, None) => panic!("a verifier or a CA"),
        };
        let mut config = match cert {
            Some(c) => {
                let chain =
                    CertificateDer::pem_slice_iter(c.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
                let key = PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // Every request does a full handshake, so certificate checks are never skipped by
        // resuming an earlier session.
        config.resumption = rustls::client::Resumption::disabled();
        Self { config: Arc::new(config) }
    }

    /// Trust server certificates signed by `ca_pem`.
    pub fn trusting(ca_pem: &str) -> Self {
        Self::build(None, Some(ca_pem), None)
    }

    /// Trust exactly this server certificate.
    pub fn pinned(leaf: CertificateDer<'static>) -> Self {
        Self::build(Some(crate::tls_client::pinned_server(leaf)), None, None)
    }

    /// Accept whatever certificate the server shows (signatures still checked): only for a
    /// server whose self-signed certificate the test cannot see.
    pub fn any_server() -> Self {
        Self::build(Some(crate::tls_client::accept_any_server()), None, None)
    }

    /// The ALPN protocol the server picks when offered `offers` (None: none agreed).
    pub async fn negotiated_alpn(&self, addr: SocketAddr, offers: &[&[u8]]) -> Result<Option<Vec<u8>>, String> {
        let mut config = (*self.config).clone();
        config.alpn_protocols = offers.iter().map(|o| o.to_vec()).collect();
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        Ok(tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec))
    }

    /// Trust `ca_pem` and present `cert` as the client certificate.
    pub fn with_client_cert(ca_pem: &str, cert: &CertifiedKeyPem) -> Self {
        Self::build(None, Some(ca_pem), Some(cert))
    }

    async fn connect<B>(
        &self,
        addr: SocketAddr,
    ) -> Result<(hyper::client::conn::http1::SendRequest<B>, tokio::task::JoinHandle<hyper::Result<()>>), String>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        Ok((sender, tokio::spawn(conn)))
    }

    /// Send `req` to `addr` on a new connection and read the whole answer.
    pub async fn send<B>(&self, addr: SocketAddr, req: Request<B>) -> Result<Reply, String>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (mut sender, driver) = self.connect(addr).await?;
        let response = sender.send_request(req).await.map_err(|e| format!("request: {e}"))?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| format!("reading the body: {e}"))?.to_bytes();
        drop(sender);
        let _ = driver.await;
        Ok(Reply { status: parts.status, headers: parts.headers, body })
    }

    /// `GET path` (with `Authorization: Bearer token` if given).
    pub async fn get(&self, addr: SocketAddr, path: &str, token: Option<&str>) -> Result<Reply, String> {
        self.get_with(addr, path, token, &[]).await
    }

    /// `GET path` with extra headers.
    pub async fn get_with(
        &self,
        addr: SocketAddr,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, String> {
        let mut builder = Request::get(path).header("host", "localhost");
        if let Some(t) = token {
            builder = builder.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        self.send(addr, builder.body(Full::new(Bytes::new())).unwrap()).await
    }

    /// GET a possibly huge body without holding it: each data frame goes to `sink`.
    pub async fn get_streaming(
        &self,
        addr: SocketAddr,
        path: &str,
        token: &str,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<StatusCode, String> {
        let (mut sender, driver) = self.connect(addr).await?;
        let req = Request::get(path)
            .header("host", "localhost")
            .header("authorization", format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = sender.send_request(req).await.map_err(|e| format!("request: {e}"))?;
        let status = response.status();
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.map_err(|e| format!("reading the body: {e}"))?.into_data() {
                sink(&data);
            }
        }
        drop(sender);
        let _ = driver.await;
        Ok(status)
    }

    /// Poll `GET /metrics` until it answers `want` (RBAC and the caches take effect eventually).
    pub async fn wait_for_status(&self, addr: SocketAddr, token: Option<&str>, want: StatusCode, what: &str) {
        eventually(what, TIMEOUT, || async {
            match self.status(addr, "/metrics", token).await? {
                status if status == want => Ok(()),
                other => Err(other.to_string()),
            }
        })
        .await
        .unwrap();
    }

    /// The status of a GET, or the error text (for polling).
    pub async fn status(&self, addr: SocketAddr, path: &str, token: Option<&str>) -> Result<StatusCode, String> {
        self.get(addr, path, token).await.map(|r| r.status)
    }
}

// ---------------------------------------------------------------------------------------------
// The in-process secure metrics server

/// Auth options with explicit cache lifetimes (short ones make TTL edges observable).
pub fn auth_options(authn_ttl: Duration, allow_ttl: Duration, deny_ttl: Duration) -> AuthOptions {
    AuthOptions {
        authn_cache: AuthnCacheOptions { ttl: authn_ttl, rejected_ttl: deny_ttl, ..AuthnCacheOptions::default() },
        authz_cache: AuthzCacheOptions { allow_ttl, deny_ttl, ..AuthzCacheOptions::default() },
        ..AuthOptions::default()
    }
}

/// `/metrics` with a fixed body, and `/whoami` echoing the user the layer put in extensions.
pub fn metrics_router() -> Router {
    Router::new().route("/metrics", get(|| async { METRICS_BODY })).route(
        "/whoami",
        get(|Extension(user): Extension<AuthenticatedUser>| async move {
            format!("{} {:?} {}", user.name, user.method, user.groups.join(","))
        }),
    )
}

/// `serve_secure_metrics`'s server, running in this test's runtime.
pub struct MetricsServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its auth layer (for the review counts).
    pub auth: RbacAuth,
    /// A client that trusts its certificate.
    pub https: Https,
    /// Its serving certificate.
    pub pki: ServingPki,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), myownshell_auth::ServeError>>>,
}

impl MetricsServer {
    /// Serve the test metrics behind `auth`, reviewing callers with `client`.
    pub async fn start(client: kube::Client, auth: AuthOptions, client_ca_file: Option<PathBuf>) -> Self {
        let pki = ServingPki::new();
        let options = SecureServingOptions {
            tls: TlsFiles {
                cert_file: Some(pki.cert_file.clone()),
                key_file: Some(pki.key_file.clone()),
                client_ca_file,
            },
            auth,
            ..SecureServingOptions::default()
        };
        let server =
            SecureServer::bind("127.0.0.1:0".parse().unwrap(), client, metrics_router(), options).await.unwrap();
        let addr = server.local_addr().unwrap();
        let auth = server.auth();
        let shutdown = CancellationToken::new();
        let task = Some(tokio::spawn(server.run(shutdown.clone())));
        let https = Https::trusting(pki.ca_pem());
        Self { addr, auth, https, pki, shutdown, task }
    }

    /// `GET path` on this server.
    pub async fn get(&self, path: &str, token: Option<&str>) -> Reply {
        self.https.get(self.addr, path, token).await.unwrap()
    }

    /// Stop serving and check the server ended cleanly.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

// ---------------------------------------------------------------------------------------------
// RBAC

pub use myownshell_envtest::rbac::service_account_subject;

/// The RBAC subject of user `name`.
pub fn user_subject(name: &str) -> Subject {
    Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Subject::default()
    }
}

/// A ClusterRole allowing `get` on the given non-resource URLs (like `config/rbac`'s
/// `metrics-reader`), named uniquely per test.
pub async fn create_reader_role(admin: &kube::Client, name: &str, urls: &[&str]) {
    let role = myownshell_envtest::rbac::non_resource_reader_role(name, urls);
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
}

/// Bind ClusterRole `role` to `subject` (as ClusterRoleBinding `binding`).
pub async fn bind_cluster_role(admin: &kube::Client, binding: &str, role: &str, subject: Subject) {
    let binding = myownshell_envtest::rbac::cluster_role_binding(binding, role, subject);
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&PostParams::default(), &binding).await.unwrap();
}

/// Delete ClusterRoleBinding `binding`.
pub async fn delete_cluster_role_binding(admin: &kube::Client, binding: &str) {
    Api::<ClusterRoleBinding>::all(admin.clone()).delete(binding, &DeleteParams::default()).await.unwrap();
}

/// Wait until RBAC (which reads bindings from an informer) gives `allowed` for `get path`,
/// asking the apiserver directly so the proxy's caches are untouched.
pub async fn wait_for_rbac(admin: &kube::Client, user: &str, groups: &[&str], path: &str, allowed: bool) {
    let sars: Api<SubjectAccessReview> = Api::all(admin.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            non_resource_attributes: Some(NonResourceAttributes { path: Some(path.into()), verb: Some("get".into()) }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    eventually(&format!("RBAC to say allowed={allowed} for {user} get {path}"), TIMEOUT, || {
        let (sars, review) = (sars.clone(), review.clone());
        async move {
            let status = sars.create(&PostParams::default(), &review).await.map_err(|e| e.to_string())?.status;
            match status {
                Some(s) if s.allowed == allowed => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await
    .unwrap();
}
