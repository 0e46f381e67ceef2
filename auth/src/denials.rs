//! Denied requests (401, 403) in the log without flooding it: each one is logged at debug only,
//! and at info one line per decision and reason sums up every minute that had any, with a count
//! and the first user and path seen. A storm of bad scrapes thus costs a few lines a minute, and
//! the one-off misconfiguration (a scraper without its ClusterRoleBinding) still shows at info.
//!
//! [`Tally`] is the pure bookkeeping (the caller passes the time); [`Denials`] shares one
//! between requests and logs what it hands back. No token is ever given to either.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// How long one summary covers.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Distinct reasons kept per window; more are counted under [`OTHER_REASONS`]. Reasons come
/// from the apiserver and from certificate parsing, so a client must not be able to grow the
/// tally without bound.
const MAX_REASONS: usize = 16;
/// The reason a window counts further denials under once it holds the most distinct reasons it
/// keeps (a reason it already holds keeps its own line).
pub const OTHER_REASONS: &str = "other reasons";

/// Which refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denial {
    /// 401: no, a malformed or a rejected credential.
    Unauthenticated,
    /// 403: authenticated, not authorized.
    Forbidden,
}

impl Denial {
    /// The `decision` field of the log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Denial::Unauthenticated => "unauthenticated",
            Denial::Forbidden => "deny",
        }
    }
}

/// One line of a summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// 401 or 403: the line's `decision`.
    pub denial: Denial,
    /// What failed for a 401, the apiserver's reason for a 403 (often empty), or
    /// [`OTHER_REASONS`].
    pub reason: String,
    /// Denials of this decision and reason in the window.
    pub count: u64,
    /// The first denied user of the window (none for 401s).
    pub user: Option<String>,
    /// The first denied path of the window.
    pub path: String,
}

/// The denials of one window, by decision and reason.
#[derive(Debug, Default)]
pub struct Tally {
    /// When the window began (its first denial); none while nothing is counted.
    since: Option<Instant>,
    lines: BTreeMap<(Denial, String), Line>,
}

impl Tally {
    /// Count one denial at `now`. If that falls after the current window, the window's summary
    /// is returned and a new window starts with this denial.
    pub fn record(
        &mut self,
        denial: Denial,
        reason: &str,
        user: Option<&str>,
        path: &str,
        now: Instant,
    ) -> Option<Vec<Line>> {
        let ended = self.flush(now);
        self.since.get_or_insert(now);
        let full = self.lines.len() >= MAX_REASONS;
        let reason = match full && !self.lines.contains_key(&(denial, reason.to_owned())) {
            true => OTHER_REASONS,
            false => reason,
        };
        let line = self.lines.entry((denial, reason.to_owned())).or_insert_with(|| Line {
            denial,
            reason: reason.to_owned(),
            count: 0,
            user: user.map(str::to_owned),
            path: path.to_owned(),
        });
        line.count += 1;
        ended
    }

    /// The window's summary, if it has ended by `now`.
    pub fn flush(&mut self, now: Instant) -> Option<Vec<Line>> {
        let since = self.since?;
        if now.duration_since(since) < WINDOW {
            return None;
        }
        self.take()
    }

    /// Whatever has been counted, ended or not (at shutdown).
    pub fn take(&mut self) -> Option<Vec<Line>> {
        self.since = None;
        let lines: Vec<Line> = std::mem::take(&mut self.lines).into_values().collect();
        (!lines.is_empty()).then_some(lines)
    }
}

/// A [`Tally`] shared by every request of one auth layer.
#[derive(Debug, Default)]
pub struct Denials {
    tally: Mutex<Tally>,
}

impl Denials {
    /// Log one denial at debug and count it.
    pub fn denied(&self, denial: Denial, reason: &str, user: Option<&str>, verb: &str, path: &str) {
        tracing::debug!(user, verb, path, decision = denial.as_str(), reason, "request denied");
        let ended = self.lock().record(denial, reason, user, path, Instant::now());
        log(ended);
    }

