//! When a shell runs and when it stops, as a pure function of its spec, its status and the time
//! ([`plan`]). Every deadline is computed from stored times (`status.startedAt`,
//! `status.lastConnection`, `status.stopped`, `spec.lifetime.extendedUntil` and `restartedAt`),
//! never from a timer the process keeps, so a controller restart or a change of leader neither
//! loses a stop nor repeats one: the next reconcile computes the same answer, and the reconcile
//! asks to be woken at the next deadline ([`Plan::wake_at`]).
//!
//! What counts as activity is a *new connection* (exec, attach, port-forward, cp, debug), as the
//! webhook records it in `status.lastConnection`: a connection that stays open is not activity
//! (the idle clock cannot see inside a session), so `idleTimeout` should be longer than a
//! session is expected to sit quietly; `maxRunTime` ignores activity altogether.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, MyOwnShellStatus, NextStop, Stop};
use myownshell_runtime::time::{format_duration, minus, plus, second_of, to_second as time};

/// How long ahead the end of an approval is warned of in a shell whose lifetime sets no
/// `warnBefore`: long enough to finish a command and ask an approver again.
pub const APPROVAL_WARNING: Duration = Duration::from_secs(300);

/// What the shell should be now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// `size` pods, running since `started_at`.
    Running {
        /// When this run began.
        started_at: Timestamp,
    },
    /// `size` is 0: the owner paused it (no clocks run).
    Paused,
    /// No pods: stopped by its lifetime or on request.
    Stopped(Stop),
}

/// Something the lifetime did, to be told in an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happening {
    /// The pods start (again).
    Started,
    /// A stop is due within `warnBefore`.
    StoppingSoon(NextStop),
    /// The shell stopped.
    Stopped(Stop),
}

/// What a reconcile does about the shell's lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// What the shell is now.
    pub phase: Phase,
    /// The next stop its lifetime has in store (running shells with a lifetime).
    pub next_stop: Option<NextStop>,
    /// What happened in this reconcile, for the Events.
    pub happenings: Vec<Happening>,
    /// When to look again (the next warning, stop or deletion).
    pub wake_at: Option<Timestamp>,
    /// The shell has been stopped longer than `deletePausedAfter`: delete it.
    pub delete: bool,
}

impl Plan {
    /// The pods the Deployment should run.
    pub fn replicas(&self, size: i32) -> i32 {
        match self.phase {
            Phase::Running { .. } => size,
            Phase::Paused | Phase::Stopped(_) => 0,
        }
    }

    /// Whether this reconcile stops or starts the shell: its own Event (`Stopped`, `Started`)
    /// tells the change of replicas.
    pub fn starts_or_stops(&self) -> bool {
        self.happenings.iter().any(|h| matches!(h, Happening::Started | Happening::Stopped(_)))
    }

    /// This plan for a shell held at no pods by something outside its lifetime (its namespace
    /// not opened to shells): a running shell is paused (its clocks stop, so nobody's absence is
    /// counted against it; they start afresh when it runs again), a stopped one stays stopped
    /// but is never deleted meanwhile (`deletePausedAfter` waits), and nothing is woken for.
    pub fn held(self) -> Plan {
        // A stop the clocks make now (they ran on while nobody could connect) is no stop.
        let clocked = |h: &Happening| matches!(h, Happening::Stopped(s) if s.reason != reasons::REQUESTED);
        let stopped_by_clocks = self.happenings.iter().any(clocked);
        let phase = match self.phase {
            Phase::Running { .. } => Phase::Paused,
            Phase::Stopped(_) if stopped_by_clocks => Phase::Paused,
            other => other,
        };
        let happenings =
            self.happenings.into_iter().filter(|h| !matches!(h, Happening::Started) && !clocked(h)).collect();
        Plan { phase, next_stop: None, happenings, wake_at: None, delete: false }
    }

    /// `status.state`.
    pub fn state(&self) -> &'static str {
        match self.phase {
            Phase::Running { .. } => "Running",
            Phase::Paused => "Paused",
            Phase::Stopped(_) => "Stopped",
        }
    }
}

