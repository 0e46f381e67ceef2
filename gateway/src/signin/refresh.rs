//! Renewing a sign-in through the identity provider before its ID token expires, so that a
//! working day needs one sign-in: the session keeps the provider's refresh token (sealed, never
//! shown to the page) and trades it for a new ID token when the one it holds has less than
//! [`RENEW_BEFORE`] left. The new token goes to TokenReview like the first, and must name the
//! same person. A provider that says no (the person was disabled, the grant revoked) ends the
//! session; one that does not answer leaves it as it is until its token runs out.
//!
//! One renewal at a time per session on a replica: the provider may rotate the refresh token,
//! and a second use of the old one would be taken as a stolen token (Hydra then revokes the
//! whole grant).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::StatusCode;
use myownshell_auth::authn::TokenAuthenticator;
use myownshell_auth::oidc::OidcError;
use myownshell_auth::token::jwt_expiry;
use secrecy::{ExposeSecret, SecretString};

use super::oidc::OidcSignIn;
use super::refusal::{Refusal, authenticate};
use super::sessions::{Session, Sessions};

/// A session's ID token is renewed once it has less than this left: a page that asks every few
/// minutes (`GET /api/session`) renews it well before it runs out.
pub const RENEW_BEFORE: Duration = Duration::from_secs(600);

/// Whether a token expiring at `expiry` is to be renewed at `now` (pure). A token whose expiry
/// cannot be read is renewed.
pub fn due(expiry: Option<SystemTime>, now: SystemTime) -> bool {
    expiry.is_none_or(|exp| exp.duration_since(now).map_or(true, |left| left < RENEW_BEFORE))
}

/// Whether a token expiring at `expiry` still holds at `now` (pure): a session whose provider
/// does not answer stands on it until then.
pub fn still_valid(expiry: Option<SystemTime>, now: SystemTime) -> bool {
    expiry.is_some_and(|exp| exp > now)
}

/// `session`, renewed if its ID token is due (and it has a refresh token): the session to use
/// from now on, or why it has ended.
pub async fn renew_if_due(
    oidc: &OidcSignIn,
    tokens: &TokenAuthenticator,
    sessions: &Sessions,
    session: Arc<Session>,
) -> Result<Arc<Session>, Refusal> {
    let (Some(refresh), Some(token)) = (&session.refresh, &session.token) else { return Ok(session) };
    let expiry = jwt_expiry(token.expose_secret());
    if !due(expiry, SystemTime::now()) || !sessions.start_renewal(&session.id) {
        return Ok(session);
    }
    let renewed = oidc.verifier.refresh(refresh.expose_secret()).await;
    let outcome = match renewed {
        Ok(signed_in) => match authenticate(tokens, &signed_in.id_token).await {
            Ok(user) if user.name == session.user.name => {
                let refresh = signed_in.refresh_token.map(SecretString::from);
                Ok(sessions.renew(&session, user, SecretString::from(signed_in.id_token), refresh))
            }
            Ok(_) => Err(ended(sessions, &session, "the identity provider now names someone else")),
            Err(refusal) => Err(refusal),
        },
        // Not answering is no refusal: the session stands while its token does.
        Err(OidcError::Unreachable(_)) if still_valid(expiry, SystemTime::now()) => Ok(session.clone()),
        Err(OidcError::Unreachable(why)) => Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("your sign-in cannot be renewed: the identity provider cannot be reached ({why})"),
        )),
        Err(e) => Err(ended(sessions, &session, &e.to_string())),
    };
    sessions.end_renewal(&session.id);
    outcome
}

/// End `session` for `why`: the refusal that says so.
fn ended(sessions: &Sessions, session: &Session, why: &str) -> Refusal {
    sessions.close(&session.id);
    Refusal::new(StatusCode::UNAUTHORIZED, format!("your sign-in has ended ({why}): sign in again"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_renewed_when_little_of_it_is_left() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let cases = [
            ("an hour left", Some(now + Duration::from_secs(3600)), false),
            ("just more than the margin", Some(now + RENEW_BEFORE + Duration::from_secs(1)), false),
            ("less than the margin", Some(now + RENEW_BEFORE - Duration::from_secs(1)), true),
            ("expired", Some(now - Duration::from_secs(1)), true),
            ("unreadable", None, true),
        ];
        for (name, expiry, want) in cases {
            assert_eq!(due(expiry, now), want, "{name}");
        }
    }

    #[test]
    fn a_provider_that_does_not_answer_leaves_the_session_until_its_token_runs_out() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let cases = [
            ("a minute left", Some(now + Duration::from_secs(60)), true),
            ("expired", Some(now - Duration::from_secs(1)), false),
            ("unreadable", None, false),
        ];
        for (name, expiry, want) in cases {
            assert_eq!(still_valid(expiry, now), want, "{name}");
        }
    }
}
