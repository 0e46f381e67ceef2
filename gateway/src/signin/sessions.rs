//! Who is signed in: the browser sessions the cookie names, kept in memory.
//!
//! A session holds the user exactly as the cluster authenticated them, a CSRF token for
//! requests that change something, and when it ends: after `--session-max-age`, or when the
//! token it was opened with expires (its `exp`), whichever is first. The token itself is kept (in
//! memory only, never logged) so that each new terminal asks TokenReview again: a token revoked
//! or a service account deleted opens no new terminal after the authentication cache's lifetime.
//!
//! Sessions are not shared between replicas: a user whose replica goes away signs in again.
//! (Shared sessions would need a store, and a store of live credentials is a worse target than
//! a second sign-in.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use myownshell_rbac_proxy::AuthenticatedUser;
use parking_lot::Mutex;
use secrecy::SecretString;

use crate::ids;

/// One signed-in browser.
#[derive(Debug)]
pub struct Session {
    /// Who signed in.
    pub user: AuthenticatedUser,
    /// Sent back in `X-CSRF-Token` with every request that changes something.
    pub csrf: String,
    /// The token the user signed in with; `None` for an authenticating proxy's headers.
    pub token: Option<SecretString>,
    /// When it ends.
    pub expires: Instant,
    /// The order it was opened in (a user over their limit loses their oldest).
    pub opened: u64,
}

/// Why no session was opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    /// The token has expired already.
    #[error("the token has expired")]
    Expired,
    /// As many sessions are open as allowed.
    #[error("too many signed-in sessions ({0}); try again later")]
    Full(usize),
    /// The operating system gave no random bytes.
    #[error("no randomness for a session id: {0}")]
    Random(String),
}

/// The open sessions.
#[derive(Debug)]
pub struct Sessions {
    open: Mutex<HashMap<String, Arc<Session>>>,
    max_age: Duration,
    capacity: usize,
    per_user: usize,
    opened: std::sync::atomic::AtomicU64,
}

/// How long a session lasts: `max_age`, cut short by the token's expiry; `None` if the token
/// has expired.
pub fn lifetime(max_age: Duration, token_expiry: Option<SystemTime>, now: SystemTime) -> Option<Duration> {
    match token_expiry {
        Some(exp) => exp.duration_since(now).ok().filter(|left| !left.is_zero()).map(|left| left.min(max_age)),
        None => Some(max_age),
    }
}

impl Sessions {
    /// Sessions that last at most `max_age`, at most `capacity` at once and `per_user` for one
    /// user (name and uid): a user who signs in once more than that loses their oldest session,
    /// so that one token cannot fill the gateway (10,000 sign-ins with one token once left every
    /// other user a 503).
    pub fn new(max_age: Duration, capacity: usize, per_user: usize) -> Self {
        Self {
            open: Mutex::new(HashMap::new()),
            max_age,
            capacity,
            per_user: per_user.max(1),
            opened: Default::default(),
        }
    }

    /// Open a session for `user`: its id (for the cookie), the session, and how long it lasts.
    pub fn open(
        &self,
        user: AuthenticatedUser,
        token: Option<SecretString>,
        token_expiry: Option<SystemTime>,
    ) -> Result<(String, Arc<Session>, Duration), OpenError> {
        let lasts = lifetime(self.max_age, token_expiry, SystemTime::now()).ok_or(OpenError::Expired)?;
        let id = ids::random().map_err(OpenError::Random)?;
        let csrf = ids::random().map_err(OpenError::Random)?;
        let now = Instant::now();
        let opened = self.opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let session = Arc::new(Session { user, csrf, token, expires: now + lasts, opened });
        let mut open = self.open.lock();
        let same = |s: &Session| s.user.name == session.user.name && s.user.uid == session.user.uid;
        let mut theirs: Vec<(u64, String)> =
            open.iter().filter(|(_, s)| same(s)).map(|(id, s)| (s.opened, id.clone())).collect();
        if theirs.len() >= self.per_user {
            theirs.sort();
            for (_, id) in &theirs[..=theirs.len() - self.per_user] {
                open.remove(id);
            }
        }
        if open.len() >= self.capacity {
            open.retain(|_, s| s.expires > now);
            if open.len() >= self.capacity {
                return Err(OpenError::Full(self.capacity));
            }
        }
        open.insert(id.clone(), session.clone());
        Ok((id, session, lasts))
    }

    /// The session `id` names, unless it has ended.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let mut open = self.open.lock();
        let session = open.get(id)?.clone();
        if session.expires <= Instant::now() {
            open.remove(id);
            return None;
        }
        Some(session)
    }

    /// Sign out.
    pub fn close(&self, id: &str) {
        self.open.lock().remove(id);
    }

    /// How many sessions are open (ended ones included until they are looked at).
    pub fn len(&self) -> usize {
        self.open.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use myownshell_rbac_proxy::AuthMethod;

    use super::*;

    #[test]
    fn a_session_ends_with_its_token() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = Duration::from_secs(3600);
        let cases: &[(&str, Option<SystemTime>, Option<Duration>)] = &[
            ("no expiry", None, Some(hour)),
            ("expires later", Some(now + 2 * hour), Some(hour)),
            ("expires sooner", Some(now + Duration::from_secs(60)), Some(Duration::from_secs(60))),
            ("expires now", Some(now), None),
            ("expired", Some(now - hour), None),
        ];
        for (name, exp, want) in cases {
            assert_eq!(lifetime(hour, *exp, now), *want, "{name}");
        }
    }

    #[test]
    fn sessions_open_close_and_are_bounded() {
        let alice = AuthenticatedUser::new("alice", vec![], AuthMethod::BearerToken);
        let bob = AuthenticatedUser::new("bob", vec![], AuthMethod::BearerToken);
        let sessions = Sessions::new(Duration::from_secs(60), 2, 5);
        let (a, session, _) = sessions.open(alice.clone(), None, None).expect("opens");
        assert_eq!(sessions.get(&a).map(|s| s.user.name.clone()), Some("alice".into()));
        assert_ne!(session.csrf, a, "the CSRF token is not the session id");
        let (b, _, _) = sessions.open(bob.clone(), None, None).expect("opens");
        assert_eq!(
            sessions.open(AuthenticatedUser::new("carol", vec![], AuthMethod::BearerToken), None, None).map(|_| ()),
            Err(OpenError::Full(2))
        );
        sessions.close(&b);
        assert!(sessions.get(&b).is_none());
        assert!(sessions.get("not-an-id").is_none());
        let expired = SystemTime::now() - Duration::from_secs(1);
        assert_eq!(sessions.open(alice, None, Some(expired)).map(|_| ()), Err(OpenError::Expired));
    }

    #[test]
    fn one_user_holds_at_most_their_share_and_loses_their_oldest() {
        let user = |name: &str| AuthenticatedUser::new(name, vec![], AuthMethod::BearerToken);
        let sessions = Sessions::new(Duration::from_secs(60), 100, 3);
        let ids: Vec<String> = (0..10).map(|_| sessions.open(user("mallory"), None, None).expect("opens").0).collect();
        assert_eq!(sessions.len(), 3, "one user's sign-ins never take more than their share");
        assert!(ids[..7].iter().all(|id| sessions.get(id).is_none()), "the oldest went");
        assert!(ids[7..].iter().all(|id| sessions.get(id).is_some()), "the newest stay");
        let (alice, _, _) = sessions.open(user("alice"), None, None).expect("someone else still signs in");
        assert!(sessions.get(&alice).is_some());
    }
}