/// A `lifetime` duration as written in the spec (`40s`, `1h30m`); the webhook refuses what does
/// not parse, so one that does not (written while the webhook was away) counts as unset.
pub fn duration(text: Option<&str>) -> Option<Duration> {
    text.and_then(|t| myownshell_runtime::time::parse_duration(t).ok())
}

/// The stop the running shell's lifetime has in store: the earliest of the idle and the run-time
/// deadline, neither before `extendedUntil`, and the end of its approval (`approved_until`, which
/// `extend` does not push back: an approval is a second person's word, not the owner's).
fn next_stop(
    shell: &MyOwnShell,
    status: &MyOwnShellStatus,
    started_at: Timestamp,
    approved_until: Option<Timestamp>,
) -> Option<(Timestamp, &'static str)> {
    let approval = approved_until.map(|at| (at, reasons::APPROVAL_EXPIRED));
    let lifetime = shell.spec.lifetime.clone().unwrap_or_default();
    let last_connection = status.last_connection.as_ref().map(|c| c.time.0);
    let active_since = last_connection.map_or(started_at, |c| c.max(started_at));
    let extended = lifetime.extended_until.as_ref().map(|t| t.0);
    let hold = |at: Timestamp| extended.map_or(at, |e| at.max(e));
    let idle = duration(lifetime.idle_timeout.as_deref()).map(|d| (hold(plus(active_since, d)), reasons::IDLE));
    let run = duration(lifetime.max_run_time.as_deref()).map(|d| (hold(plus(started_at, d)), reasons::MAX_RUN_TIME));
    // The earliest; at the same second, the run time before idleness before the approval.
    [run, idle, approval].into_iter().flatten().fold(None, |earliest: Option<(Timestamp, &'static str)>, next| {
        match earliest {
            Some(e) if e.0 <= next.0 => Some(e),
            _ => Some(next),
        }
    })
}

/// Why a stop happened, in words.
fn stop_message(shell: &MyOwnShell, reason: &str) -> String {
    let lifetime = shell.spec.lifetime.clone().unwrap_or_default();
    let name = shell.metadata.name.as_deref().unwrap_or_default();
    let limit = |d: Option<&str>| duration(d).map(format_duration).unwrap_or_default();
    let why = match reason {
        r if r == reasons::IDLE => format!("no new connection for {}", limit(lifetime.idle_timeout.as_deref())),
        r if r == reasons::MAX_RUN_TIME => format!("ran for {}", limit(lifetime.max_run_time.as_deref())),
        r if r == reasons::APPROVAL_EXPIRED => {
            return format!(
                "its approval ran out; once approved again (kubectl myownshell approve {name}), `kubectl myownshell \
                 start {name}` brings its pods back"
            );
        }
        _ => "stopped on request (spec.stopped)".to_owned(),
    };
    format!("{why}; `kubectl myownshell start {name}` brings its pods back")
}

/// The plan for `shell` at `now`, given its latest known `status` (which may be newer than the
/// copy in `shell`: a status just written whose echo has not arrived).
pub fn plan(shell: &MyOwnShell, status: Option<&MyOwnShellStatus>, now: Timestamp) -> Plan {
    plan_approved(shell, status, now, None)
}

