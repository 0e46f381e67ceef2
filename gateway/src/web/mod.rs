//! The HTTP side: the routes (`router`), the page's files (`page`), its JSON API (`api`), what
//! every API route answers with (`reply`), the terminal's WebSocket (`socket`, over the handshake
//! of `upgrade`, its control messages read by `control`), a terminal's opening (`opening`), a
//! shell's held sessions (`sessions`), the shells the page lists, creates, starts, stops and
//! deletes (`shells`), the recordings' list and downloads (`recordings`), sign-in through an
//! identity provider (`oidc`), and the `Origin` rule (`origin`). Every answer carries headers
//! that keep the page from being framed, sniffed or
//! given scripts from anywhere else.
//!
//! Must not: open a terminal for a caller `signin` did not authenticate, or serve a file that
//! is not one of the page's.

pub mod api;
pub mod body;
pub mod control;
pub mod handover;
pub mod oidc;
pub mod opening;
pub mod origin;
pub mod page;
pub mod query;
pub mod recordings;
pub mod reply;
pub mod sessions;
pub mod shells;
pub mod socket;
pub mod upgrade;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderValue, Method, header};

use crate::gateway::Gateway;

/// What every answer carries: scripts, styles and connections from the page's own origin only
/// (xterm.js sets inline styles, hence `style-src 'unsafe-inline'`), no framing, no sniffing,
/// no referrer, and nothing cached but the page's files.
fn harden(response: &mut Response, is_api: bool) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static("max-age=31536000"));
    if is_api {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

async fn hardened(request: Request, next: Next) -> Response {
    let is_api = request.uri().path().starts_with("/api/") || request.uri().path().starts_with("/oidc/");
    let mut response = next.run(request).await;
    harden(&mut response, is_api);
    response
}

async fn file(State(gw): State<Arc<Gateway>>, method: Method, request: Request) -> Response {
    match (method, gw.assets.get(request.uri().path())) {
        (Method::GET | Method::HEAD, Some(file)) => file,
        _ => api::not_found().await.into_response(),
    }
}

pub use body::MAX_BODY_BYTES;

/// Every route of the gateway.
pub fn router(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/api/session", get(api::session).post(api::sign_in).delete(api::sign_out))
        .route(crate::signin::oidc::LOGIN_PATH, get(oidc::login))
        .route(crate::signin::oidc::CALLBACK_PATH, get(oidc::callback))
        .route("/api/places", get(shells::places::list))
        .route("/api/classes", get(shells::classes::list))
        .route("/api/shells", get(api::shells))
        .route("/api/shells/live", get(shells::live::live))
        .route("/api/shells/{namespace}", post(shells::manage::create))
        .route("/api/shells/{namespace}/{shell}", axum::routing::delete(shells::manage::delete))
        .route("/api/shells/{namespace}/{shell}/start", post(shells::manage::start))
        .route("/api/shells/{namespace}/{shell}/stop", post(shells::manage::stop))
        .route("/api/shells/{namespace}/{shell}/extend", post(api::extend))
        .route("/api/shells/{namespace}/{shell}/approve", post(api::approve))
        .route("/api/terminal/{namespace}/{shell}", get(socket::terminal))
        .route("/api/sessions/{namespace}/{shell}", get(sessions::list))
        .route("/api/recordings/{namespace}/{shell}", get(recordings::list))
        .route("/api/recordings/{namespace}/{shell}/{file}", get(recordings::download))
        .fallback(file)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(body::bounded))
        .layer(middleware::from_fn(hardened))
        .with_state(gw)
}
