//! OpenID Connect ID tokens, verified as kube-apiserver's JWT authenticator verifies them for
//! the same issuer, so that a person the gateway signs in is the same user to the apiserver, the
//! connect gate, RBAC and the audit log.
//!
//! [`Verifier::discover`] reads the issuer's discovery document once ([`discovery`]);
//! [`Verifier::verify`] checks a token's signature with the issuer's keys ([`keys`]: rotated
//! keys are fetched when a token names one), its issuer, audience (the client id), expiry and
//! not-before (with [`LEEWAY`] for clocks that differ), its nonce and authorized party, and reads
//! its user and groups with the apiserver's `--oidc-*` meanings ([`claims`]). It never fails
//! open: an issuer that cannot be reached verifies nothing. Tokens are never logged or kept.

pub mod claims;
pub mod discovery;
mod fetch;
pub mod flow;
pub mod keys;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde_json::Value;

pub use self::claims::ClaimRules;
pub use self::discovery::Provider;
use self::fetch::Fetcher;
use self::keys::KeyCache;
use crate::user::AuthenticatedUser;

/// How far the issuer's clock and this one may differ for `exp`, `nbf` and `iat`.
pub const LEEWAY: Duration = Duration::from_secs(30);
/// The longest ID token read (real ones are 1 to 4 KiB; a header is bounded by the server
/// before, but a token may come in a form body too).
pub const TOKEN_LIMIT: usize = 16 * 1024;

/// The issuer and what its tokens must say, as kube-apiserver's `--oidc-*` flags say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcOptions {
    /// `--oidc-issuer-url`: https, exactly as the issuer writes its `iss`.
    pub issuer_url: String,
    /// `--oidc-client-id`: the audience every token must have.
    pub client_id: String,
    /// `--oidc-ca-file`: the CA the issuer's certificate chains to; the system's roots without.
    pub ca_file: Option<PathBuf>,
    /// The client's secret (`--oidc-client-secret-file`), for the token endpoint; none for a
    /// verifier that only verifies.
    pub client_secret: Option<ClientSecret>,
    /// How claims name the user and groups.
    pub claims: ClaimRules,
}

/// A client secret: never shown, not even in a `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSecret(pub String);

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(…)")
    }
}

/// A sign-in the issuer completed: the verified ID token, the token itself (what the gateway
/// shows the apiserver as the user) and the refresh token (kept by the gateway only).
#[derive(Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// Who, until when.
    pub token: VerifiedToken,
    /// The ID token.
    pub id_token: String,
    /// The refresh token, if the issuer gave one.
    pub refresh_token: Option<String>,
}

impl std::fmt::Debug for SignedIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedIn").field("token", &self.token).finish_non_exhaustive()
    }
}

/// Why a token was not taken, or the issuer could not be used. Each reads as one sentence a
/// person can act on; none holds a token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OidcError {
    /// The configuration cannot work (a CA file that does not read, an http issuer).
    #[error("the OpenID Connect configuration: {0}")]
    Config(String),
    /// The issuer did not answer, or not with a document.
    #[error("the identity provider cannot be reached: {0}")]
    Unreachable(String),
    /// The issuer answered with something that cannot be used.
    #[error("the identity provider: {0}")]
    Provider(String),
    /// The token is not one of this issuer for this client.
    #[error("the sign-in is not valid: {0}")]
    Token(String),
    /// The token names a key the issuer's set does not have, even fetched again.
    #[error("the sign-in is not valid: it is signed with a key the identity provider does not have ({0})")]
    UnknownKey(String),
    /// The token expired (more than [`LEEWAY`] ago by this clock).
    #[error("the sign-in has expired: sign in again")]
    Expired,
    /// The token is not valid yet by this clock: the clocks differ by more than [`LEEWAY`].
    #[error(
        "the sign-in is not valid yet: this server's clock and the identity provider's differ by more than {}s",
        LEEWAY.as_secs()
    )]
    NotYetValid,
}

/// A token that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// Who it names.
    pub user: AuthenticatedUser,
    /// Its `exp`.
    pub expiry: SystemTime,
}

