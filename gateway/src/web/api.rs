//! The page's JSON API: sign in, who am I, sign out, the shells a user can see, and extending
//! one's shell.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{ListParams, ObjectList, Patch, PatchParams};
use kube::core::Request;
use myownshell_api::MyOwnShell;
use myownshell_auth::token::jwt_expiry;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::shells::api_refusal;
use super::shells::row::{ShellRow, row};
use crate::signin::signed_out::RECORD_WITHIN;

use crate::exec::as_user::AsUser;
use crate::gateway::Gateway;
use crate::signin::{self, Caller, Purpose, Refusal, cookie};

pub use super::reply::{Peer, peer, refused};

/// The body of a sign-in.
#[derive(Deserialize)]
pub struct SignIn {
    token: String,
}

fn whoami(caller: &Caller) -> serde_json::Value {
    json!({
        "user": caller.user.name,
        "groups": caller.user.groups,
        "csrf": caller.session.as_ref().map(|s| s.csrf.clone()),
    })
}

/// `POST /api/session`: sign in with a token the cluster authenticates.
pub async fn sign_in(State(gw): State<Arc<Gateway>>, headers: HeaderMap, Json(body): Json<SignIn>) -> Response {
    // Only the page signs in: another site cannot sign a browser in as someone else.
    if !signin::from_own_page(&gw.origins, &headers) {
        return refused(Refusal { status: StatusCode::FORBIDDEN, message: "sign in from the gateway's page".into() });
    }
    let token = body.token.trim();
    let user = match signin::authenticate(&gw.tokens, token).await {
        Ok(user) => user,
        Err(refusal) => return refused(refusal),
    };
    let expiry = jwt_expiry(token);
    let token = SecretString::from(token.to_owned());
    let (sealed, session, lasts) = match gw.sessions.open(user.clone(), Some(token), expiry, None) {
        Ok(opened) => opened,
        Err(e) => return refused(Refusal { status: StatusCode::SERVICE_UNAVAILABLE, message: e.to_string() }),
    };
    tracing::info!(user = %user.name, "signed in");
    let Some(set_cookie) = cookie::set(&sealed, lasts.as_secs()) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let caller = Caller { user, session: Some(session), token: None };
    ([(header::SET_COOKIE, set_cookie)], Json(whoami(&caller))).into_response()
}

/// `GET /api/session`: who is signed in, and the CSRF token for the page's requests.
/// Refused, it also says where to sign in through the identity provider, when there is one.
pub async fn session(State(gw): State<Arc<Gateway>>, info: Peer, headers: HeaderMap) -> Response {
    match signin::caller(&gw.gate(), &headers, peer(&info), Purpose::Read).await {
        // A sign-in through the identity provider may have been renewed: the cookie carries its
        // latest tokens, so that another replica takes it up with them.
        Ok(caller) => {
            let renewable = caller.session.as_ref().filter(|session| session.refresh.is_some());
            let set_cookie = renewable
                .and_then(|session| gw.sessions.seal(session).ok())
                .and_then(|(sealed, lasts)| cookie::set(&sealed, lasts.as_secs()));
            match set_cookie {
                Some(set_cookie) => ([(header::SET_COOKIE, set_cookie)], Json(whoami(&caller))).into_response(),
                None => Json(whoami(&caller)).into_response(),
            }
        }
        Err(refusal) if gw.oidc.is_some() => {
            (refusal.status, Json(json!({ "error": refusal.message, "signIn": crate::signin::oidc::LOGIN_PATH })))
                .into_response()
        }
        Err(refusal) => refused(refusal),
    }
}

/// `DELETE /api/session`: sign out (the page's terminals keep running until their grace ends).
pub async fn sign_out(State(gw): State<Arc<Gateway>>, info: Peer, headers: HeaderMap) -> Response {
    match signin::caller(&gw.gate(), &headers, peer(&info), Purpose::Change).await {
        Ok(Caller { session: Some(session), .. }) => {
            let until = gw.sessions.ends(&session.id);
            gw.sessions.close(&session.id);
            // Everywhere: the other replicas learn it from the shared record before this answer.
            if let Some(record) = &gw.signed_out {
                let until = until.unwrap_or_else(|| std::time::SystemTime::now() + gw.sessions.max_age());
                let written = tokio::time::timeout(RECORD_WITHIN, record.record(&session.id, until)).await;
                if let Err(e) = written.map_err(|_| "timed out".to_owned()).and_then(|w| w) {
                    tracing::warn!(user = %session.user.name, error = %e, "the sign-out could not be recorded for the other replicas");
                }
            }
            // Ended everywhere: no copy of the cookie renews the sign-in again.
            if let (Some(oidc), Some(refresh)) = (&gw.oidc, &session.refresh)
                && let Err(e) = oidc.verifier.revoke(refresh.expose_secret()).await
            {
                tracing::warn!(user = %session.user.name, error = %e, "the refresh token could not be revoked");
            }
            ([(header::SET_COOKIE, cookie::clear())], StatusCode::NO_CONTENT).into_response()
        }
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refused(refusal),
    }
}

/// The query of `GET /api/shells`.
#[derive(Deserialize)]
pub struct ShellsQuery {
    #[serde(default)]
    namespace: String,
}

