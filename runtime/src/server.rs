//! HTTP/1.1 over TLS for an axum `Router` or any hyper service, with keep-alive and graceful shutdown.
//!
//! On shutdown the listener stops accepting, in-flight requests finish, and idle keep-alive
//! connections are closed, so a client such as kube-apiserver moves to another replica instead
//! of reusing a connection to a process that is going away. Connections that idle too long,
//! that have not started a first request by the request deadline, or whose request (head and
//! body) is still arriving at it, are closed by their [`crate::guard`]. At most
//! [`ServeOptions::max_connections`] are open at once; beyond that the listener stops accepting
//! (new connections wait in the kernel's backlog) until one closes, so memory stays bounded
//! whatever the clients do.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls_pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};
use tower::{BoxError, ServiceExt};

use crate::guard::{self, Activity, CountedIo, CountedService, GuardConfig, GuardedBody};

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`ServeOptions::max_connections`]: far above what kube-apiserver or a Prometheus
/// opens, low enough that connections each holding a request body cannot exhaust memory.
const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// How connections are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// When a connection that does nothing useful is closed, including the request deadline.
    pub guard: GuardConfig,
    /// How long open connections get to finish after shutdown starts; then they are dropped.
    pub drain_timeout: Duration,
    /// Connections open at once (TLS handshakes included; at least 1); more wait until one
    /// closes. Clients that connect and then do nothing hold their slots until the handshake
    /// timeout or the guard's idle timeout closes them, and clients trickling a request until
    /// its deadline, so the limit bounds memory, not who gets served.
    pub max_connections: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            guard: GuardConfig::default(),
            drain_timeout: Duration::from_secs(10),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The body of a request as the services given to [`serve_tls_with`] receive it: hyper's, with
/// the connection's guard told while the handler waits for it.
pub type RequestBody = GuardedBody<Incoming>;

/// A hyper service that can serve one connection from a task of its own: what
/// [`serve_tls_with`] asks of the services it is given. Implemented for every such service.
pub trait ConnectionService:
    Service<
        http::Request<RequestBody>,
        Response = http::Response<Self::ResponseBody>,
        Future: Send + 'static,
        Error: Into<BoxError>,
    > + Send
    + 'static
{
    /// The body of the service's responses.
    type ResponseBody: Body<Data: Send, Error: Into<BoxError>> + Send + 'static;
}

impl<S, B> ConnectionService for S
where
    S: Service<http::Request<RequestBody>, Response = http::Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body<Data: Send, Error: Into<BoxError>> + Send + 'static,
{
    type ResponseBody = B;
}

/// Facts about the TLS connection a request came in on, put into the request's extensions.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// The client's address.
    pub remote_addr: SocketAddr,
    /// The client's certificate chain, if it presented one that the verifier accepted.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// Serve `app` on `listener` until `shutdown` is cancelled, then drain. Each request carries
/// the [`ConnectionInfo`] of its connection in its extensions.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let make_service = move |info: ConnectionInfo| {
        let service = app.clone().map_request(move |mut req: http::Request<RequestBody>| {
            req.extensions_mut().insert(info.clone());
            req
        });
        TowerToHyperService::new(service)
    };
    serve_tls_with(listener, tls, make_service, options, shutdown).await
}

/// [`serve_tls`] for any hyper service: `make_service` builds the service of each connection
/// from its [`ConnectionInfo`]. For a server that needs neither routing nor connection facts
/// (the admission webhook), this skips both.
pub async fn serve_tls_with<M, S>(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    make_service: M,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    M: Fn(ConnectionInfo) -> S + Send + Sync + 'static,
    S: ConnectionService,
{
    let acceptor = TlsAcceptor::from(tls);
    let make_service = Arc::new(make_service);
    let connections = TaskTracker::new();
    // Cancelled when draining takes too long: every connection still open is dropped.
    let give_up = CancellationToken::new();
    let slots = Arc::new(Semaphore::new(options.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let mut full = false;
    loop {
        // A free slot first, then a connection: while every slot is taken nothing is accepted.
        let now_full = slots.available_permits() == 0;
        if now_full && !full {
            tracing::warn!(
                max_connections = options.max_connections,
                "every connection slot is taken; new connections wait until one closes"
            );
        }
        full = now_full;
        let next = async { (slots.clone().acquire_owned().await, listener.accept().await) };
        let (slot, accepted) = tokio::select! {
            _ = shutdown.cancelled() => break,
            next = next => next,
        };
        let Ok(slot) = slot else { break }; // the semaphore is never closed
        let (tcp, remote_addr) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: log and keep serving.
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let serve = connection(
            tcp,
            remote_addr,
            acceptor.clone(),
            make_service.clone(),
            options.guard,
            connections.clone(),
            shutdown.clone(),
        );
        let give_up = give_up.clone();
        connections.spawn(async move {
            let _slot = slot;
            tokio::select! {
                () = give_up.cancelled() => {}
                () = serve => {}
            }
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(options.drain_timeout, connections.wait()).await.is_err() {
        tracing::warn!("connections still open after the drain timeout; closing them");
        give_up.cancel();
        connections.wait().await;
    }
    Ok(())
}

/// One connection: TLS handshake, then HTTP/1.1 in a task of its own, watched by its guard,
/// drained gracefully on `shutdown`. Dropping this future drops the connection.
async fn connection<M, S>(
    tcp: TcpStream,
    remote_addr: SocketAddr,
    acceptor: TlsAcceptor,
    make_service: Arc<M>,
    guard: GuardConfig,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) where
    M: Fn(ConnectionInfo) -> S + Send + Sync + 'static,
    S: ConnectionService,
{
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
    let activity = Arc::new(Activity::default());
    let service =
        CountedService::new(make_service(ConnectionInfo { remote_addr, peer_certificates }), activity.clone());
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(CountedIo::new(tls, activity.clone())), service)
        // A handler may take the connection over (the gateway's WebSockets, with
        // `hyper::upgrade::on`); the connection's task and slot then end, and the handler owns
        // the socket, its limits and its shutdown.
        .with_upgrades();
    // The connection runs in its own task, which polls nothing but the connection and a one-shot
    // drain signal; this future stays as its guard, relays shutdown, and aborts it when dropped.
    let (drain, drained) = oneshot::channel::<()>();
    let mut served = AbortOnDropHandle::new(tracker.spawn(async move {
        let mut conn = std::pin::pin!(conn);
        let mut drained = drained;
        let result = tokio::select! {
            biased;
            result = conn.as_mut() => result,
            _ = &mut drained => {
                // Finish the request in flight, if any, then close.
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = result {
            tracing::debug!(%remote_addr, error = %e, "connection ended with an error");
        }
    }));
    // One guard watches the connection until it ends, through the drain as before it.
    let mut watching = std::pin::pin!(guard::watch(activity, guard, &mut served));
    let verdict = tokio::select! {
        verdict = watching.as_mut() => verdict,
        () = shutdown.cancelled() => {
            // Draining: the connection finishes what it is answering and closes.
            let _ = drain.send(());
            watching.await
        }
    };
    if let Some(verdict) = verdict {
        tracing::debug!(%remote_addr, ?verdict, "closing a connection that does nothing useful");
    }
}
