//! The thin HTTP layer: read the body (bounded), hand it to [`crate::admission::review`],
//! write the answer, count it. Plus the probe endpoints.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::BytesMut;
use http_body_util::BodyExt;
use myownshell_api::names;

use crate::admission::{self, Answer, Outcome, Policy, Webhook};
use crate::metrics::Metrics;

/// Largest AdmissionReview body read. The apiserver caps objects at 3 MiB and a review holds
/// the object and the old object; anything bigger is not from the apiserver.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// An oversized body is read and thrown away up to this size, so the client gets its 400 on a
/// connection that stays usable; beyond it the connection is closed after the answer.
const DRAIN_BYTES: usize = 64 * 1024 * 1024;

/// What the admission handlers share.
#[derive(Clone)]
pub struct AppState {
    pub policy: Arc<Policy>,
    pub metrics: Arc<Metrics>,
}

fn plain(status: StatusCode, text: String) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], text).into_response()
}

/// Answer one review; the pure part is [`admission::review`].
pub fn answer(webhook: Webhook, body: &Bytes, state: &AppState, started: Instant) -> Response {
    let answer = admission::review(webhook, body, &state.policy);
    let (response, operation, result) = match answer {
        Answer::BadRequest(reason) => {
            tracing::warn!(webhook = webhook.as_str(), %reason, "rejected a malformed admission request");
            (plain(StatusCode::BAD_REQUEST, reason), "", "bad_request")
        }
        Answer::Review { review, operation, outcome } => {
            if outcome == Outcome::Invalid {
                let reason = review.response.as_ref().map(|r| r.result.message.as_str()).unwrap_or_default();
                tracing::warn!(webhook = webhook.as_str(), %reason, "denied an undecodable admission request");
            }
            match serde_json::to_vec(&review) {
                Ok(json) => (
                    (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
                        Bytes::from(json),
                    )
                        .into_response(),
                    operation,
                    outcome.as_str(),
                ),
                Err(e) => (
                    plain(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the response: {e}")),
                    operation,
                    "error",
                ),
            }
        }
    };
    state.metrics.observe(webhook.as_str(), operation, result, started.elapsed());
    response
}

/// The body, at most [`MAX_BODY_BYTES`] of it.
async fn read_body(body: Body, content_length: Option<usize>) -> Result<Bytes, String> {
    let too_large = || format!("the request body is larger than {MAX_BODY_BYTES} bytes");
    if content_length.is_some_and(|n| n <= MAX_BODY_BYTES) {
        // The common case: one bounded collect.
        return axum::body::to_bytes(body, MAX_BODY_BYTES).await.map_err(|e| {
            if std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) {
                too_large()
            } else {
                format!("cannot read the request body: {e}")
            }
        });
    }
    let mut body = body;
    let mut buf = BytesMut::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("cannot read the request body: {e}"))?;
        if let Ok(data) = frame.into_data() {
            total = total.saturating_add(data.len());
            if total <= MAX_BODY_BYTES {
                buf.extend_from_slice(&data);
            } else if total > DRAIN_BYTES {
                break;
            }
        }
    }
    if total > MAX_BODY_BYTES {
        return Err(too_large());
    }
    Ok(buf.freeze())
}

async fn handle(webhook: Webhook, state: AppState, request: axum::extract::Request) -> Response {
    let started = Instant::now();
    let content_length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    match read_body(request.into_body(), content_length).await {
        Ok(bytes) => answer(webhook, &bytes, &state, started),
        Err(reason) => {
            tracing::warn!(webhook = webhook.as_str(), %reason, "rejected a malformed admission request");
            state.metrics.observe(webhook.as_str(), "", "bad_request", started.elapsed());
            plain(StatusCode::BAD_REQUEST, reason)
        }
    }
}

async fn mutate(State(state): State<AppState>, request: axum::extract::Request) -> Response {
    handle(Webhook::Mutate, state, request).await
}

async fn validate(State(state): State<AppState>, request: axum::extract::Request) -> Response {
    handle(Webhook::Validate, state, request).await
}

/// `POST` on the two webhook paths.
pub fn webhook_router(state: AppState) -> Router {
    Router::new().route(names::MUTATE_PATH, post(mutate)).route(names::VALIDATE_PATH, post(validate)).with_state(state)
}

/// Whether the process should receive traffic; `Err` carries the reason shown by `/readyz`.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// `/healthz` (the process answers) and `/readyz` (the check passes).
pub fn probes_router(ready: ReadinessCheck) -> Router {
    Router::new().route(names::HEALTHZ_PATH, get(|| async { "ok" })).route(
        names::READYZ_PATH,
        get(move || {
            let ready = ready.clone();
            async move {
                match ready() {
                    Ok(()) => plain(StatusCode::OK, "ok".into()),
                    Err(why) => plain(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")),
                }
            }
        }),
    )
}
