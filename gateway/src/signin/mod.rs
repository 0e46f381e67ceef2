//! Who is asking: an authenticating proxy's user (its client certificate and `X-Remote-*`
//! headers, `myownshell_auth::request_header`), a bearer token the apiserver authenticates (TokenReview, cached as
//! the metrics proxy caches it), or the session cookie of a browser that signed in with one.
//!
//! Requests that carry the cookie must also come from the gateway's own page (`Origin`, see
//! `web::origin`), and those that change something must carry the session's CSRF token. A
//! proxy's requests carry the proxy's own ambient credential, so they too must come from the
//! page to open a terminal or change something (the proxy's cookie is the proxy's to guard).
//! Bearer-token requests need no CSRF token, but one that carries an `Origin` must come from the
//! page to open a terminal or change something: a proxy in front may add the bearer itself from
//! its own cookie (oauth2-proxy's `--pass-authorization-header`), which makes it as ambient as
//! ours, and a browser always sends `Origin` on a cross-origin POST and a WebSocket handshake. A
//! client that is no browser (the plugin, curl) sends none, and goes on as before.
//!
//! Must not: accept anything the cluster did not authenticate, keep a token anywhere but in
//! memory, or write one to a log, a URL or a page.

pub mod cookie;
pub mod key;
pub mod oidc;
pub mod oidc_args;
pub mod refresh;
mod refusal;
pub mod seal;
pub mod sessions;
pub mod signed_out;

use std::sync::Arc;

use http::{HeaderMap, StatusCode, header};
use myownshell_auth::AuthenticatedUser;
use myownshell_auth::authn::TokenAuthenticator;
use myownshell_auth::token::{BearerToken, bearer_token};
use secrecy::ExposeSecret;

use rustls_pki_types::CertificateDer;

pub use self::refusal::{Refusal, authenticate};
use self::sessions::{Session, Sessions};
use crate::ids;
use crate::web::origin::AllowedOrigins;
use myownshell_auth::request_header::{FrontProxy, Vouched};

/// Who asks, and how they proved it.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The user, as the cluster authenticated them.
    pub user: AuthenticatedUser,
    /// The browser session, when the cookie proved it.
    pub session: Option<Arc<Session>>,
    /// The token the user proved themselves with (a bearer token, or the one the session was
    /// opened with); none for an authenticating proxy's users.
    pub token: Option<secrecy::SecretString>,
}

/// What a request is about to do, for the checks it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Read something: the cookie alone will do.
    Read,
    /// Change something: with the cookie, also the page's `Origin` and the CSRF token.
    Change,
    /// Open or reattach a terminal (a WebSocket, which CORS does not cover): with the cookie,
    /// also the page's `Origin`; the token it signed in with is authenticated again.
    Terminal,
}

/// The pieces [`caller`] needs.
pub struct Gate<'a> {
    /// TokenReview, cached.
    pub tokens: &'a TokenAuthenticator,
    /// The signed-in browsers.
    pub sessions: &'a Sessions,
    /// Where the page may be served from.
    pub origins: &'a AllowedOrigins,
    /// The authenticating proxy in front, if one is configured.
    pub front_proxy: Option<&'a FrontProxy>,
    /// Sign-in through the identity provider, if configured: its sessions are renewed here.
    pub oidc: Option<&'a oidc::OidcSignIn>,
}

