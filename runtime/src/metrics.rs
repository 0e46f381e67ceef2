//! `GET /metrics`: a prometheus-client registry in the OpenMetrics text format. Each binary
//! serves it behind the rbac-proxy layer (TokenReview + SubjectAccessReview) over TLS.

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;

/// The registry's metrics as OpenMetrics text.
pub fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

/// The `/metrics` route over `registry`.
pub fn router(registry: Arc<Registry>) -> Router {
    Router::new().route(crate::paths::METRICS, get(move || std::future::ready(answer(&registry))))
}

fn answer(registry: &Registry) -> Response {
    match encode(registry) {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            text,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding metrics failed").into_response(),
    }
}
