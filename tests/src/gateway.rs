//! `myownshell-gateway` as a process for tests, serving a certificate of a throwaway CA, and the
//! clients that talk to it as a page does: JSON requests with the session cookie, and the
//! terminal's WebSocket.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use http_body_util::{BodyExt, Full};
use myownshell_envtest::assets::workspace_binary;
use myownshell_envtest::control_plane::ControlPlane;
use myownshell_envtest::http::plain_get;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::tls::{LoopbackTls, loopback};
use myownshell_envtest::wait::eventually;

use crate::events::EventStream;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The binary.
pub const BINARY: &str = "myownshell-gateway";

/// A running gateway, killed when dropped.
pub struct GatewayProcess {
    process: ManagedProcess,
    /// Where it serves (HTTPS).
    pub addr: SocketAddr,
    probe: SocketAddr,
    tls: LoopbackTls,
    client: Arc<rustls::ClientConfig>,
    _certs: tempfile::TempDir,
    /// Its log.
    pub log: PathBuf,
}

impl GatewayProcess {
    /// Start it against `cp` with the credentials of `kubeconfig`, `--assets-dir` from
    /// `MYOWNSHELL_GATEWAY_ASSETS` and `extra` flags; wait until it is ready.
    pub async fn start(cp: &ControlPlane, kubeconfig: PathBuf, name: &str, extra: &[&str]) -> Result<Self, String> {
        let port = free_port().map_err(|e| e.to_string())?;
        Self::start_on(cp, kubeconfig, name, port, extra).await
    }

    /// [`Self::start`] on `port` (known before, e.g. for an identity provider's redirect URI).
    pub async fn start_on(
        cp: &ControlPlane,
        kubeconfig: PathBuf,
        name: &str,
        port: u16,
        extra: &[&str],
    ) -> Result<Self, String> {
        Self::start_with(cp, kubeconfig, name, (port, extra), &[]).await
    }

    /// [`Self::start_on`] with `env` set too (`POD_NAMESPACE`: the namespace a replica takes as
    /// its own, for the session key and the record of sign-outs).
    pub async fn start_with(
        cp: &ControlPlane,
        kubeconfig: PathBuf,
        name: &str,
        (port, extra): (u16, &[&str]),
        env: &[(&str, &str)],
    ) -> Result<Self, String> {
        let assets = myownshell_envtest::web::locate()?;
        let binary = workspace_binary(BINARY)?;
        let tls = loopback(name)?;
        let certs = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (cert, key) = (certs.path().join("tls.crt"), certs.path().join("tls.key"));
        std::fs::write(&cert, &tls.leaf.cert_pem).map_err(|e| e.to_string())?;
        std::fs::write(&key, &tls.leaf.key_pem).map_err(|e| e.to_string())?;
        let probe_port = free_port().map_err(|e| e.to_string())?;
        let log = cp.layout().dir.join(format!("{name}.log"));
        let spec = ProcessSpec::new(name, binary, log.clone())
            .args([
                format!("--bind-address=127.0.0.1:{port}"),
                format!("--health-probe-bind-address=127.0.0.1:{probe_port}"),
                format!("--tls-cert-file={}", cert.display()),
                format!("--tls-private-key-file={}", key.display()),
                format!("--assets-dir={}", assets.display()),
            ])
            .args(extra.iter().map(|s| (*s).to_owned()))
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()));
        let spec = env.iter().fold(spec, |spec, (key, value)| spec.env(*key, *value));
        let process = ManagedProcess::spawn(spec).map_err(|e| format!("starting {BINARY}: {e}"))?;
        let gateway = Self {
            process,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            probe: SocketAddr::from(([127, 0, 0, 1], probe_port)),
            client: tls.client.clone(),
            tls,
            _certs: certs,
            log,
        };
        gateway.wait_ready().await?;
        Ok(gateway)
    }

    async fn wait_ready(&self) -> Result<(), String> {
        eventually("the gateway ready", Duration::from_secs(30), || async {
            match plain_get(self.probe, "/readyz").await {
                Ok((200, _)) => Ok(()),
                Ok((code, body)) => Err(format!("HTTP {code}: {body}")),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| format!("{e}\n{}", self.process.log_tail(20)))
    }

    /// The page's origin, `https://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Its log so far.
    pub fn log_tail(&self) -> String {
        self.process.log_tail(40)
    }

    /// A TLS client that trusts the gateway and presents `identity` (certificate and key, PEM),
    /// as an authenticating proxy in front of it would.
    pub fn client_with_certificate(&self, identity: (&str, &str)) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.tls.ca.cert_pem().as_bytes()) {
            roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        }
        let chain = CertificateDer::pem_slice_iter(identity.0.as_bytes()).collect::<Result<Vec<_>, _>>();
        let key = PrivateKeyDer::from_pem_slice(identity.1.as_bytes()).map_err(|e| e.to_string())?;
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_client_auth_cert(chain.map_err(|e| e.to_string())?, key)
                .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Use `client` (e.g. [`Self::client_with_certificate`]) for the requests that follow.
    pub fn use_client(&mut self, client: Arc<rustls::ClientConfig>) {
        self.client = client;
    }

    /// Send it SIGTERM, as the kubelet does to a stopping pod.
    pub fn terminate(&mut self) -> Result<(), String> {
        self.process.terminate().map_err(|e| format!("SIGTERM to the gateway: {e}"))
    }

    /// Its readiness probe's answer (`/readyz` on the probes address).
    pub async fn readyz(&self) -> Result<u16, String> {
        myownshell_envtest::http::plain_get(self.probe, "/readyz").await.map(|(code, _)| code)
    }

    /// Whether the process is still running (it has not panicked or exited).
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// A client of it, as a page is (its certificate trusted, or the one given last with
    /// [`Self::use_client`]).
    pub fn page(&self) -> GatewayClient {
        GatewayClient { addr: self.addr, tls: self.client.clone() }
    }

    /// A new TLS connection to it, nothing sent.
    pub async fn connect(&self) -> Result<TlsStream<TcpStream>, String> {
        self.page().connect().await
    }

    /// One request on a new connection: `(status, headers, body)`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<serde_json::Value>,
    ) -> Result<(u16, HeaderMap, String), String> {
        self.page().request(method, path, headers, body).await
    }

    /// The terminal's WebSocket at `path` with these extra headers; `Err` carries the HTTP
    /// status and body of a refused handshake.
    pub async fn websocket(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<WebSocketStream<TlsStream<TcpStream>>, String> {
        self.page().websocket(path, headers).await
    }

    /// The CA its certificate chains to (PEM), for clients that read files.
    pub fn ca_pem(&self) -> String {
        self.tls.ca.cert_pem().to_owned()
    }
}

