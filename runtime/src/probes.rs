//! `/healthz` and `/readyz` on a plain-HTTP port of their own (`--health-probe-bind-address`),
//! so kubelet probes need neither TLS nor a token.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What `/readyz` answers: ready, or not ready and why.
#[derive(Clone)]
pub struct Readiness(Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl Readiness {
    /// Ready whenever `check` says so; its `Err` is shown by `/readyz`.
    pub fn from_check(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(check))
    }

    /// Always ready (a process that is useful as soon as it answers).
    pub fn always() -> Self {
        Self::from_check(|| Ok(()))
    }

    /// Ready while `flag` is set; `why` is shown while it is not.
    pub fn from_flag(flag: ReadyFlag, why: &'static str) -> Self {
        Self::from_check(move || if flag.get() { Ok(()) } else { Err(why.to_owned()) })
    }

    fn check(&self) -> Result<(), String> {
        (self.0)()
    }
}

/// A readiness switch flipped by the process as it comes up (and goes down).
#[derive(Clone, Default)]
pub struct ReadyFlag(Arc<AtomicBool>);

impl ReadyFlag {
    /// Set whether the process is ready.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// Whether the process is ready.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The probe endpoints. Liveness is the process answering at all: a process stuck on an
/// unreachable API server must not be restarted in a loop for it.
pub fn router(readiness: Readiness) -> Router {
    Router::new().route(crate::paths::HEALTHZ, get(|| async { "ok" })).route(
        crate::paths::READYZ,
        get(move || {
            let readiness = readiness.clone();
            async move {
                match readiness.check() {
                    Ok(()) => (StatusCode::OK, "ok".to_owned()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")),
                }
            }
        }),
    )
}

/// A listen address that could not be had.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for {what}: {source}")]
pub struct BindError {
    /// What was to be served there.
    pub what: &'static str,
    /// The address.
    pub addr: SocketAddr,
    /// Why binding failed.
    #[source]
    pub source: std::io::Error,
}

/// Serve `router` over plain HTTP on `addr` until `stop` is cancelled. Binding happens before
/// this returns, so a taken port is an error at start-up, not a log line later.
pub async fn serve_plain(
    what: &'static str,
    addr: SocketAddr,
    router: Router,
    stop: CancellationToken,
) -> Result<JoinHandle<()>, BindError> {
    let listener = TcpListener::bind(addr).await.map_err(|source| BindError { what, addr, source })?;
    let local = listener.local_addr().unwrap_or(addr);
    tracing::info!(%local, "serving {what}");
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await {
            tracing::warn!(error = %e, "{what} server stopped");
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_sources() {
        assert_eq!(Readiness::always().check(), Ok(()));
        let flag = ReadyFlag::default();
        let readiness = Readiness::from_flag(flag.clone(), "caches not synced");
        assert_eq!(readiness.check(), Err("caches not synced".to_owned()));
        flag.set(true);
        assert_eq!(readiness.check(), Ok(()));
    }
}
