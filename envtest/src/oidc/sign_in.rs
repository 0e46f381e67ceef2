//! The authorization-code flow as a person in a browser goes through it, against the test bed's
//! provider: PKCE (S256), `state` and `nonce` as a careful client sends them, the login form
//! filled in and posted, the code taken at the redirect URI and exchanged for tokens with the
//! client's secret. What the ID token says is for the apiserver to verify (signature, issuer,
//! audience, expiry); this checks what only the client can: the `state` it gets back and the
//! `nonce` in the token are the ones it sent.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD as BASE64_STANDARD, URL_SAFE_NO_PAD as BASE64URL};
use secrecy::SecretString;
use sha2::{Digest, Sha256};

use super::Provider;
use super::admin::Client;
use super::browser::{Browser, Landed};
use super::https::{self, form, query_value};

/// The scopes asked for: an ID token, a refresh token, and the profile and e-mail claims.
pub const SCOPES: &str = "openid offline_access profile email";

/// What a sign-in gave the client.
#[derive(Debug)]
pub struct Tokens {
    /// The ID token: the bearer credential the apiserver takes.
    pub id_token: SecretString,
    /// The refresh token (`offline_access`).
    pub refresh_token: Option<SecretString>,
}

/// Why a sign-in did not give tokens.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// The login page refused the name or password, with this sentence.
    #[error("the login page refused: {0}")]
    Refused(String),
    /// Anything else, in words (never a token, a code or a password).
    #[error("{0}")]
    Failed(String),
}

/// Sign `user` in with `password` to `client` at `provider`, as a browser would; the tokens.
pub async fn sign_in(provider: &Provider, client: &Client, user: &str, password: &str) -> Result<Tokens, SignInError> {
    let _one = provider.one_flow_at_a_time().await;
    let fail = SignInError::Failed;
    let redirect_uri = client.redirect_uris.first().ok_or_else(|| fail("the client has no redirect URI".into()))?;
    let (state, nonce, verifier) = (random()?, random()?, random()?);
    let challenge = s256(&verifier);
    let authorize = format!(
        "{}/oauth2/auth?{}",
        provider.issuer(),
        form(&[
            ("response_type", "code"),
            ("client_id", &client.client_id),
            ("redirect_uri", redirect_uri),
            ("scope", SCOPES),
            ("state", &state),
            ("nonce", &nonce),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
    );
    let mut browser = Browser::new(provider.client_tls(), redirect_uri);
    let landed = browser.get(&authorize).await.map_err(fail)?;
    let callback = match log_in(&mut browser, landed, user, password).await? {
        Landed::Stopped(callback) => callback,
        Landed::Page(url, page) => {
            let url = https::redact(&url.parse().unwrap_or_default());
            return Err(fail(format!("the sign-in ended at {url} with {}: {}", page.status, page.text())));
        }
    };
    let query = callback.split_once('?').map_or("", |(_, q)| q);
    if let Some(error) = query_value(query, "error") {
        let description = query_value(query, "error_description").unwrap_or_default();
        return Err(fail(format!("the provider answered the client with {error}: {description}")));
    }
    if query_value(query, "state").as_deref() != Some(state.as_str()) {
        return Err(fail("the callback's state is not the one sent".into()));
    }
    let code = query_value(query, "code").ok_or_else(|| fail("the callback holds no code".into()))?;
    let tokens = exchange(provider, client, redirect_uri, &code, &verifier).await.map_err(fail)?;
    if claim(&tokens.id_token, "nonce").map_err(fail)?.as_str() != Some(nonce.as_str()) {
        return Err(fail("the ID token's nonce is not the one sent".into()));
    }
    Ok(tokens)
}

/// Where a browser `landed` at the login form (sent there by the provider's authorization
/// endpoint), log `user` in with `password` and follow the provider's redirects after: where the
/// browser lands then (at the client's redirect URI, where its `stop_at` stops it, or a page of
/// the client's that the redirect URI sent it on to), or the login page's refusal.
pub async fn log_in(browser: &mut Browser, landed: Landed, user: &str, password: &str) -> Result<Landed, SignInError> {
    let fail = SignInError::Failed;
    let (page_url, page) = match landed {
        Landed::Page(url, page) if page.status == 200 => (url, page),
        Landed::Page(url, page) => {
            return Err(fail(format!("expected the login form at {url}, got {}: {}", page.status, page.text())));
        }
        Landed::Stopped(_) => return Err(fail("the provider skipped the login form".into())),
    };
    let login_challenge = hidden_field(&page.text(), "login_challenge")
        .ok_or_else(|| fail(format!("no login form at {}", https::redact(&page_url.parse().unwrap_or_default()))))?;
    let action = super::browser::resolve(&page_url, "/login").map_err(fail)?;
    let fields = [("login_challenge", login_challenge.as_str()), ("username", user), ("password", password)];
    match browser.post_form(&action, &fields).await.map_err(fail)? {
        Landed::Page(_, page) if page.status == 401 => {
            Err(SignInError::Refused(alert(&page.text()).unwrap_or_else(|| page.text())))
        }
        landed => Ok(landed),
    }
}

/// The token endpoint: the code and the PKCE verifier for tokens, the client authenticated with
/// its secret (`client_secret_basic`).
async fn exchange(
    provider: &Provider,
    client: &Client,
    redirect_uri: &str,
    code: &str,
    verifier: &str,
) -> Result<Tokens, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        id_token: Option<String>,
        refresh_token: Option<String>,
    }
    let basic = BASE64_STANDARD.encode(format!(
        "{}:{}",
        https::percent_encode(&client.client_id),
        https::percent_encode(&client.client_secret)
    ));
    let body = form(&[
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", verifier),
    ]);
    let request = http::Request::post(format!("{}/oauth2/token", provider.issuer()))
        .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body.into_bytes())
        .map_err(|e| e.to_string())?;
    let response = https::send(&provider.client_tls(), request).await?;
    if response.status != 200 {
        // An error answer holds no token: Hydra's own words are safe to show.
        return Err(format!("the token endpoint answered {}: {}", response.status, response.text()));
    }
    let answer: Answer = serde_json::from_slice(&response.body).map_err(|e| format!("the token answer: {e}"))?;
    let id_token = answer.id_token.ok_or("the token answer holds no ID token")?;
    Ok(Tokens { id_token: id_token.into(), refresh_token: answer.refresh_token.map(Into::into) })
}