/// A client of a gateway as a page is: requests and the terminal's WebSocket over TLS, each on a
/// connection of its own. `addr` may be any way to the gateway: a process on loopback, or the
/// deployed gateway's Service address on the real node.
#[derive(Clone)]
pub struct GatewayClient {
    /// Where it serves.
    pub addr: SocketAddr,
    /// The TLS client (it trusts the gateway's certificate, or accepts any).
    pub tls: Arc<rustls::ClientConfig>,
}

impl GatewayClient {
    /// A new TLS connection to it, nothing sent.
    pub async fn connect(&self) -> Result<TlsStream<TcpStream>, String> {
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let tcp = TcpStream::connect(self.addr).await.map_err(|e| format!("connecting to {}: {e}", self.addr))?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        connector.connect(name, tcp).await.map_err(|e| format!("TLS handshake: {e}"))
    }

    /// The page's origin, `https://ADDR`.
    pub fn origin(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// One request on a new connection: `(status, headers, body)`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<serde_json::Value>,
    ) -> Result<(u16, HeaderMap, String), String> {
        let tls = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(conn);
        let mut request = http::Request::builder().method(method).uri(path).header("host", self.addr.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let body = Full::new(Bytes::from(body.map(|b| b.to_string()).unwrap_or_default()));
        let response =
            sender.send_request(request.body(body).map_err(|e| e.to_string())?).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((parts.status.as_u16(), parts.headers, String::from_utf8_lossy(&body).into_owned()))
    }

    /// A GET whose answer is a stream of server-sent events: its status, and the stream (the
    /// body of a refusal is in the stream too).
    pub async fn events(&self, path: &str, headers: &[(&str, &str)]) -> Result<(u16, EventStream), String> {
        let tls = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(conn);
        let mut request = http::Request::builder().uri(path).header("host", self.addr.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request = request.header("accept", "text/event-stream");
        let request = request.body(Full::new(Bytes::new())).map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        Ok((status, EventStream::new(response.into_body(), sender)))
    }

    /// The terminal's WebSocket at `path` with these extra headers; `Err` carries the HTTP
    /// status and body of a refused handshake.
    pub async fn websocket(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<WebSocketStream<TlsStream<TcpStream>>, String> {
        let tls = self.connect().await?;
        let mut request = format!("wss://{}{path}", self.addr).into_client_request().map_err(|e| e.to_string())?;
        for (name, value) in headers {
            let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
            request
                .headers_mut()
                .insert(http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?, value);
        }
        match tokio_tungstenite::client_async(request, tls).await {
            Ok((socket, _)) => Ok(socket),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                let body =
                    response.body().as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
                Err(format!("HTTP {}: {body}", response.status().as_u16()))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Sign in with `token` from the page: the session cookie and the CSRF token.
    pub async fn sign_in(&self, token: &str) -> Result<(String, String), String> {
        let origin = self.origin();
        let body = Some(serde_json::json!({ "token": token }));
        let (status, headers, body) = self.request(Method::POST, "/api/session", &[("origin", &origin)], body).await?;
        if status != 200 {
            return Err(format!("sign-in: {status}: {body}"));
        }
        let answer: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        let cookie = session_cookie(&headers).ok_or("no session cookie")?;
        Ok((cookie, answer["csrf"].as_str().unwrap_or_default().to_owned()))
    }
}

/// The session cookie a sign-in answer set (`name=value`, to send back as `Cookie`).
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("__Host-myownshell-session="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}
