//! Who is signed in: the browser sessions the cookie names.
//!
//! A session holds the user exactly as the cluster authenticated them, a CSRF token for
//! requests that change something, and when it ends: after `--session-max-age`, or when the
//! token it was opened with expires (its `exp`), whichever is first. The token itself is kept
//! (never logged) so that each new terminal asks TokenReview again: a token revoked or a service
//! account deleted opens no new terminal after the authentication cache's lifetime.
//!
//! The cookie carries the session sealed ([`super::seal`], under the key every replica shares),
//! so that a page whose replica goes away (a rollout, a node drain) is still signed in on the
//! next one, which takes the session up from the cookie. Each replica keeps the sessions it has
//! seen, at most `per_user` for one user (signing in once more ends their oldest) and
//! `capacity` in all, and the ids it has ended (signed out, or ended for a newer one), which it
//! never takes up again. A sign-out reaches the other replicas through the shared record of
//! sign-outs (`super::signed_out`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use myownshell_auth::AuthenticatedUser;
use parking_lot::Mutex;
use secrecy::{ExposeSecret, SecretString};

use super::seal::{Sealed, SealedUser, Sealer};
use crate::ids;

/// One signed-in browser.
#[derive(Debug)]
pub struct Session {
    /// Its id (inside its cookie).
    pub id: String,
    /// Who signed in.
    pub user: AuthenticatedUser,
    /// Sent back in `X-CSRF-Token` with every request that changes something.
    pub csrf: String,
    /// The token the user signed in with; `None` for an authenticating proxy's headers. For a
    /// sign-in through the identity provider, its latest ID token.
    pub token: Option<SecretString>,
    /// The identity provider's refresh token, when the sign-in got one (`super::refresh`).
    pub refresh: Option<SecretString>,
    /// When it ends.
    pub expires: Instant,
    /// The order this replica took it in (a user over their limit loses their oldest).
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
    /// The operating system gave no random bytes, or the session could not be sealed.
    #[error("no session could be made: {0}")]
    Random(String),
}

/// The most ended ids a replica remembers (each until its session would have ended).
const MAX_ENDED: usize = 100_000;

/// The open sessions.
#[derive(Debug)]
pub struct Sessions {
    open: Mutex<HashMap<String, Arc<Session>>>,
    /// The sessions whose sign-in is being renewed (`super::refresh`): one renewal at a time.
    renewing: Mutex<std::collections::HashSet<String>>,
    ended: Mutex<HashMap<String, Instant>>,
    /// The sessions signed out on any replica, by fingerprint (`super::signed_out`).
    signed_out: Mutex<std::collections::HashSet<String>>,
    sealer: Sealer,
    max_age: Duration,
    capacity: usize,
    per_user: usize,
    opened: AtomicU64,
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
    /// Sessions sealed by `sealer` that last at most `max_age`, at most `capacity` at once and
    /// `per_user` for one user (name and uid): a user who signs in once more than that loses
    /// their oldest session, so that one token cannot fill the gateway (10,000 sign-ins with one
    /// token once left every other user a 503).
    pub fn new(sealer: Sealer, max_age: Duration, capacity: usize, per_user: usize) -> Self {
        Self {
            open: Mutex::new(HashMap::new()),
            renewing: Mutex::default(),
            ended: Mutex::new(HashMap::new()),
            signed_out: Mutex::default(),
            sealer,
            max_age,
            capacity,
            per_user: per_user.max(1),
            opened: AtomicU64::new(0),
        }
    }

    /// Open a session for `user`: its cookie's value, the session, and how long it lasts. With
    /// a `refresh` token it lasts `max_age` whatever the token's expiry (it is renewed).
    pub fn open(
        &self,
        user: AuthenticatedUser,
        token: Option<SecretString>,
        token_expiry: Option<SystemTime>,
        refresh: Option<SecretString>,
    ) -> Result<(String, Arc<Session>, Duration), OpenError> {
        let token_expiry = if refresh.is_some() { None } else { token_expiry };
        let lasts = lifetime(self.max_age, token_expiry, SystemTime::now()).ok_or(OpenError::Expired)?;
        let id = ids::random().map_err(OpenError::Random)?;
        let csrf = ids::random().map_err(OpenError::Random)?;
        let session = Session { id, user, csrf, token, refresh, expires: Instant::now() + lasts, opened: 0 };
        let (cookie, _) = self.seal(&session)?;
        let session = self.keep(session, lasts)?;
        Ok((cookie, session, lasts))
    }

