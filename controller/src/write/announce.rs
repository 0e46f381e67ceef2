//! What a reconcile tells in Events, as pure functions: a stop coming ([`lifetime_events`]),
//! and a failure or a pod problem once per cause ([`trouble_event`]); and what its lifetime did,
//! for the metrics ([`transitions`], [`stop_delay`]).
//!
//! A start and a stop are no Events: the status says each (`status.startedAt`, `Available`,
//! `status.stopped` with its reason and message, which `kubectl describe` shows), and an Event
//! saying it again was one more write per transition on an apiserver that a class of shells
//! stopping together keeps busy (issue 41: `cargo xtask bench controller` counts them). The
//! warning of a stop stays an Event: it is the one someone acts on (`extend`), and a Warning
//! reaches those who watch Events.

use myownshell_api::MyOwnShellStatus;
use myownshell_api::names::conditions::DEGRADED;
use myownshell_api::names::reasons;

use crate::events::{EventType, actions};
use crate::health::diagnose::cause_of;
use crate::life::lifetime::{Happening, Plan};
use crate::write::status::true_condition;

/// One Event to write about a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// Normal or Warning.
    pub type_: EventType,
    /// A reason of `myownshell_api::names::reasons`.
    pub reason: &'static str,
    /// What the controller did (`crate::events::actions`).
    pub action: &'static str,
    /// For people.
    pub note: String,
}

/// The Events of what the lifetime did in this reconcile (`plan.happenings`): the warning of a
/// stop; `name` is the shell's.
pub fn lifetime_events(name: &str, plan: &Plan) -> Vec<Announcement> {
    plan.happenings
        .iter()
        .filter_map(|happening| match happening {
            Happening::StoppingSoon(next) => Some(Announcement {
                type_: EventType::Warning,
                reason: reasons::STOPPING_SOON,
                action: actions::LIFETIME,
                note: format!(
                    "Stops at {} ({}); `kubectl myownshell extend {name}` pushes the stop back without a restart",
                    next.at.0, next.reason
                ),
            }),
            Happening::Started | Happening::Stopped(_) => None,
        })
        .collect()
}

/// What the lifetime did in this reconcile, as `(transition, reason)` labels of
/// `myownshell_controller_lifetime_transitions_total`: `Started` (no reason), `StoppingSoon`
/// and `Stopped` with the stop's reason (`Idle`, `MaxRunTime`, `Requested`, …).
pub fn transitions(plan: &Plan) -> Vec<(&'static str, String)> {
    plan.happenings
        .iter()
        .map(|happening| match happening {
            Happening::Started => (reasons::STARTED, String::new()),
            Happening::StoppingSoon(next) => (reasons::STOPPING_SOON, next.reason.clone()),
            Happening::Stopped(stop) => (reasons::STOPPED, stop.reason.clone()),
        })
        .collect()
}