/// Verifies the ID tokens of one issuer for one client.
#[derive(Debug)]
pub struct Verifier {
    options: OidcOptions,
    provider: Provider,
    keys: KeyCache,
    fetcher: Fetcher,
}

impl Verifier {
    /// Read the issuer's discovery document: the issuer must answer at start.
    pub async fn discover(options: OidcOptions) -> Result<Self, OidcError> {
        Self::discover_with(options, keys::REFRESH_AT_MOST_EVERY).await
    }

    /// [`Self::discover`], fetching the keys again for an unknown key id at most every
    /// `refresh_at_most_every` (the tests of rotation do not wait).
    pub(crate) async fn discover_with(
        options: OidcOptions,
        refresh_at_most_every: Duration,
    ) -> Result<Self, OidcError> {
        if !options.issuer_url.starts_with("https://") {
            return Err(OidcError::Config(format!("the issuer URL {:?} is not https", options.issuer_url)));
        }
        if options.client_id.is_empty() {
            return Err(OidcError::Config("the client id is empty".into()));
        }
        let fetcher = Fetcher::new(options.ca_file.as_deref())?;
        let url = discovery::document_url(&options.issuer_url);
        let body = fetcher.get(&url, "the discovery document", discovery::DOCUMENT_LIMIT).await?;
        let provider = discovery::parse(&options.issuer_url, &body)?;
        let keys = KeyCache::new(provider.jwks_uri.clone(), fetcher.clone(), refresh_at_most_every);
        Ok(Self { options, provider, keys, fetcher })
    }

    /// Whether the issuer answers now (its discovery document, within `within`): asked before a
    /// person is sent there, so that a provider that is down is said on the page, not left to
    /// the browser's own error.
    pub async fn reachable(&self, within: Duration) -> Result<(), OidcError> {
        let url = discovery::document_url(&self.options.issuer_url);
        let fetched = self.fetcher.get(&url, "the discovery document", discovery::DOCUMENT_LIMIT);
        match tokio::time::timeout(within, fetched).await {
            Ok(fetched) => fetched.map(drop),
            Err(_) => Err(OidcError::Unreachable(format!("the discovery document at {url}: no answer in {within:?}"))),
        }
    }

    /// The issuer's endpoints.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The configuration it verifies with.
    pub fn options(&self) -> &OidcOptions {
        &self.options
    }

    /// Verify an ID token; `nonce` is the one the sign-in sent (none for a token a refresh
    /// gave, which carries the first one or none).
    pub async fn verify(&self, token: &str, nonce: Option<&str>) -> Result<VerifiedToken, OidcError> {
        if token.len() > TOKEN_LIMIT {
            return Err(OidcError::Token(format!("the token is longer than {TOKEN_LIMIT} bytes")));
        }
        let header = decode_header(token).map_err(|e| OidcError::Token(format!("it is not a signed JWT ({e})")))?;
        let key = self.keys.key(header.kid.as_deref(), header.alg).await?;
        let claims = self.check(token, header.alg, key.decoding())?;
        claims::check_binding(&claims, &self.options.client_id, nonce)?;
        let user = self.options.claims.user(&self.options.issuer_url, &claims)?;
        let expiry = claims
            .get("exp")
            .and_then(Value::as_u64)
            .and_then(|exp| UNIX_EPOCH.checked_add(Duration::from_secs(exp)))
            .ok_or_else(|| OidcError::Token("the token's exp is not a time".into()))?;
        Ok(VerifiedToken { user, expiry })
    }

    /// Exchange the code a person came back with for tokens (with the sign-in's PKCE verifier),
    /// and verify the ID token against the sign-in's nonce.
    pub async fn exchange(
        &self,
        code: &str,
        sign_in: &flow::SignIn,
        redirect_uri: &str,
    ) -> Result<SignedIn, OidcError> {
        let tokens = self.token_request(flow::code_form(code, redirect_uri, &sign_in.verifier)).await?;
        let id_token =
            tokens.id_token.ok_or_else(|| OidcError::Provider("the token endpoint gave no ID token".into()))?;
        let token = self.verify(&id_token, Some(&sign_in.nonce)).await?;
        Ok(SignedIn { token, id_token, refresh_token: tokens.refresh_token })
    }