/// A claim of a JWT's payload, read without verifying the signature (for what the client itself
/// sent, such as the nonce, and for tests that look at `exp`).
pub fn claim(token: &SecretString, name: &str) -> Result<serde_json::Value, String> {
    use secrecy::ExposeSecret as _;
    let payload = token.expose_secret().split('.').nth(1).ok_or("the ID token is not a JWT")?;
    let json = BASE64URL.decode(payload).map_err(|_| "the ID token's payload is not base64url")?;
    let claims: serde_json::Value = serde_json::from_slice(&json).map_err(|_| "the ID token's payload is not JSON")?;
    Ok(claims.get(name).cloned().unwrap_or_default())
}

/// PKCE's S256 challenge of `verifier`: base64url (no padding) of its SHA-256.
fn s256(verifier: &str) -> String {
    BASE64URL.encode(Sha256::digest(verifier.as_bytes()))
}

/// 32 random bytes, base64url: a `state`, a `nonce` or a PKCE verifier (43 characters, as RFC
/// 7636 asks of a verifier).
fn random() -> Result<String, SignInError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| SignInError::Failed(format!("random bytes: {e}")))?;
    Ok(BASE64URL.encode(bytes))
}

/// The value of the hidden input `name` of the login page's form (HTML-unescaped).
fn hidden_field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(unescape(&html[start..end]))
}

/// The text of the page's `role="alert"` paragraph.
fn alert(html: &str) -> Option<String> {
    let marker = "<p role=\"alert\">";
    let start = html.find(marker)? + marker.len();
    let end = html[start..].find("</p>")? + start;
    Some(unescape(&html[start..end]))
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"").replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_s256_challenge_is_the_base64url_sha256_of_the_verifier() {
        // As Python's hashlib and base64.urlsafe_b64encode (padding stripped) compute it. Hydra
        // checks the same at the token endpoint in every sign-in of the tests.
        assert_eq!(s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWEOEjXk"), "TP3DZQl9rJnri9eRuZaFS6Q7czCrth7sEZC00LreApo");
        assert_eq!(s256(""), "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
    }

    #[test]
    fn the_form_and_the_refusal_are_read_back_from_the_page() {
        let html = "<p role=\"alert\">The user name or the password is wrong.</p>\
                    <input type=\"hidden\" name=\"login_challenge\" value=\"a&amp;b\">";
        assert_eq!(hidden_field(html, "login_challenge").as_deref(), Some("a&b"));
        assert_eq!(alert(html).as_deref(), Some("The user name or the password is wrong."));
    }
}
