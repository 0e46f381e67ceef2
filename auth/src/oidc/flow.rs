//! The authorization-code flow (OpenID Connect Core 3.1) with PKCE (RFC 7636, `S256`), a `state`
//! and a `nonce`, as a confidential client: what to send a person to the issuer with, what to
//! keep until they come back, and how the issuer's answers read. Pure, but for the random values
//! (the OS's, through ring) and [`super::Verifier::exchange`] / [`super::Verifier::refresh`],
//! which post to the token endpoint.
//!
//! A sign-in keeps three secrets until the callback: the `state` (the callback is this sign-in's,
//! not one an attacker started: CSRF), the `nonce` (the ID token was issued for this sign-in, not
//! replayed) and the PKCE verifier (a stolen code is worthless without it). The gateway keeps
//! them sealed, never in a URL.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http::StatusCode;
use ring::rand::{SecureRandom, SystemRandom};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{OidcError, Provider};

/// The largest token response read (an ID token, an access token and a refresh token).
pub const TOKEN_RESPONSE_LIMIT: usize = 64 * 1024;

/// What a sign-in keeps until the person comes back, and the URL to send them to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    /// The `state` the callback must bring back.
    pub state: String,
    /// The `nonce` the ID token must hold.
    pub nonce: String,
    /// The PKCE verifier the code is exchanged with.
    pub verifier: String,
    /// Where to send the person: the issuer's authorization endpoint with the request.
    pub url: String,
}

