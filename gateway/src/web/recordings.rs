//! `GET /api/recordings/{namespace}/{shell}` (the list) and
//! `GET /api/recordings/{namespace}/{shell}/{file}` (one, as `application/x-asciicast`): only for
//! callers the cluster lets `get` `myownshells/recordings` there (a SubjectAccessReview each
//! time, so a revoked grant takes effect at once).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::json;

use super::api::{Peer, peer, refused};
use crate::gateway::Gateway;
use crate::recording::access::may_read;
use crate::recording::store::Store;
use crate::signin::{self, Purpose, Refusal};

fn refusal(status: StatusCode, message: impl Into<String>) -> Response {
    refused(Refusal { status, message: message.into() })
}

/// The store, if the caller may read shell `shell`'s recordings in `namespace`.
async fn authorized<'a>(
    gw: &'a Gateway,
    info: &Peer,
    headers: &HeaderMap,
    namespace: &str,
    shell: &str,
) -> Result<&'a Store, Response> {
    let caller = signin::caller(&gw.gate(), headers, peer(info), Purpose::Read).await.map_err(refused)?;
    let Some(store) = gw.recordings.as_ref() else {
        return Err(refusal(StatusCode::NOT_FOUND, "this gateway keeps no recordings (--recordings-dir)"));
    };
    match may_read(&gw.client, &caller.user, namespace, shell).await {
        Ok(true) => Ok(store),
        Ok(false) => Err(refusal(
            StatusCode::FORBIDDEN,
            format!(
                "{} may not read the recordings of shell {namespace}/{shell} (get on myownshells/recordings)",
                caller.user.name
            ),
        )),
        Err(e) => Err(refusal(StatusCode::SERVICE_UNAVAILABLE, format!("could not ask the cluster: {e}"))),
    }
}

/// The list.
pub async fn list(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, shell)): Path<(String, String)>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let store = match authorized(&gw, &info, &headers, &namespace, &shell).await {
        Ok(store) => store,
        Err(response) => return response,
    };
    match store.list(&namespace, &shell).await {
        Ok(entries) => Json(json!({ "recordings": entries })).into_response(),
        Err(e) => refusal(StatusCode::INTERNAL_SERVER_ERROR, format!("reading the recordings: {e}")),
    }
}

/// One recording.
pub async fn download(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, shell, file)): Path<(String, String, String)>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let store = match authorized(&gw, &info, &headers, &namespace, &shell).await {
        Ok(store) => store,
        Err(response) => return response,
    };
    match store.read(&namespace, &shell, &file).await {
        Ok(Some(bytes)) => {
            let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{file}\""))
                .unwrap_or(HeaderValue::from_static("attachment"));
            let content = HeaderValue::from_static("application/x-asciicast");
            ([(header::CONTENT_TYPE, content), (header::CONTENT_DISPOSITION, disposition)], Body::from(bytes))
                .into_response()
        }
        Ok(None) => refusal(StatusCode::NOT_FOUND, format!("no recording {file} of shell {namespace}/{shell}")),
        Err(e) => refusal(StatusCode::INTERNAL_SERVER_ERROR, format!("reading the recording: {e}")),
    }
}