/// `GET /api/shells?namespace=NS`: the shells of `NS`, or of every namespace the user may list
/// shells in when none is given (`shells::places`), read as the user.
pub async fn shells(
    State(gw): State<Arc<Gateway>>,
    info: Peer,
    headers: HeaderMap,
    Query(q): Query<ShellsQuery>,
) -> Response {
    let as_user = match super::shells::acting(&gw, &headers, &info, Purpose::Read).await {
        Ok(as_user) => as_user,
        Err(refusal) => return refused(refusal),
    };
    let namespaces = match super::shells::places::named_or_all(&gw, &as_user, &q.namespace).await {
        Ok(namespaces) => namespaces,
        Err(refusal) => return refused(refusal),
    };
    let mut rows = Vec::new();
    for namespace in namespaces {
        match shells_of(&as_user, &namespace).await {
            Ok(mut of) => rows.append(&mut of),
            Err(refusal) => return refused(refusal),
        }
    }
    Json(json!({ "shells": rows })).into_response()
}

async fn shells_of(as_user: &AsUser, namespace: &str) -> Result<Vec<ShellRow>, Refusal> {
    let list = Request::new(MyOwnShell::url_path(&(), Some(namespace)))
        .list(&ListParams::default())
        .map_err(super::shells::bad_request)?;
    let list = as_user.request::<ObjectList<MyOwnShell>>(list).await.map_err(api_refusal)?;
    Ok(list.items.iter().map(row).collect())
}

/// Anything else: 404 in the API's shape.
pub async fn not_found() -> Response<Body> {
    refused(Refusal { status: StatusCode::NOT_FOUND, message: "no such page".into() })
}

/// `POST /api/shells/{namespace}/{name}/extend`: no lifetime stop for another idle timeout (or
/// an hour), as `kubectl myownshell extend` does, written **as the user**: only someone who may
/// change the shell's spec (its owner, an administrator) can.
pub async fn extend(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, name)): Path<(String, String)>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let as_user = match super::shells::acting(&gw, &headers, &info, Purpose::Change).await {
        Ok(as_user) => as_user,
        Err(refusal) => return refused(refusal),
    };
    let extended = match super::shells::target(&namespace, &name) {
        Ok((namespace, name)) => extend_as(&as_user, namespace, name).await,
        Err(refusal) => Err(refusal),
    };
    match extended {
        Ok(until) => Json(json!({ "extendedUntil": until })).into_response(),
        Err(refusal) => refused(refusal),
    }
}

async fn extend_as(as_user: &AsUser, namespace: &str, name: &str) -> Result<Time, Refusal> {
    let shells = Request::new(MyOwnShell::url_path(&(), Some(namespace)));
    let bad = |e: kube::core::request::Error| Refusal { status: StatusCode::BAD_REQUEST, message: e.to_string() };
    let shell: MyOwnShell =
        as_user.request(shells.get(name, &Default::default()).map_err(bad)?).await.map_err(api_refusal)?;
    let by = myownshell_api::lifecycle::idle_timeout(&shell)
        .and_then(|t| myownshell_runtime::time::parse_duration(t).ok())
        .unwrap_or(myownshell_api::lifecycle::DEFAULT_EXTENSION);
    let until = myownshell_runtime::time::to_second(myownshell_runtime::time::plus(Timestamp::now(), by));
    let patch = myownshell_api::lifecycle::extend_patch(&until);
    let request = shells.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).map_err(bad)?;
    as_user.request::<MyOwnShell>(request).await.map_err(api_refusal)?;
    Ok(until)
}

/// `POST /api/shells/{namespace}/{name}/approve`: the caller's approval of someone's shell,
/// added as the caller (the webhook records who and when, and refuses whoever may not).
pub async fn approve(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, name)): Path<(String, String)>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let as_user = match super::shells::acting(&gw, &headers, &info, Purpose::Change).await {
        Ok(as_user) => as_user,
        Err(refusal) => return refused(refusal),
    };
    let approved = match super::shells::target(&namespace, &name) {
        Ok((namespace, name)) => approve_as(&as_user, namespace, name).await,
        Err(refusal) => Err(refusal),
    };
    match approved {
        Ok(shell) => Json(json!({ "shell": row(&shell) })).into_response(),
        Err(refusal) => refused(refusal),
    }
}

async fn approve_as(as_user: &AsUser, namespace: &str, name: &str) -> Result<MyOwnShell, Refusal> {
    let shells = Request::new(MyOwnShell::url_path(&(), Some(namespace)));
    let bad = |e: kube::core::request::Error| Refusal { status: StatusCode::BAD_REQUEST, message: e.to_string() };
    let shell: MyOwnShell =
        as_user.request(shells.get(name, &Default::default()).map_err(bad)?).await.map_err(api_refusal)?;
    let entry = serde_json::to_value(myownshell_api::Approval::default()).unwrap_or_default();
    let patch = match shell.spec.approvals {
        Some(_) => json!([{"op": "add", "path": "/spec/approvals/-", "value": entry}]),
        None => json!([{"op": "add", "path": "/spec/approvals", "value": [entry]}]),
    };
    let patch = serde_json::from_value(patch)
        .map_err(|e| Refusal { status: StatusCode::INTERNAL_SERVER_ERROR, message: e.to_string() })?;
    let request = shells.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch)).map_err(bad)?;
    as_user.request::<MyOwnShell>(request).await.map_err(api_refusal)
}