/// How long after its deadline the stop this reconcile made began (`now`, the reconcile's start),
/// for `myownshell_controller_lifetime_stop_delay_seconds`: the deadline is the one the status
/// announced (`nextStop.at`, of the same reason). A stop on request, or one no `nextStop`
/// announced, has no deadline to be late for.
pub fn stop_delay(
    previous: Option<&MyOwnShellStatus>,
    plan: &Plan,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<std::time::Duration> {
    let announced = previous?.next_stop.as_ref()?;
    let stopped = plan.happenings.iter().any(|h| matches!(h, Happening::Stopped(s) if s.reason == announced.reason));
    let late = now.duration_since(announced.at.0);
    stopped.then(|| std::time::Duration::try_from(late).unwrap_or_default())
}

/// The `Degraded=True` cause of `status`, if it has one.
fn degraded_cause(status: &MyOwnShellStatus) -> Option<String> {
    true_condition(status, DEGRADED).map(|c| cause_of(&c.reason, &c.message))
}

/// The Warning for a failure or a pod problem, once per cause: only when `status` shows a
/// `Degraded` cause that `previous` did not (a failure persisting through retries, or a crash
/// loop restarting again, is told once). `told_as` is the Event's reason and action for the
/// trouble this reconcile found (`None`: none, or none worth an Event).
pub fn trouble_event(
    previous: Option<&MyOwnShellStatus>,
    status: &MyOwnShellStatus,
    told_as: Option<(&'static str, &'static str)>,
) -> Option<Announcement> {
    let (reason, action) = told_as?;
    let cause = degraded_cause(status)?;
    if previous.and_then(degraded_cause).as_ref() == Some(&cause) {
        return None;
    }
    let message = status.conditions.iter().find(|c| c.type_ == DEGRADED).map(|c| c.message.clone())?;
    Some(Announcement { type_: EventType::Warning, reason, action, note: message })
}

/// The Event of what the shell's approvals came to, when it changed since `previous` (an
/// approval given, taken back, rejected or run out): each approval is on the record.
pub fn approval_event(
    previous: Option<&MyOwnShellStatus>,
    approval: Option<&crate::write::status::Value>,
) -> Option<Announcement> {
    let (approved, reason, message) = approval?;
    let before = previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == myownshell_api::names::conditions::APPROVED))
        .map(|c| (c.reason.as_str(), c.message.as_str()));
    if before == Some((*reason, message.as_str())) {
        return None;
    }
    let type_ =
        if *approved || *reason == reasons::WAITING_FOR_APPROVAL { EventType::Normal } else { EventType::Warning };
    Some(Announcement { type_, reason, action: actions::APPROVAL, note: message.clone() })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use k8s_openapi::jiff::Timestamp;
    use myownshell_api::{NextStop, Stop};

    use myownshell_runtime::time::to_second as time;

    use super::*;
    use crate::life::lifetime::Phase;

    fn degraded(status: &str, reason: &str, message: &str) -> MyOwnShellStatus {
        MyOwnShellStatus {
            conditions: vec![Condition {
                type_: DEGRADED.into(),
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
                observed_generation: None,
                last_transition_time: time(Timestamp::UNIX_EPOCH),
            }],
            ..MyOwnShellStatus::default()
        }
    }

    #[test]
    fn trouble_is_told_once_per_cause() {
        let crash = |restarts: u32| {
            degraded(
                "True",
                "CrashLooping",
                &format!("pod web-1, container shell: restarted {restarts} times, last ended Error"),
            )
        };
        let pods = Some((reasons::CRASH_LOOPING, actions::CHECK_PODS));
        let well = degraded("False", "AsExpected", "the shells run as specified");
        type ToldAs = Option<(&'static str, &'static str)>;
        let cases: Vec<(&str, Option<MyOwnShellStatus>, MyOwnShellStatus, ToldAs, bool)> = vec![
            ("first seen", Some(well.clone()), crash(1), pods, true),
            ("no status before", None, crash(1), pods, true),
            ("the same cause, a counter moved", Some(crash(1)), crash(4), pods, false),
            (
                "another pod",
                Some(crash(1)),
                degraded("True", "CrashLooping", "pod web-2, container shell: restarted 1 times"),
                pods,
                true,
            ),
            (
                "another reason",
                Some(crash(1)),
                degraded("True", "OOMKilled", "pod web-1, container shell: x"),
                pods,
                true,
            ),
            ("well again", Some(crash(1)), well.clone(), None, false),
            ("nothing to tell", Some(well.clone()), well, None, false),
        ];
        for (what, previous, status, told_as, told) in cases {
            let event = trouble_event(previous.as_ref(), &status, told_as);
            assert_eq!(event.is_some(), told, "{what}");
            if let Some(e) = event {
                assert_eq!(
                    (e.type_, e.reason, e.note.as_str()),
                    (EventType::Warning, "CrashLooping", status.conditions[0].message.as_str()),
                    "{what}"
                );
            }
        }
    }

    #[test]
    fn a_warning_is_an_event_and_every_happening_is_counted() {
        let at = time(Timestamp::from_second(1_800_000_000).unwrap());
        let plan = Plan {
            phase: Phase::Running { started_at: at.0 },
            next_stop: None,
            happenings: vec![
                Happening::Started,
                Happening::StoppingSoon(NextStop { at: at.clone(), reason: "Idle".into(), warned: true }),
                Happening::Stopped(Stop { reason: "Idle".into(), at, message: "no new connection for 40s".into() }),
            ],
            wake_at: None,
            delete: false,
        };
        let events = lifetime_events("web", &plan);
        let got: Vec<(EventType, &str)> = events.iter().map(|e| (e.type_, e.reason)).collect();
        assert_eq!(got, vec![(EventType::Warning, "StoppingSoon")], "only the warning is an Event");
        assert!(
            events[0].note.contains("2027-01-15T08:00:00Z (Idle)") && events[0].note.contains("extend web"),
            "{}",
            events[0].note
        );
        let counted = transitions(&plan);
        let counted: Vec<(&str, &str)> = counted.iter().map(|(t, r)| (*t, r.as_str())).collect();
        assert_eq!(
            counted,
            vec![("Started", ""), ("StoppingSoon", "Idle"), ("Stopped", "Idle")],
            "every one is counted"
        );
    }

    #[test]
    fn a_stop_is_late_by_the_time_since_the_deadline_its_status_announced() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let announced = |reason: &str| MyOwnShellStatus {
            next_stop: Some(NextStop { at: time(t0), reason: reason.into(), warned: true }),
            ..MyOwnShellStatus::default()
        };
        let stopped = |reason: &str| Plan {
            phase: Phase::Stopped(Stop { reason: reason.into(), at: time(t0), message: String::new() }),
            next_stop: None,
            happenings: vec![Happening::Stopped(Stop { reason: reason.into(), at: time(t0), message: String::new() })],
            wake_at: None,
            delete: false,
        };
        let running = Plan { phase: Phase::Running { started_at: t0 }, happenings: vec![], ..stopped("Idle") };
        let later = |ms: i64| t0.checked_add(k8s_openapi::jiff::SignedDuration::from_millis(ms)).unwrap();
        let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis());
        // (what, previous status, plan, now, delay in ms)
        let cases = [
            (
                "stopped 250 ms after its deadline",
                Some(announced("MaxRunTime")),
                stopped("MaxRunTime"),
                later(250),
                Some(250),
            ),
            ("an idle stop on the dot", Some(announced("Idle")), stopped("Idle"), t0, Some(0)),
            (
                "a clock a little behind the deadline is not early",
                Some(announced("Idle")),
                stopped("Idle"),
                later(-20),
                Some(0),
            ),
            (
                "a stop on request was announced by nobody",
                Some(announced("Idle")),
                stopped("Requested"),
                later(5),
                None,
            ),
            ("no stop in this reconcile", Some(announced("Idle")), running, later(5), None),
            ("no deadline announced", Some(MyOwnShellStatus::default()), stopped("Idle"), later(5), None),
            ("no status yet", None, stopped("Idle"), later(5), None),
        ];
        for (what, previous, plan, now, delay) in cases {
            assert_eq!(ms(stop_delay(previous.as_ref(), &plan, now)), delay, "{what}");
        }
    }
}
