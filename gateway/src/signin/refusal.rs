//! A refusal of the gateway's sign-in checks, and the one way a token is authenticated
//! (TokenReview): what `signin` and its renewals (`refresh`) share.

use http::StatusCode;
use myownshell_auth::AuthenticatedUser;
use myownshell_auth::authn::{TokenAuthenticator, TokenOutcome};

/// A refusal: the status and a message for the user (never naming a token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401, 403 or 503.
    pub status: StatusCode,
    /// What went wrong and what to do.
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }
}

/// Authenticate a bearer token.
pub async fn authenticate(tokens: &TokenAuthenticator, token: &str) -> Result<AuthenticatedUser, Refusal> {
    match tokens.authenticate(token).await {
        Ok(TokenOutcome::Authenticated(user)) => Ok(user),
        Ok(TokenOutcome::Rejected) => Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "the cluster did not accept this token (expired, revoked or not a token of this cluster)",
        )),
        Err(e) => Err(Refusal::new(StatusCode::SERVICE_UNAVAILABLE, format!("could not check the token: {e}"))),
    }
}