/// Who sent a request with these headers, on a connection that presented `certificate` (already
/// verified against `--client-ca-file`), for `purpose`.
pub async fn caller(
    gate: &Gate<'_>,
    headers: &HeaderMap,
    certificate: Option<&CertificateDer<'_>>,
    purpose: Purpose,
) -> Result<Caller, Refusal> {
    match gate.front_proxy.map_or(Vouched::No, |proxy| proxy.vouched(certificate, headers)) {
        Vouched::User(user) => {
            if purpose != Purpose::Read && !from_own_page(gate.origins, headers) {
                return Err(Refusal::new(StatusCode::FORBIDDEN, "this request did not come from the gateway's page"));
            }
            return Ok(Caller { user, session: None, token: None });
        }
        Vouched::Refused(why) => return Err(Refusal::new(StatusCode::UNAUTHORIZED, why)),
        Vouched::No => {}
    }
    match bearer_token(headers) {
        BearerToken::Present(token) => {
            if !bearer_from_page_or_no_browser(gate.origins, headers, purpose) {
                return Err(Refusal::new(StatusCode::FORBIDDEN, "this request did not come from the gateway's page"));
            }
            let user = authenticate(gate.tokens, token).await?;
            return Ok(Caller { user, session: None, token: Some(secrecy::SecretString::from(token.to_owned())) });
        }
        BearerToken::Malformed => {
            return Err(Refusal::new(StatusCode::UNAUTHORIZED, "the Authorization header is not `Bearer <token>`"));
        }
        BearerToken::Missing => {}
    }
    let id = cookie::read(headers).ok_or_else(|| Refusal::new(StatusCode::UNAUTHORIZED, "not signed in"))?;
    let mut session = gate
        .sessions
        .get(id)
        .ok_or_else(|| Refusal::new(StatusCode::UNAUTHORIZED, "your session has ended; sign in again"))?;
    if let Some(oidc) = gate.oidc {
        session = refresh::renew_if_due(oidc, gate.tokens, gate.sessions, session).await?;
    }
    if purpose != Purpose::Read && !from_own_page(gate.origins, headers) {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "this request did not come from the gateway's page"));
    }
    if purpose == Purpose::Change {
        let sent = headers.get("x-csrf-token").and_then(|v| v.to_str().ok()).unwrap_or("");
        if !ids::same(sent, &session.csrf) {
            return Err(Refusal::new(StatusCode::FORBIDDEN, "missing or wrong X-CSRF-Token"));
        }
    }
    if purpose == Purpose::Terminal
        && let Some(token) = &session.token
        && let Err(refusal) = authenticate(gate.tokens, token.expose_secret()).await
    {
        if refusal.status == StatusCode::UNAUTHORIZED {
            gate.sessions.close(&session.id);
        }
        return Err(Refusal::new(refusal.status, format!("{}; sign in again", refusal.message)));
    }
    let token = session.token.clone();
    Ok(Caller { user: session.user.clone(), session: Some(session), token })
}

/// Whether the request's `Origin` is the page's.
pub fn from_own_page(origins: &AllowedOrigins, headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).and_then(|v: &http::HeaderValue| v.to_str().ok());
    origins.allows(text(header::ORIGIN), text(header::HOST))
}

/// Whether a bearer-token request may go on, as far as where it comes from goes: a read may
/// come from anywhere (CORS keeps another site from reading the answer); a terminal or a change
/// from a browser (an `Origin`) must come from the page, and one from no browser (no `Origin`)
/// may go on.
fn bearer_from_page_or_no_browser(origins: &AllowedOrigins, headers: &HeaderMap, purpose: Purpose) -> bool {
    purpose == Purpose::Read || !headers.contains_key(header::ORIGIN) || from_own_page(origins, headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_from_a_browser_must_come_from_the_page_to_change_something() {
        let own = AllowedOrigins::default();
        let listed = AllowedOrigins::new(&["https://shells.example.com".into()]);
        let (host, page, evil) = ("127.0.0.1:8443", "https://127.0.0.1:8443", "https://evil.example");
        // (what, allowed origins, Origin, purpose, goes on)
        type Case<'a> = (&'a str, &'a AllowedOrigins, Option<&'a str>, Purpose, bool);
        let cases: &[Case<'_>] = &[
            ("the plugin opens a terminal", &own, None, Purpose::Terminal, true),
            ("curl changes something", &own, None, Purpose::Change, true),
            ("the page opens a terminal", &own, Some(page), Purpose::Terminal, true),
            ("the page changes something", &own, Some(page), Purpose::Change, true),
            ("another site opens a terminal", &own, Some(evil), Purpose::Terminal, false),
            ("another site changes something", &own, Some(evil), Purpose::Change, false),
            ("an opaque origin changes something", &own, Some("null"), Purpose::Change, false),
            ("the page over plain http", &own, Some("http://127.0.0.1:8443"), Purpose::Terminal, false),
            ("another site reads", &own, Some(evil), Purpose::Read, true),
            ("a listed origin opens a terminal", &listed, Some("https://shells.example.com"), Purpose::Terminal, true),
            ("the host, not listed, opens a terminal", &listed, Some(page), Purpose::Terminal, false),
        ];
        for (what, origins, origin, purpose, want) in cases {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, http::HeaderValue::from_static(host));
            if let Some(origin) = origin {
                headers.insert(header::ORIGIN, http::HeaderValue::from_str(origin).unwrap());
            }
            assert_eq!(bearer_from_page_or_no_browser(origins, &headers, *purpose), *want, "{what}");
        }
    }
}
