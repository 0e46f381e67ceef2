//! `/healthz` on its own plain-HTTP port (`--health-probe-bind-address`), so kubelet probes
//! need neither TLS nor a token.

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The probe routes.
pub fn router() -> Router {
    Router::new().route("/healthz", get(|| async { "ok\n" })).route("/readyz", get(|| async { "ok\n" }))
}

/// Serve the probes on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, shutdown: CancellationToken) -> std::io::Result<()> {
    axum::serve(listener, router()).with_graceful_shutdown(shutdown.cancelled_owned()).await
}
