//! `GET /oidc/login` and `GET /oidc/callback`: sign-in through the identity provider
//! (`signin::oidc`). The callback opens a session exactly as a pasted token does: the ID token
//! goes to TokenReview, so the user is the one the apiserver names, and is kept as the session's
//! token (asked again for each new terminal). Whatever goes wrong is said on the page in one
//! sentence (`/?sign-in-error=`), never with a token.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use secrecy::SecretString;
use serde::Deserialize;

use crate::gateway::Gateway;
use crate::signin::cookie;
use crate::signin::oidc::{CallbackError, clear_cookie};

/// What the provider sends back (RFC 6749 4.1.2 and 4.1.2.1). Each value is bounded by the
/// server's limit on a request's head.
#[derive(Debug, Deserialize)]
pub struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// How long the provider has to answer before a person is sent to it.
const REACHABLE_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);

/// `GET /oidc/login`: off to the provider (once it answers), with a new pending sign-in.
pub async fn login(State(gw): State<Arc<Gateway>>) -> Response {
    let Some(oidc) = &gw.oidc else { return super::api::not_found().await.into_response() };
    // A provider that is down is said on the page, not left to the browser's error page.
    if let Err(e) = oidc.verifier.reachable(REACHABLE_WITHIN).await {
        return back_with_error(&e.to_string());
    }
    match oidc.begin() {
        Ok((url, cookie)) => match HeaderValue::from_str(&url) {
            Ok(location) => {
                (StatusCode::SEE_OTHER, [(header::LOCATION, location), (header::SET_COOKIE, cookie)]).into_response()
            }
            Err(_) => back_with_error("the identity provider's sign-in address is not a valid URL"),
        },
        Err(e) => back_with_error(&e.to_string()),
    }
}

/// `GET /oidc/callback`: the person is back from the provider.
pub async fn callback(State(gw): State<Arc<Gateway>>, Query(back): Query<Callback>, headers: HeaderMap) -> Response {
    let Some(oidc) = &gw.oidc else { return super::api::not_found().await.into_response() };
    let sign_in = match oidc.pending(&headers, back.state.as_deref()) {
        Ok(sign_in) => sign_in,
        Err(e) => return back_with_error(&e.to_string()),
    };
    if let Some(error) = &back.error {
        let said = myownshell_auth::oidc::flow::provider_error(error, back.error_description.as_deref());
        return back_with_error(&said.to_string());
    }
    let Some(code) = back.code.as_deref().filter(|c| !c.is_empty()) else {
        return back_with_error(&CallbackError::NoCode.to_string());
    };
    let signed_in = match oidc.verifier.exchange(code, &sign_in, &oidc.redirect_url).await {
        Ok(signed_in) => signed_in,
        Err(e) => return back_with_error(&e.to_string()),
    };
    let user = match crate::signin::authenticate(&gw.tokens, &signed_in.id_token).await {
        Ok(user) => user,
        Err(refusal) if refusal.status == StatusCode::UNAUTHORIZED => {
            return back_with_error(
                "the cluster does not accept the identity provider's sign-in: its apiserver must trust the same issuer \
                 for the gateway's client id",
            );
        }
        Err(refusal) => return back_with_error(&refusal.message),
    };
    let token = SecretString::from(signed_in.id_token);
    let refresh = signed_in.refresh_token.map(SecretString::from);
    let opened = gw.sessions.open(user.clone(), Some(token), Some(signed_in.token.expiry), refresh);
    let (sealed, _session, lasts) = match opened {
        Ok(opened) => opened,
        Err(e) => return back_with_error(&e.to_string()),
    };
    let Some(set_cookie) = cookie::set(&sealed, lasts.as_secs()) else {
        return back_with_error("the session could not be kept in a cookie");
    };
    tracing::info!(user = %user.name, "signed in through the identity provider");
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, HeaderValue::from_static("/"))]).into_response();
    response.headers_mut().append(header::SET_COOKIE, set_cookie);
    response.headers_mut().append(header::SET_COOKIE, clear_cookie());
    response
}

/// Back to the page, which says `message`; the pending sign-in is over either way.
fn back_with_error(message: &str) -> Response {
    let query = form_urlencoded::Serializer::new(String::new()).append_pair("sign-in-error", message).finish();
    let location = HeaderValue::from_str(&format!("/?{query}")).unwrap_or(HeaderValue::from_static("/"));
    (StatusCode::SEE_OTHER, [(header::LOCATION, location), (header::SET_COOKIE, clear_cookie())]).into_response()
}
