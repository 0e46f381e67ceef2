//! What every route of the page's API shares: the connection a request came on (for a proxy's
//! client certificate), and a refusal in the shape the page reads.

use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use myownshell_runtime::server::ConnectionInfo;
use rustls_pki_types::CertificateDer;
use serde_json::json;

use crate::signin::Refusal;

/// The facts of the connection a request came on (its client certificate).
pub type Peer = Option<Extension<ConnectionInfo>>;

/// The verified client certificate of a request's connection, if it presented one.
pub fn peer(info: &Peer) -> Option<&CertificateDer<'static>> {
    info.as_ref()?.peer_certificates.as_ref()?.first()
}

/// A refusal as the page reads it: `{"error": "..."}` with its status.
pub fn refused(refusal: Refusal) -> Response {
    (refusal.status, Json(json!({ "error": refusal.message }))).into_response()
}