    /// Log a summary each time a window ends, until `shutdown`; then log what is left.
    pub async fn report(&self, shutdown: CancellationToken) {
        // A window's summary comes at most this late when no denial follows it.
        const LOOK_EVERY: Duration = Duration::from_secs(10);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(LOOK_EVERY) => {
                    let ended = self.lock().flush(Instant::now());
                    log(ended);
                }
            }
        }
        let left = self.lock().take();
        log(left);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tally> {
        // The tally holds only counts: one left half-updated by a panic is still fine to use.
        self.tally.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn log(summary: Option<Vec<Line>>) {
    for line in summary.into_iter().flatten() {
        tracing::info!(
            decision = line.denial.as_str(),
            reason = line.reason,
            count = line.count,
            window_seconds = WINDOW.as_secs(),
            first_user = line.user,
            first_path = line.path,
            "requests denied"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What happens at a second: a denial (decision, reason, user, path), or a look from the
    /// reporter; and the summary expected then, as (decision, reason, count, user, path).
    enum Step {
        Deny(u64, Denial, &'static str, Option<&'static str>, &'static str),
        Look(u64),
    }
    type Want = &'static [(Denial, &'static str, u64, Option<&'static str>, &'static str)];

    use Denial::{Forbidden as F, Unauthenticated as U};

    #[test]
    fn summaries() {
        let cases: &[(&str, &[(Step, Want)])] = &[
            (
                "a single denial is summed up once its window ends",
                &[
                    (Step::Deny(0, U, "no bearer token", None, "/metrics"), &[]),
                    (Step::Look(59), &[]),
                    (Step::Look(60), &[(U, "no bearer token", 1, None, "/metrics")]),
                    (Step::Look(200), &[]),
                ],
            ),
            (
                "a storm: one line per reason per window, with the first user and path",
                &[
                    (Step::Deny(0, U, "no bearer token", None, "/metrics"), &[]),
                    (Step::Deny(1, U, "no bearer token", None, "/other"), &[]),
                    (Step::Deny(2, F, "", Some("alice"), "/metrics"), &[]),
                    (Step::Deny(3, F, "", Some("bob"), "/metrics"), &[]),
                    (Step::Deny(30, U, "no bearer token", None, "/x"), &[]),
                    (
                        Step::Deny(61, U, "token rejected by TokenReview", None, "/metrics"),
                        &[(U, "no bearer token", 3, None, "/metrics"), (F, "", 2, Some("alice"), "/metrics")],
                    ),
                    (Step::Look(100), &[]),
                    (Step::Look(121), &[(U, "token rejected by TokenReview", 1, None, "/metrics")]),
                ],
            ),
            (
                "a window starts at its first denial, not on a fixed grid",
                &[
                    (Step::Deny(100, F, "no RBAC", Some("carol"), "/metrics"), &[]),
                    (Step::Look(150), &[]),
                    (Step::Look(161), &[(F, "no RBAC", 1, Some("carol"), "/metrics")]),
                ],
            ),
        ];
        for (what, steps) in cases {
            let start = Instant::now();
            let at = |secs: u64| start + Duration::from_secs(secs);
            let mut tally = Tally::default();
            for (i, (step, want)) in steps.iter().enumerate() {
                let got = match *step {
                    Step::Deny(secs, denial, reason, user, path) => tally.record(denial, reason, user, path, at(secs)),
                    Step::Look(secs) => tally.flush(at(secs)),
                };
                let got: Vec<_> = got
                    .unwrap_or_default()
                    .into_iter()
                    .map(|l| (l.denial, l.reason, l.count, l.user, l.path))
                    .collect();
                let want: Vec<_> = want
                    .iter()
                    .map(|&(d, r, c, u, p)| (d, r.to_owned(), c, u.map(str::to_owned), p.to_owned()))
                    .collect();
                assert_eq!(got, want, "{what}: step {i}");
            }
        }
    }

    #[test]
    fn reasons_beyond_the_limit_are_counted_together() {
        let now = Instant::now();
        let mut tally = Tally::default();
        for i in 0..MAX_REASONS + 5 {
            tally.record(U, &format!("certificate error {i}"), None, "/metrics", now);
        }
        // A reason already kept keeps counting under its own name.
        tally.record(U, "certificate error 0", None, "/metrics", now);
        let lines = tally.take().unwrap_or_default();
        assert_eq!(lines.len(), MAX_REASONS + 1);
        let count = |reason: &str| lines.iter().find(|l| l.reason == reason).map(|l| l.count);
        assert_eq!(count("certificate error 0"), Some(2));
        assert_eq!(count(OTHER_REASONS), Some(5));
        assert_eq!(lines.iter().map(|l| l.count).sum::<u64>(), MAX_REASONS as u64 + 6);
    }

    #[test]
    fn take_returns_an_unfinished_window_once() {
        let now = Instant::now();
        let mut tally = Tally::default();
        assert_eq!(tally.take(), None);
        tally.record(F, "", Some("dave"), "/metrics", now);
        assert_eq!(tally.take().map(|l| l.len()), Some(1));
        assert_eq!(tally.take(), None);
    }
}