/// [`plan`] for a shell approved until `approved_until` (its class asks for approval): it stops
/// then, warned `warnBefore` ahead like any lifetime stop.
pub fn plan_approved(
    shell: &MyOwnShell,
    status: Option<&MyOwnShellStatus>,
    now: Timestamp,
    approved_until: Option<Timestamp>,
) -> Plan {
    let status = status.cloned().unwrap_or_default();
    let lifetime = shell.spec.lifetime.clone().unwrap_or_default();
    let restarted_at = lifetime.restarted_at.as_ref().map(|t| t.0);
    let was_running = status.state.as_deref() == Some("Running");
    let mut happenings = Vec::new();

    if let Some(stop) = stop_in_force(shell, &status, restarted_at, now) {
        return stopped(shell, &status, stop, was_running, now, happenings);
    }
    if shell.spec.size == Some(0) {
        return Plan { phase: Phase::Paused, next_stop: None, happenings, wake_at: None, delete: false };
    }

    // Running: since when. A run that goes on keeps its start (brought forward by a `start`
    // while running, which restarts the clocks); anything else starts now.
    let started_at = match (was_running, status.started_at.as_ref().map(|t| t.0)) {
        (true, Some(since)) => restarted_at.map_or(since, |r| since.max(r.min(now))),
        _ => {
            if status.state.is_some() {
                happenings.push(Happening::Started);
            }
            second_of(now)
        }
    };
    let Some((at, reason)) = next_stop(shell, &status, started_at, approved_until) else {
        return Plan {
            phase: Phase::Running { started_at },
            next_stop: None,
            happenings,
            wake_at: None,
            delete: false,
        };
    };
    if now >= at {
        let stop = Stop { reason: reason.to_owned(), at: time(now), message: stop_message(shell, reason) };
        return stopped(shell, &status, stop, true, now, happenings);
    }
    // An approval's end is warned of even in a shell with no `warnBefore`: it comes from a
    // class's rule, not from a lifetime its owner chose.
    let warn_before =
        duration(lifetime.warn_before.as_deref()).or((reason == reasons::APPROVAL_EXPIRED).then_some(APPROVAL_WARNING));
    let warn_from = warn_before.map(|w| minus(at, w));
    let already_warned = status
        .next_stop
        .as_ref()
        .is_some_and(|n| n.warned && n.at.0.as_second() == at.as_second() && n.reason == reason);
    let warn_now = warn_from.is_some_and(|w| now >= w) && !already_warned;
    let next = NextStop { at: time(at), reason: reason.to_owned(), warned: already_warned || warn_now };
    if warn_now {
        happenings.push(Happening::StoppingSoon(next.clone()));
    }
    let wake_at = match warn_from {
        Some(w) if !next.warned => w,
        _ => at,
    };
    Plan {
        phase: Phase::Running { started_at },
        next_stop: Some(next),
        happenings,
        wake_at: Some(wake_at),
        delete: false,
    }
}

/// The stop that holds the shell now, if one does: the owner's `spec.stopped` (kept from the
/// status while they ask, so its time does not move), or a lifetime stop until a start after it.
fn stop_in_force(
    shell: &MyOwnShell,
    status: &MyOwnShellStatus,
    restarted_at: Option<Timestamp>,
    now: Timestamp,
) -> Option<Stop> {
    let held_stop = status.stopped.clone().filter(|stop| match stop.reason.as_str() {
        // A stop the owner asked for holds while they ask; a lifetime stop until they start
        // the shell again after it.
        r if r == reasons::REQUESTED => shell.spec.stopped == Some(true),
        // Both times are to the second: a start in the second of the stop comes after it.
        _ => restarted_at.is_none_or(|r| r < stop.at.0),
    });
    match (shell.spec.stopped == Some(true), held_stop) {
        (true, Some(stop)) if stop.reason == reasons::REQUESTED => Some(stop),
        (true, _) => Some(Stop {
            reason: reasons::REQUESTED.to_owned(),
            at: time(now),
            message: stop_message(shell, reasons::REQUESTED),
        }),
        (false, held) => held,
    }
}

/// The plan of a stopped shell: deleted once stopped longer than `deletePausedAfter`.
fn stopped(
    shell: &MyOwnShell,
    status: &MyOwnShellStatus,
    stop: Stop,
    was_running: bool,
    now: Timestamp,
    mut happenings: Vec<Happening>,
) -> Plan {
    let previous = status.stopped.as_ref();
    if was_running || previous != Some(&stop) && previous.is_none_or(|p| p.reason != stop.reason) {
        happenings.push(Happening::Stopped(stop.clone()));
    }
    let lifetime = shell.spec.lifetime.clone().unwrap_or_default();
    let delete_at = duration(lifetime.delete_paused_after.as_deref()).map(|d| plus(stop.at.0, d));
    let delete = delete_at.is_some_and(|d| now >= d);
    Plan { phase: Phase::Stopped(stop), next_stop: None, happenings, wake_at: delete_at.filter(|_| !delete), delete }
}