    /// `session` as its cookie's value, and how long it has left.
    pub fn seal(&self, session: &Session) -> Result<(String, Duration), OpenError> {
        let lasts = session.expires.saturating_duration_since(Instant::now());
        let ends_at = SystemTime::now() + lasts;
        let secret = |s: &Option<SecretString>| s.as_ref().map(|t| t.expose_secret().to_owned());
        let sealed = Sealed {
            id: session.id.clone(),
            csrf: session.csrf.clone(),
            user: SealedUser::of(&session.user),
            token: secret(&session.token),
            refresh: secret(&session.refresh),
            expires: ends_at.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        };
        Ok((self.sealer.seal(&sealed).map_err(OpenError::Random)?, lasts))
    }

    /// The session with a renewed sign-in (a new ID token, and the refresh token that goes
    /// with it), in place of `session`: the same id, CSRF token and end.
    pub fn renew(
        &self,
        session: &Session,
        user: AuthenticatedUser,
        token: SecretString,
        refresh: Option<SecretString>,
    ) -> Arc<Session> {
        let renewed = Arc::new(Session {
            id: session.id.clone(),
            user,
            csrf: session.csrf.clone(),
            token: Some(token),
            refresh,
            expires: session.expires,
            opened: session.opened,
        });
        self.open.lock().insert(session.id.clone(), renewed.clone());
        renewed
    }

    /// Keep a session this replica opened or takes up (its end `lasts` from now), within the
    /// limits.
    fn keep(&self, session: Session, lasts: Duration) -> Result<Arc<Session>, OpenError> {
        let now = Instant::now();
        let opened = self.opened.fetch_add(1, Ordering::Relaxed);
        let id = session.id.clone();
        let session = Arc::new(Session { expires: now + lasts, opened, ..session });
        let mut open = self.open.lock();
        let same = |s: &Session| s.user.name == session.user.name && s.user.uid == session.user.uid;
        let mut theirs: Vec<(u64, String)> =
            open.iter().filter(|(_, s)| same(s)).map(|(id, s)| (s.opened, id.clone())).collect();
        if theirs.len() >= self.per_user {
            theirs.sort();
            for (_, id) in &theirs[..=theirs.len() - self.per_user] {
                if let Some(gone) = open.remove(id) {
                    self.end(id, gone.expires);
                }
            }
        }
        if open.len() >= self.capacity {
            open.retain(|_, s| s.expires > now);
            if open.len() >= self.capacity {
                return Err(OpenError::Full(self.capacity));
            }
        }
        open.insert(id, session.clone());
        Ok(session)
    }

    /// Remember that `id` ended, until `until`.
    fn end(&self, id: &str, until: Instant) {
        let mut ended = self.ended.lock();
        if ended.len() >= MAX_ENDED {
            let now = Instant::now();
            ended.retain(|_, t| *t > now);
        }
        if ended.len() < MAX_ENDED {
            ended.insert(id.to_owned(), until);
        }
    }

    /// The session `cookie` holds, unless it has ended: this replica's, or taken up from the
    /// cookie (another replica opened it).
    pub fn get(&self, cookie: &str) -> Option<Arc<Session>> {
        let sealed: Sealed = self.sealer.open(cookie)?;
        let now = SystemTime::now();
        let left = (SystemTime::UNIX_EPOCH + Duration::from_secs(sealed.expires)).duration_since(now).ok()?;
        if self.ended.lock().contains_key(&sealed.id) {
            return None;
        }
        let signed_out = {
            let signed_out = self.signed_out.lock();
            !signed_out.is_empty() && signed_out.contains(&super::signed_out::fingerprint(&sealed.id))
        };
        if signed_out {
            self.open.lock().remove(&sealed.id);
            return None;
        }
        let known = self.open.lock().get(&sealed.id).cloned();
        match known {
            Some(session) if session.expires > Instant::now() => Some(session),
            Some(_) => {
                self.open.lock().remove(&sealed.id);
                None
            }
            None => {
                let session = Session {
                    id: sealed.id,
                    user: sealed.user.user(),
                    csrf: sealed.csrf,
                    token: sealed.token.map(SecretString::from),
                    refresh: sealed.refresh.map(SecretString::from),
                    expires: Instant::now() + left,
                    opened: 0,
                };
                self.keep(session, left).ok()
            }
        }
    }

    /// Whether this request may renew `id`'s sign-in: no other one is at it.
    pub fn start_renewal(&self, id: &str) -> bool {
        self.renewing.lock().insert(id.to_owned())
    }

    /// The renewal of `id` is over.
    pub fn end_renewal(&self, id: &str) {
        self.renewing.lock().remove(id);
    }

