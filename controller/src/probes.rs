//! `/healthz` and `/readyz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use myownshell_api::names;

/// Readiness, flipped by the manager: a leader is ready once its caches are synced, a standby
/// once it is waiting for the lease (so a rolling update of standbys never stalls).
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The probe endpoints. Liveness is the process answering at all: a controller stuck on an
/// unreachable API server must not be restarted in a loop for it.
pub fn router(readiness: Readiness) -> Router {
    Router::new()
        .route(names::HEALTHZ_PATH, get(|| async { "ok" }))
        .route(names::READYZ_PATH, get(ready))
        .with_state(readiness)
}

async fn ready(State(readiness): State<Readiness>) -> (StatusCode, &'static str) {
    if readiness.get() { (StatusCode::OK, "ok") } else { (StatusCode::SERVICE_UNAVAILABLE, "not ready") }
}