/// How long until `wake_at`, from `now` (at least a second: the clock has a second's grain).
pub fn until(wake_at: Timestamp, now: Timestamp) -> Duration {
    let d = wake_at.duration_since(now);
    Duration::try_from(d).unwrap_or_default().max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use myownshell_api::{Connection, Lifetime, MyOwnShellSpec};

    use super::*;

    const T0: i64 = 1_800_000_000;

    fn plan_of(shell: &MyOwnShell, now: Timestamp) -> Plan {
        plan(shell, shell.status.as_ref(), now)
    }

    fn at(offset: i64) -> Timestamp {
        Timestamp::from_second(T0 + offset).unwrap()
    }

    fn lifetime(idle: Option<&str>, run: Option<&str>, warn: Option<&str>) -> Lifetime {
        Lifetime {
            idle_timeout: idle.map(Into::into),
            max_run_time: run.map(Into::into),
            warn_before: warn.map(Into::into),
            ..Lifetime::default()
        }
    }

    fn shell(lifetime: Option<Lifetime>, status: Option<MyOwnShellStatus>) -> MyOwnShell {
        let mut s = MyOwnShell::new("web", MyOwnShellSpec { size: Some(2), lifetime, ..MyOwnShellSpec::default() });
        s.status = status;
        s
    }

    fn running_since(offset: i64) -> MyOwnShellStatus {
        MyOwnShellStatus {
            state: Some("Running".into()),
            started_at: Some(time(at(offset))),
            ..MyOwnShellStatus::default()
        }
    }

    fn connected_at(mut status: MyOwnShellStatus, offset: i64) -> MyOwnShellStatus {
        status.last_connection =
            Some(Connection { user: "alice".into(), time: time(at(offset)), pod: "web-1".into(), kind: "exec".into() });
        status
    }

    /// An approval's end is a stop like the others: warned `warnBefore` ahead, the earliest of
    /// the deadlines, and not pushed back by `extend` (a second person's word, not the owner's).
    #[test]
    fn an_approval_ends_like_a_lifetime_stop_and_extend_does_not_push_it() {
        let mut extended = lifetime(Some("1h"), None, Some("5m"));
        extended.extended_until = Some(time(at(10 * 3600)));
        let cases = [
            ("approved for an hour, no lifetime", shell(None, Some(running_since(0))), 3600, 600, None),
            ("within its warning", shell(None, Some(running_since(0))), 600, 400, Some(reasons::APPROVAL_EXPIRED)),
            (
                "idle comes first",
                shell(Some(lifetime(Some("5m"), None, Some("1m"))), Some(running_since(0))),
                3600,
                250,
                Some(reasons::IDLE),
            ),
            (
                "extended, the approval still ends",
                shell(Some(extended), Some(running_since(0))),
                1800,
                1600,
                Some(reasons::APPROVAL_EXPIRED),
            ),
        ];
        for (what, shell, until, now, warned) in cases {
            let plan = plan_approved(&shell, shell.status.as_ref(), at(now), Some(at(until)));
            let next = plan.next_stop.clone().unwrap_or_else(|| panic!("{what}: no next stop"));
            match warned {
                Some(reason) => {
                    assert_eq!(next.reason, reason, "{what}");
                    if reason == reasons::APPROVAL_EXPIRED {
                        assert_eq!(next.at.0, at(until), "{what}");
                        assert!(next.warned, "{what}: warned");
                    }
                }
                None => assert!(!next.warned && next.reason == reasons::APPROVAL_EXPIRED, "{what}: {next:?}"),
            }
        }
    }

    /// (what, shell, now, phase kind, next stop (offset, reason, warned), happenings, wake offset)
    #[test]
    fn the_lifetime_table() {
        let l = |i, r, w| Some(lifetime(i, r, w));
        type Case = (
            &'static str,
            MyOwnShell,
            i64,
            &'static str,
            Option<(i64, &'static str, bool)>,
            Vec<&'static str>,
            Option<i64>,
        );
        let cases: Vec<Case> = vec![
            ("no lifetime: runs", shell(None, Some(running_since(0))), 10_000, "Running", None, vec![], None),
            (
                "a new shell starts now",
                shell(l(Some("30m"), None, None), None),
                5,
                "Running",
                Some((5 + 1800, "Idle", false)),
                vec![],
                Some(5 + 1800),
            ),
            (
                "idle, counted from the start",
                shell(l(Some("30m"), None, None), Some(running_since(0))),
                100,
                "Running",
                Some((1800, "Idle", false)),
                vec![],
                Some(1800),
            ),
            (
                "idle, counted from the last connection",
                shell(l(Some("30m"), None, None), Some(connected_at(running_since(0), 600))),
                700,
                "Running",
                Some((2400, "Idle", false)),
                vec![],
                Some(2400),
            ),
            (
                "a connection from before the start does not count",
                shell(l(Some("30m"), None, None), Some(connected_at(running_since(600), 100))),
                700,
                "Running",
                Some((2400, "Idle", false)),
                vec![],
                Some(2400),
            ),
            (
                "the warning's time",
                shell(l(Some("30m"), None, Some("5m")), Some(running_since(0))),
                100,
                "Running",
                Some((1800, "Idle", false)),
                vec![],
                Some(1500),
            ),
            (
                "warned, once",
                shell(l(Some("30m"), None, Some("5m")), Some(running_since(0))),
                1500,
                "Running",
                Some((1800, "Idle", true)),
                vec!["StoppingSoon"],
                Some(1800),
            ),
            (
                "the stop",
                shell(l(Some("30m"), None, Some("5m")), Some(running_since(0))),
                1800,
                "Stopped",
                None,
                vec!["Stopped"],
                None,
            ),
            (
                "max run time, busy or not",
                shell(l(Some("30m"), Some("1h"), None), Some(connected_at(running_since(0), 3500))),
                3600,
                "Stopped",
                None,
                vec!["Stopped"],
                None,
            ),
            (
                "the earlier of the two",
                shell(l(Some("30m"), Some("20m"), None), Some(running_since(0))),
                10,
                "Running",
                Some((1200, "MaxRunTime", false)),
                vec![],
                Some(1200),
            ),
            (
                "paused by the owner: no clocks",
                {
                    let mut s = shell(l(Some("30m"), None, None), Some(running_since(0)));
                    s.spec.size = Some(0);
                    s
                },
                99_999,
                "Paused",
                None,
                vec![],
                None,
            ),
        ];
        for (what, shell, now, phase, next, happenings, wake) in cases {
            let plan = plan_of(&shell, at(now));
            assert_eq!(plan.state(), phase, "{what}");
            let got_next = plan.next_stop.as_ref().map(|n| (n.at.0.as_second() - T0, n.reason.as_str(), n.warned));
            assert_eq!(got_next, next, "{what}");
            let got: Vec<&str> = plan
                .happenings
                .iter()
                .map(|h| match h {
                    Happening::Started => "Started",
                    Happening::StoppingSoon(_) => "StoppingSoon",
                    Happening::Stopped(_) => "Stopped",
                })
                .collect();
            assert_eq!(got, happenings, "{what}");
            assert_eq!(plan.wake_at.map(|w| w.as_second() - T0), wake, "{what}");
        }
    }

    #[test]
    fn a_warning_is_given_once_and_an_extension_moves_the_stop() {
        let mut status = running_since(0);
        status.next_stop = Some(NextStop { at: time(at(1800)), reason: "Idle".into(), warned: true });
        let warned = shell(Some(lifetime(Some("30m"), None, Some("5m"))), Some(status));
        let again = plan_of(&warned, at(1600));
        assert!(again.happenings.is_empty(), "not warned twice for the same stop");
        assert_eq!(again.wake_at, Some(at(1800)));

        let mut extended = warned.clone();
        extended.spec.lifetime.as_mut().unwrap().extended_until = Some(time(at(5000)));
        let later = plan_of(&extended, at(1600));
        let next = later.next_stop.unwrap();
        assert_eq!((next.at.0, next.warned), (at(5000), false), "a new stop, not warned for yet");
        assert_eq!(later.wake_at, Some(at(4700)), "the new warning's time");
        assert_eq!(later.phase, Phase::Running { started_at: at(0) }, "extending changes nothing that runs");
    }

    #[test]
    fn a_stop_holds_until_a_start_after_it_and_a_restart_of_the_controller_changes_nothing() {
        let stop = Stop { reason: "Idle".into(), at: time(at(1800)), message: String::new() };
        let status = MyOwnShellStatus {
            state: Some("Stopped".into()),
            stopped: Some(stop.clone()),
            ..MyOwnShellStatus::default()
        };
        let stopped = shell(Some(lifetime(Some("30m"), None, None)), Some(status));
        let seen_again = plan_of(&stopped, at(5000));
        assert_eq!(
            (seen_again.phase.clone(), seen_again.happenings.clone()),
            (Phase::Stopped(stop.clone()), vec![]),
            "no second stop"
        );
        assert_eq!(seen_again.replicas(2), 0);

        let mut started = stopped.clone();
        started.spec.lifetime.as_mut().unwrap().restarted_at = Some(time(at(4000)));
        let resumed = plan_of(&started, at(4001));
        assert_eq!(resumed.phase, Phase::Running { started_at: at(4001) }, "the clocks restart");
        assert_eq!(resumed.happenings, vec![Happening::Started]);
        assert_eq!(resumed.replicas(2), 2, "spec.size pods come back");
        assert_eq!(resumed.next_stop.map(|n| n.at.0), Some(at(4001 + 1800)));

        let mut same_second = stopped.clone();
        same_second.spec.lifetime.as_mut().unwrap().restarted_at = Some(time(at(1800)));
        assert_eq!(plan_of(&same_second, at(1800)).state(), "Running", "a start in the second of the stop");

        let mut before = stopped.clone();
        before.spec.lifetime.as_mut().unwrap().restarted_at = Some(time(at(1000)));
        assert_eq!(plan_of(&before, at(5000)).state(), "Stopped", "a start from before the stop does not undo it");
    }

    #[test]
    fn stop_on_request_and_deletion_after_a_long_stop() {
        let mut asked = shell(None, Some(running_since(0)));
        asked.spec.stopped = Some(true);
        let stop = plan_of(&asked, at(100));
        assert_eq!(stop.state(), "Stopped");
        assert_eq!(stop.happenings.len(), 1);
        let Phase::Stopped(s) = &stop.phase else { panic!() };
        assert_eq!((s.reason.as_str(), s.at.0), ("Requested", at(100)));

        let mut kept = asked.clone();
        kept.status = Some(MyOwnShellStatus {
            state: Some("Stopped".into()),
            stopped: Some(s.clone()),
            ..MyOwnShellStatus::default()
        });
        kept.spec.lifetime = Some(Lifetime { delete_paused_after: Some("1h".into()), ..Lifetime::default() });
        let waiting = plan_of(&kept, at(200));
        assert_eq!((waiting.delete, waiting.wake_at, waiting.happenings.len()), (false, Some(at(3700)), 0));
        assert!(plan_of(&kept, at(3700)).delete, "stopped an hour: deleted");

        kept.spec.stopped = Some(false);
        assert_eq!(plan_of(&kept, at(300)).state(), "Running", "no longer asked: runs");
    }

    #[test]
    fn a_held_shell_has_no_clocks_and_is_never_deleted() {
        let idle = Some(lifetime(Some("1m"), Some("1h"), None));
        let stopped_long = MyOwnShellStatus {
            state: Some("Stopped".into()),
            stopped: Some(Stop { reason: "Idle".into(), at: time(at(0)), message: String::new() }),
            ..MyOwnShellStatus::default()
        };
        let mut deletable = shell(idle.clone(), Some(stopped_long));
        deletable.spec.lifetime.as_mut().unwrap().delete_paused_after = Some("1h".into());
        // (what, shell, at, state, delete, wake_at)
        type Case = (&'static str, MyOwnShell, i64, &'static str, bool, Option<Timestamp>);
        let cases: Vec<Case> = vec![
            ("running: paused, no idle stop", shell(idle.clone(), Some(running_since(0))), 30, "Paused", false, None),
            ("idle long ago: still no stop", shell(idle.clone(), Some(running_since(0))), 7200, "Paused", false, None),
            ("stopped: stays stopped", deletable.clone(), 60, "Stopped", false, None),
            ("stopped past deletePausedAfter: not deleted", deletable, 7200, "Stopped", false, None),
            ("new: paused", shell(idle, None), 0, "Paused", false, None),
        ];
        for (what, shell, now, state, delete, wake_at) in cases {
            let held = plan_of(&shell, at(now)).held();
            assert_eq!(
                (held.state(), held.delete, held.wake_at, held.replicas(3)),
                (state, delete, wake_at, 0),
                "{what}"
            );
            assert!(!held.happenings.iter().any(|h| matches!(h, Happening::Started)), "{what}: nothing starts");
        }
    }
}