    /// Sign out (this replica forgets it, and never takes it up again).
    pub fn close(&self, id: &str) {
        let gone = self.open.lock().remove(id);
        let until = gone.map_or_else(|| Instant::now() + self.max_age, |s| s.expires);
        self.end(id, until);
    }

    /// The sessions signed out on any replica (`super::signed_out`), by fingerprint: none of
    /// them is taken up again here.
    pub fn signed_out(&self, fingerprints: std::collections::HashSet<String>) {
        *self.signed_out.lock() = fingerprints;
    }

    /// How long a session lasts at most (`--session-max-age`).
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// When the session `id` ends, if this replica holds it.
    pub fn ends(&self, id: &str) -> Option<SystemTime> {
        let session = self.open.lock().get(id).cloned()?;
        Some(SystemTime::now() + session.expires.saturating_duration_since(Instant::now()))
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
    use myownshell_auth::AuthMethod;

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

    fn sealer() -> Sealer {
        Sealer::new(&[3; 32]).expect("a key")
    }

    #[test]
    fn another_replica_takes_a_session_up_from_its_cookie_and_a_signed_out_one_never() {
        let alice = AuthenticatedUser::new("alice", vec!["devs".into()], AuthMethod::BearerToken);
        let (first, second) = (
            Sessions::new(sealer(), Duration::from_secs(60), 10, 5),
            Sessions::new(sealer(), Duration::from_secs(60), 10, 5),
        );
        let (cookie, session, _) = first.open(alice, Some(SecretString::from("tok")), None, None).expect("opens");
        let taken = second.get(&cookie).expect("the other replica takes it up");
        assert_eq!((taken.id.as_str(), taken.csrf.as_str()), (session.id.as_str(), session.csrf.as_str()));
        assert_eq!(taken.user.groups, ["devs"]);
        assert_eq!(taken.token.as_ref().map(|t| t.expose_secret().to_owned()), Some("tok".into()));
        second.close(&taken.id);
        assert!(second.get(&cookie).is_none(), "signed out here: never taken up again");
        let elsewhere = Sessions::new(Sealer::new(&[4; 32]).expect("a key"), Duration::from_secs(60), 10, 5);
        assert!(elsewhere.get(&cookie).is_none(), "another key: no session");
    }

    #[test]
    fn sessions_open_close_and_are_bounded() {
        let alice = AuthenticatedUser::new("alice", vec![], AuthMethod::BearerToken);
        let bob = AuthenticatedUser::new("bob", vec![], AuthMethod::BearerToken);
        let sessions = Sessions::new(sealer(), Duration::from_secs(60), 2, 5);
        let (a, session, _) = sessions.open(alice.clone(), None, None, None).expect("opens");
        assert_eq!(sessions.get(&a).map(|s| s.user.name.clone()), Some("alice".into()));
        assert_ne!(session.csrf, session.id, "the CSRF token is not the session id");
        let (b, bobs, _) = sessions.open(bob.clone(), None, None, None).expect("opens");
        assert_eq!(
            sessions
                .open(AuthenticatedUser::new("carol", vec![], AuthMethod::BearerToken), None, None, None)
                .map(|_| ()),
            Err(OpenError::Full(2))
        );
        sessions.close(&bobs.id);
        assert!(sessions.get(&b).is_none());
        assert!(sessions.get("not-an-id").is_none());
        let expired = SystemTime::now() - Duration::from_secs(1);
        assert_eq!(sessions.open(alice.clone(), None, Some(expired), None).map(|_| ()), Err(OpenError::Expired));
        // With a refresh token the session outlives its first token: it is renewed.
        let refresh = Some(SecretString::from("r"));
        let (_, renewable, lasts) = sessions.open(alice, None, Some(expired), refresh).expect("opens");
        assert_eq!((lasts, renewable.refresh.is_some()), (Duration::from_secs(60), true));
    }

    #[test]
    fn one_user_holds_at_most_their_share_and_loses_their_oldest() {
        let user = |name: &str| AuthenticatedUser::new(name, vec![], AuthMethod::BearerToken);
        let sessions = Sessions::new(sealer(), Duration::from_secs(60), 100, 3);
        let ids: Vec<String> =
            (0..10).map(|_| sessions.open(user("mallory"), None, None, None).expect("opens").0).collect();
        assert_eq!(sessions.len(), 3, "one user's sign-ins never take more than their share");
        assert!(ids[..7].iter().all(|id| sessions.get(id).is_none()), "the oldest went");
        assert!(ids[7..].iter().all(|id| sessions.get(id).is_some()), "the newest stay");
        let (alice, _, _) = sessions.open(user("alice"), None, None, None).expect("someone else still signs in");
        assert!(sessions.get(&alice).is_some());
    }
}