/// 32 bytes of the OS's randomness, base64url: a `state`, a `nonce` or a PKCE verifier (43
/// characters, RFC 7636's minimum, with 256 bits of entropy).
pub fn random_value() -> Result<String, OidcError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes).map_err(|_| OidcError::Config("the OS gave no random bytes".into()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The PKCE `S256` challenge of a verifier.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A new sign-in: fresh secrets, and the authorization request for `scopes` (with `openid`
/// first, whatever the caller gave).
pub fn begin(provider: &Provider, client_id: &str, redirect_uri: &str, scopes: &[String]) -> Result<SignIn, OidcError> {
    let (state, nonce, verifier) = (random_value()?, random_value()?, random_value()?);
    let url = authorization_url(provider, client_id, redirect_uri, scopes, &state, &nonce, &challenge(&verifier));
    Ok(SignIn { state, nonce, verifier, url })
}

/// The authorization request's URL.
pub fn authorization_url(
    provider: &Provider,
    client_id: &str,
    redirect_uri: &str,
    scopes: &[String],
    state: &str,
    nonce: &str,
    challenge: &str,
) -> String {
    let scope = std::iter::once("openid")
        .chain(scopes.iter().map(String::as_str).filter(|s| *s != "openid"))
        .collect::<Vec<_>>()
        .join(" ");
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", &scope)
        .append_pair("state", state)
        .append_pair("nonce", nonce)
        .append_pair("code_challenge", challenge)
        .append_pair("code_challenge_method", "S256")
        .finish();
    let separator = if provider.authorization_endpoint.contains('?') { '&' } else { '?' };
    format!("{}{separator}{query}", provider.authorization_endpoint)
}

/// The token request that exchanges a code.
pub fn code_form(code: &str, redirect_uri: &str, verifier: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", code)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("code_verifier", verifier)
        .finish()
}

/// The token request that refreshes.
pub fn refresh_form(refresh_token: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", refresh_token)
        .finish()
}

/// `client_secret_basic` (RFC 6749 2.3.1): the id and secret form-encoded, then base64.
pub fn basic_credentials(client_id: &str, secret: &str) -> String {
    let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!("Basic {}", STANDARD.encode(format!("{}:{}", encode(client_id), encode(secret))))
}

/// What a token endpoint gave.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Tokens {
    /// The ID token (a refresh may leave it out; then the sign-in's stays).
    #[serde(default)]
    pub id_token: Option<String>,
    /// The refresh token, kept by the gateway only.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// Seconds the access token lives, if the issuer says.
    #[serde(default)]
    pub expires_in: Option<u64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a token in a log, even by accident.
        f.debug_struct("Tokens")
            .field("id_token", &self.id_token.as_ref().map(|_| "…"))
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "…"))
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// A token endpoint's answer: the tokens, or why not in a sentence.
pub fn token_response(status: StatusCode, body: &[u8]) -> Result<Tokens, OidcError> {
    if status.is_success() {
        return serde_json::from_slice(body)
            .map_err(|e| OidcError::Provider(format!("the token endpoint's answer does not read: {e}")));
    }
    #[derive(Deserialize)]
    struct ErrorAnswer {
        error: String,
        #[serde(default)]
        error_description: Option<String>,
    }
    match serde_json::from_slice::<ErrorAnswer>(body) {
        Ok(answer) => Err(provider_error(&answer.error, answer.error_description.as_deref())),
        Err(_) => Err(OidcError::Provider(format!("the token endpoint answered {status}"))),
    }
}

/// The sentence for an error the issuer sent (to the callback, or from the token endpoint).
pub fn provider_error(error: &str, description: Option<&str>) -> OidcError {
    let said = match error {
        "access_denied" => "the sign-in was declined at the identity provider",
        "invalid_client" | "unauthorized_client" => {
            "the identity provider does not accept the gateway's client id or secret (an administrator must fix them)"
        }
        "invalid_grant" => "the sign-in expired or was already used: sign in again",
        "login_required" | "consent_required" | "interaction_required" => {
            "the identity provider wants you to sign in again"
        }
        "temporarily_unavailable" | "server_error" => "the identity provider cannot sign you in just now: try again",
        _ => "the identity provider refused the sign-in",
    };
    // The description is the issuer's text: cut short, one line, so it cannot flood a page.
    let detail: String = description
        .map(|d| d.chars().filter(|c| !c.is_control()).take(200).collect())
        .filter(|d: &String| !d.is_empty())
        .map(|d| format!(" ({error}: {d})"))
        .unwrap_or_else(|| format!(" ({error})"));
    OidcError::Provider(format!("{said}{detail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(endpoint: &str) -> Provider {
        Provider {
            issuer: "https://idp".into(),
            authorization_endpoint: endpoint.into(),
            token_endpoint: "https://idp/token".into(),
            jwks_uri: "https://idp/keys".into(),
            end_session_endpoint: None,
            revocation_endpoint: None,
            code_challenge_methods_supported: None,
        }
    }

    #[test]
    fn the_challenge_is_rfc_7636s() {
        // RFC 7636 appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn random_values_are_43_url_safe_characters_and_differ() {
        let (a, b) = (random_value().unwrap(), random_value().unwrap());
        assert_eq!(a.len(), 43);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn the_authorization_request_carries_everything_encoded() {
        let cases = [
            ("https://idp/auth", "https://idp/auth?response_type=code&"),
            ("https://idp/auth?tenant=x", "https://idp/auth?tenant=x&response_type=code&"),
        ];
        for (endpoint, start) in cases {
            let url = authorization_url(
                &provider(endpoint),
                "my gw",
                "https://gw.example/oidc/callback",
                &["email".into(), "openid".into(), "groups".into()],
                "st",
                "no",
                "ch",
            );
            assert!(url.starts_with(start), "{url}");
            assert!(url.contains("client_id=my+gw&"), "{url}");
            assert!(url.contains("redirect_uri=https%3A%2F%2Fgw.example%2Foidc%2Fcallback&"), "{url}");
            assert!(url.contains("scope=openid+email+groups&"), "openid once and first: {url}");
            assert!(url.ends_with("&state=st&nonce=no&code_challenge=ch&code_challenge_method=S256"), "{url}");
        }
        let sign_in = begin(&provider("https://idp/auth"), "gw", "https://gw/cb", &[]).unwrap();
        assert!(sign_in.url.contains(&format!("code_challenge={}", challenge(&sign_in.verifier))), "{sign_in:?}");
        assert!(!sign_in.url.contains(&sign_in.verifier), "the verifier never leaves the gateway");
    }

    #[test]
    fn forms_and_credentials_are_encoded() {
        assert_eq!(
            code_form("c/1", "https://gw/cb", "v"),
            "grant_type=authorization_code&code=c%2F1&redirect_uri=https%3A%2F%2Fgw%2Fcb&code_verifier=v"
        );
        assert_eq!(refresh_form("r+1"), "grant_type=refresh_token&refresh_token=r%2B1");
        // RFC 6749 2.3.1: form-encoded, then base64 of "id:secret".
        assert_eq!(basic_credentials("gw", "s:1"), format!("Basic {}", STANDARD.encode("gw:s%3A1")));
    }

    #[test]
    fn the_token_endpoints_answers_read_as_sentences() {
        let cases: [(StatusCode, &str, Result<(), &str>); 6] = [
            (StatusCode::OK, r#"{"id_token":"ID-VALUE","refresh_token":"REFRESH-VALUE","expires_in":3600}"#, Ok(())),
            (StatusCode::BAD_REQUEST, r#"{"error":"invalid_grant"}"#, Err("sign in again (invalid_grant)")),
            (
                StatusCode::UNAUTHORIZED,
                r#"{"error":"invalid_client","error_description":"Client authentication failed"}"#,
                Err(
                    "client id or secret (an administrator must fix them) (invalid_client: Client authentication failed)",
                ),
            ),
            (StatusCode::BAD_GATEWAY, "<html>", Err("answered 502 Bad Gateway")),
            (StatusCode::OK, "{", Err("does not read")),
            (
                StatusCode::BAD_REQUEST,
                r#"{"error":"weird","error_description":"a\nb"}"#,
                Err("refused the sign-in (weird: ab)"),
            ),
        ];
        for (status, body, want) in cases {
            match (token_response(status, body.as_bytes()), want) {
                (Ok(tokens), Ok(())) => {
                    assert_eq!(tokens.refresh_token.as_deref(), Some("REFRESH-VALUE"));
                    let shown = format!("{tokens:?}");
                    assert!(!shown.contains("REFRESH-VALUE") && !shown.contains("ID-VALUE"), "{shown}");
                }
                (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{body}: {e}"),
                (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
            }
        }
        assert_eq!(
            provider_error("access_denied", Some("The resource owner denied the request")).to_string(),
            "the identity provider: the sign-in was declined at the identity provider (access_denied: The resource owner denied the request)"
        );
    }
}