    /// A new ID token for a refresh token, before the old one expires; the issuer may rotate
    /// the refresh token too (the old one is kept when it does not). The caller checks that the
    /// new token names the same person.
    pub async fn refresh(&self, refresh_token: &str) -> Result<SignedIn, OidcError> {
        let tokens = self.token_request(flow::refresh_form(refresh_token)).await?;
        let id_token =
            tokens.id_token.ok_or_else(|| OidcError::Provider("the refresh gave no ID token: sign in again".into()))?;
        let token = self.verify(&id_token, None).await?;
        let refresh_token = tokens.refresh_token.or_else(|| Some(refresh_token.to_owned()));
        Ok(SignedIn { token, id_token, refresh_token })
    }

    /// Revoke a refresh token at the issuer (RFC 7009), so that no copy of it anywhere renews a
    /// sign-in again; nothing to do for an issuer without a revocation endpoint.
    pub async fn revoke(&self, refresh_token: &str) -> Result<(), OidcError> {
        let Some(endpoint) = &self.provider.revocation_endpoint else { return Ok(()) };
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", refresh_token)
            .append_pair("token_type_hint", "refresh_token")
            .finish();
        let (status, body) = self.post_as_client(endpoint, "the revocation endpoint", form).await?;
        // RFC 7009 2.2: 200 whether or not the token was valid.
        if status.is_success() { Ok(()) } else { flow::token_response(status, &body).map(drop) }
    }

    async fn token_request(&self, form: String) -> Result<flow::Tokens, OidcError> {
        let endpoint = &self.provider.token_endpoint;
        let (status, body) = self.post_as_client(endpoint, "the token endpoint", form).await?;
        flow::token_response(status, &body)
    }

    /// POST a form to one of the issuer's endpoints as this client: `client_secret_basic`, or,
    /// for a public client, its id in the form (RFC 6749 4.1.3; PKCE is its proof).
    async fn post_as_client(
        &self,
        endpoint: &str,
        what: &str,
        mut form: String,
    ) -> Result<(http::StatusCode, bytes::Bytes), OidcError> {
        let basic = self.options.client_secret.as_ref().map(|s| flow::basic_credentials(&self.options.client_id, &s.0));
        if basic.is_none() {
            form.push('&');
            form.push_str(
                &form_urlencoded::Serializer::new(String::new())
                    .append_pair("client_id", &self.options.client_id)
                    .finish(),
            );
        }
        self.keys.fetcher().post_form(endpoint, what, basic.as_deref(), form, flow::TOKEN_RESPONSE_LIMIT).await
    }

    /// The signature, issuer, audience and times, by the signature library.
    fn check(
        &self,
        token: &str,
        algorithm: jsonwebtoken::Algorithm,
        key: &jsonwebtoken::DecodingKey,
    ) -> Result<Value, OidcError> {
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[&self.options.issuer_url]);
        validation.set_audience(&[&self.options.client_id]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY.as_secs();
        let data = decode::<Value>(token, key, &validation).map_err(|e| match e.kind() {
            ErrorKind::ExpiredSignature => OidcError::Expired,
            ErrorKind::ImmatureSignature => OidcError::NotYetValid,
            ErrorKind::InvalidSignature => OidcError::Token("its signature does not verify".into()),
            ErrorKind::InvalidIssuer => OidcError::Token("it is from another issuer".into()),
            ErrorKind::InvalidAudience => OidcError::Token("it was issued for another client".into()),
            ErrorKind::MissingRequiredClaim(claim) => OidcError::Token(format!("it has no {claim:?} claim")),
            _ => OidcError::Token(format!("it does not verify ({e})")),
        })?;
        let claims = data.claims;
        // `iat` in the future beyond the leeway is a clock that differs, as `nbf` is.
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if claims.get("iat").and_then(Value::as_u64).is_some_and(|iat| iat > now + LEEWAY.as_secs()) {
            return Err(OidcError::NotYetValid);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests;
