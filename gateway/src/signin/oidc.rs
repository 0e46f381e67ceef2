//! Sign-in through an OpenID Connect identity provider: the authorization-code flow with PKCE,
//! `state` and `nonce` (`myownshell_auth::oidc::flow`), whose secrets wait for the person to come
//! back in a cookie of their own, sealed under the sessions' key for another purpose, so that
//! any replica takes the callback and nothing is kept in a replica's memory.
//!
//! The pending cookie is `SameSite=Lax`, unlike the session's `Strict`: the provider sends the
//! person back with a top-level navigation from its own site, which a `Strict` cookie would not
//! be sent with. It lives [`PENDING_FOR`], and is cleared by the callback whatever it finds.
//!
//! Must not: take a callback whose `state` is not the one of the pending sign-in in the same
//! browser, take an ID token whose `nonce` is not that sign-in's, or sign in anyone the cluster
//! does not accept the ID token of (the apiserver must trust the same issuer).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue};
use myownshell_auth::oidc::flow::{self, SignIn};
use myownshell_auth::oidc::{OidcError, Verifier};
use serde::{Deserialize, Serialize};

use super::seal::Sealer;
use crate::ids;

/// The pending sign-in's cookie.
pub const COOKIE: &str = "__Host-myownshell-oidc";
/// How long a person has at the provider before the sign-in must start again.
pub const PENDING_FOR: Duration = Duration::from_secs(600);
/// Where the provider sends people back (the path of --oidc-redirect-url).
pub const CALLBACK_PATH: &str = "/oidc/callback";
/// Where the page sends people to sign in.
pub const LOGIN_PATH: &str = "/oidc/login";

/// A sign-in under way, as its cookie carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Pending {
    state: String,
    nonce: String,
    verifier: String,
    /// Seconds since the epoch.
    expires: u64,
}

/// Sign-in through the provider.
#[derive(Debug)]
pub struct OidcSignIn {
    /// The provider's endpoints and its ID tokens' checks.
    pub verifier: Verifier,
    /// --oidc-redirect-url.
    pub redirect_url: String,
    /// Scopes besides `openid`.
    pub scopes: Vec<String>,
    sealer: Sealer,
}

/// Why a callback signs nobody in, as the page says it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallbackError {
    /// No pending sign-in in this browser (too old, or started elsewhere).
    #[error("the sign-in took longer than {} minutes or was started in another browser: sign in again", PENDING_FOR.as_secs() / 60)]
    NotPending,
    /// A callback for another sign-in (a forged or replayed link).
    #[error("the sign-in's state does not match the one this browser started: sign in again")]
    WrongState,
    /// The provider did not give a code.
    #[error("the identity provider sent no code back: sign in again")]
    NoCode,
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl OidcSignIn {
    /// Sign-in through `verifier`'s provider, its pending cookies sealed by `sealer`.
    pub fn new(verifier: Verifier, redirect_url: String, scopes: Vec<String>, sealer: Sealer) -> Self {
        Self { verifier, redirect_url, scopes, sealer }
    }

    /// A new sign-in: where to send the person, and the cookie that keeps its secrets.
    pub fn begin(&self) -> Result<(String, HeaderValue), OidcError> {
        let sign_in = flow::begin(
            self.verifier.provider(),
            &self.verifier.options().client_id,
            &self.redirect_url,
            &self.scopes,
        )?;
        let pending = Pending {
            state: sign_in.state,
            nonce: sign_in.nonce,
            verifier: sign_in.verifier,
            expires: now() + PENDING_FOR.as_secs(),
        };
        let sealed = self.sealer.seal(&pending).map_err(OidcError::Config)?;
        let cookie = HeaderValue::from_str(&format!(
            "{COOKIE}={sealed}; Path=/; Max-Age={}; HttpOnly; Secure; SameSite=Lax",
            PENDING_FOR.as_secs()
        ))
        .map_err(|e| OidcError::Config(e.to_string()))?;
        Ok((sign_in.url, cookie))
    }

    /// The pending sign-in of this browser whose `state` the callback brought back.
    pub fn pending(&self, headers: &HeaderMap, state: Option<&str>) -> Result<SignIn, CallbackError> {
        let pending = open_pending(&self.sealer, headers, state)?;
        Ok(SignIn { state: pending.state, nonce: pending.nonce, verifier: pending.verifier, url: String::new() })
    }
}

/// The pending sign-in the cookie holds, if it opens, is not too old and has `state`.
fn open_pending(sealer: &Sealer, headers: &HeaderMap, state: Option<&str>) -> Result<Pending, CallbackError> {
    let pending: Pending = read_cookie(headers)
        .and_then(|sealed| sealer.open(sealed))
        .filter(|p: &Pending| p.expires > now())
        .ok_or(CallbackError::NotPending)?;
    if !state.is_some_and(|state| ids::same(state, &pending.state)) {
        return Err(CallbackError::WrongState);
    }
    Ok(pending)
}

/// `Set-Cookie` that removes the pending sign-in.
pub fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("__Host-myownshell-oidc=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax")
}

fn read_cookie(headers: &HeaderMap) -> Option<&str> {
    super::cookie::read_named(headers, COOKIE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(sealer: &Sealer, state: &str, expires: u64) -> HeaderMap {
        let sealed = sealer
            .seal(&Pending { state: state.into(), nonce: "n".into(), verifier: "v".into(), expires })
            .expect("sealed");
        let mut headers = HeaderMap::new();
        headers.insert(http::header::COOKIE, HeaderValue::from_str(&format!("a=1; {COOKIE}={sealed}")).expect("valid"));
        headers
    }

    /// A case: its name, the request's headers, the state it brings, what it gets.
    type Case = (&'static str, HeaderMap, Option<&'static str>, Result<String, CallbackError>);

    fn check(sealer: &Sealer, headers: &HeaderMap, state: Option<&str>) -> Result<String, CallbackError> {
        open_pending(sealer, headers, state).map(|p| p.verifier)
    }

    #[test]
    fn a_callback_is_taken_only_for_the_pending_sign_in_of_this_browser() {
        let sealer = Sealer::for_sign_ins(&[5; 32]).expect("a key");
        let sessions = Sealer::new(&[5; 32]).expect("a key");
        let later = now() + 60;
        let cases: Vec<Case> = vec![
            ("its state", pending(&sealer, "s1", later), Some("s1"), Ok("v".into())),
            ("another state", pending(&sealer, "s1", later), Some("s2"), Err(CallbackError::WrongState)),
            ("no state", pending(&sealer, "s1", later), None, Err(CallbackError::WrongState)),
            ("too old", pending(&sealer, "s1", now() - 1), Some("s1"), Err(CallbackError::NotPending)),
            ("no cookie", HeaderMap::new(), Some("s1"), Err(CallbackError::NotPending)),
            (
                "a session's seal, not a sign-in's",
                pending(&sessions, "s1", later),
                Some("s1"),
                Err(CallbackError::NotPending),
            ),
        ];
        for (name, headers, state, want) in cases {
            assert_eq!(check(&sealer, &headers, state), want, "{name}");
        }
    }

    #[test]
    fn the_pending_cookie_is_sent_back_by_a_navigation_from_the_provider() {
        let clear = clear_cookie();
        let clear = clear.to_str().expect("ascii");
        for part in [COOKIE, "Max-Age=0", "HttpOnly", "Secure", "SameSite=Lax", "Path=/"] {
            assert!(clear.contains(part), "{clear} lacks {part}");
        }
        assert!(CallbackError::NotPending.to_string().contains("10 minutes"));
    }
}
