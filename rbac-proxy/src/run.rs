//! The standalone proxy: TLS in front of an HTTP upstream, `/healthz` on its own port.

use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::args::{Args, FlagError};
use crate::proxy::{Upstream, forward};
use myownshell_auth::secure_server::{SecureServer, ServeError};
use myownshell_runtime::client::ClientError;
use myownshell_runtime::probes::{self, BindError, Readiness};

/// Why the proxy did not start, or stopped; a bad flag is named in the message.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A flag cannot be used.
    #[error(transparent)]
    Flags(#[from] FlagError),
    /// No kube client: `--kubeconfig` unreadable or invalid, or none found locally or
    /// in-cluster.
    #[error("kube client configuration: {0}")]
    Client(#[from] ClientError),
    /// `--health-probe-bind-address` could not be bound.
    #[error(transparent)]
    HealthBind(#[from] BindError),
    /// The TLS endpoint could not start, or failed while serving.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Run the proxy until `shutdown` is cancelled.
pub async fn run(args: Args, shutdown: CancellationToken) -> Result<(), RunError> {
    let plan = args.plan()?;
    let client = args.client.client().await?;
    let app = Router::new().fallback(forward).with_state(Upstream::new(plan.upstream.clone()));
    let server = SecureServer::bind(args.secure_listen_address, client, app, plan.serving).await?;
    let health = match plan.health {
        Some(addr) => {
            let router = probes::router(Readiness::always());
            Some(probes::serve_plain("health probes", addr, router, shutdown.clone()).await?)
        }
        None => None,
    };
    tracing::info!(upstream = %args.upstream, "proxying");
    let served = server.run(shutdown.clone()).await;
    if let Some(health) = health {
        // Cancelled with the same token: it ends as the proxy does.
        let _ = health.await;
    }
    Ok(served?)
}
