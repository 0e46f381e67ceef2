//! An axum `Router` served over TLS behind the auth layer: what the controller and the webhook
//! use for `/metrics`, and what the standalone proxy runs with its forwarding handler.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use kube::Client;
use myownshell_runtime::server::ServeOptions;
use rustls_pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::layer::{AuthOptions, RbacAuth};
use crate::transport::{ServingTls, TlsFiles, TransportError};

/// Why the secure server could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound (e.g. the port is in use).
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The certificate, key or client CA files are unusable, or no self-signed certificate
    /// could be made.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// An I/O error on the bound listener: reading its address, or while serving.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// How the secure endpoint serves and authorizes.
#[derive(Debug, Clone)]
pub struct SecureServingOptions {
    /// Certificate files; none means a self-signed certificate.
    pub tls: TlsFiles,
    /// Extra DNS names for the self-signed certificate (e.g. the Service name).
    pub self_signed_names: Vec<String>,
    /// How often the certificate files are checked for changes.
    pub cert_reload_interval: Duration,
    /// How each request is authenticated and authorized.
    pub auth: AuthOptions,
    /// Connection limits: the request deadline, idle timeout and connection cap.
    pub serve: ServeOptions,
}

impl Default for SecureServingOptions {
    fn default() -> Self {
        Self {
            tls: TlsFiles::default(),
            self_signed_names: Vec::new(),
            cert_reload_interval: Duration::from_secs(10),
            auth: AuthOptions::default(),
            serve: ServeOptions::default(),
        }
    }
}

/// A bound, not yet running, secure server. [`SecureServer::run`] serves until shutdown.
pub struct SecureServer {
    listener: TcpListener,
    tls: ServingTls,
    auth: RbacAuth,
    app: Router,
    reload_interval: Duration,
    serve: ServeOptions,
}

impl SecureServer {
    /// Bind `addr` and prepare TLS and the auth layer around `app`. Fails on a busy port or
    /// unusable certificate files, before anything is served.
    pub async fn bind(
        addr: SocketAddr,
        client: Client,
        app: Router,
        options: SecureServingOptions,
    ) -> Result<Self, ServeError> {
        let tls = ServingTls::new(&options.tls, &options.self_signed_names)?;
        let listener = TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
        let auth = RbacAuth::new(client, options.auth);
        Ok(Self { listener, tls, auth, app, reload_interval: options.cert_reload_interval, serve: options.serve })
    }

    /// The address bound: with port 0 asked for, the port the system chose.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// The auth layer (clones share its caches and counters).
    pub fn auth(&self) -> RbacAuth {
        self.auth.clone()
    }

    /// The leaf certificate currently served (lets tests pin a self-signed certificate).
    pub fn serving_certificate(&self) -> Option<CertificateDer<'static>> {
        self.tls.resolver.leaf_der()
    }

    /// Serve until `shutdown` is cancelled, then drain in-flight requests. Denied requests are
    /// summed up in the log meanwhile ([`RbacAuth::report_denials`]).
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServeError> {
        let Self { listener, tls, auth, app, reload_interval, serve } = self;
        let addr = listener.local_addr()?;
        tracing::info!(%addr, cert_files = tls.files.is_some(), "serving with authentication and authorization");
        let config = tls.config.clone();
        let watcher = {
            let shutdown = shutdown.clone();
            async move { tls.watch_files(reload_interval, shutdown).await }
        };
        let denials = auth.report_denials(shutdown.clone());
        let serve = myownshell_runtime::server::serve_tls(listener, config, app.layer(auth.clone()), serve, shutdown);
        let (served, (), ()) = tokio::join!(serve, watcher, denials);
        Ok(served?)
    }

    /// [`SecureServer::run`] in a task of its own, as a binary serves its `/metrics` beside its
    /// main work: a failure is logged, and the task ends with `shutdown`.
    pub fn spawn(self, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            if let Err(e) = self.run(shutdown).await {
                tracing::error!(error = %e, "secure server stopped");
            }
        })
    }
}

/// Serve `metrics` (e.g. `Router::new().route("/metrics", get(handler))`) on `bind` over TLS,
/// for callers that the cluster authenticates (TokenReview, or a client certificate from
/// `options.tls.client_ca_file`) and authorizes (SubjectAccessReview: `get` on the path), until
/// `shutdown` is cancelled.
pub async fn serve_secure_metrics(
    bind: SocketAddr,
    client: Client,
    metrics: Router,
    options: SecureServingOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    SecureServer::bind(bind, client, metrics, options).await?.run(shutdown).await
}
