//! HTTP/1.1 over TLS for an axum `Router`, with keep-alive and graceful shutdown.
//!
//! On shutdown the listener stops accepting, in-flight requests finish, and idle keep-alive
//! connections are closed, so a client such as kube-apiserver moves to another replica instead
//! of reusing a connection to a process that is going away.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls_pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests get after shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Facts about the TLS connection a request came in on, put into the request's extensions.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub remote_addr: SocketAddr,
    /// The client's certificate chain, if it presented one that the verifier accepted.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// Serve `app` on `listener` until `shutdown` is cancelled, then drain.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    loop {
        let (tcp, remote_addr) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: log and keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%remote_addr, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%remote_addr, "TLS handshake timed out");
                    return;
                }
            };
            let peer_certificates = tls.get_ref().1.peer_certificates().map(|c| Arc::new(c.to_vec()));
            let info = ConnectionInfo { remote_addr, peer_certificates };
            let service = app.map_request(move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(info.clone());
                req
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(service));
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%remote_addr, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after the drain timeout; closing them");
    }
    Ok(())
}
