//! `spec.lifetime`: the rules its durations meet ([`check`]), the warnings it earns
//! ([`warnings`]), and the defaults the operator's flags give it ([`default_operations`]).

use std::time::Duration;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use myownshell_api::{Lifetime, MyOwnShellSpec};
use myownshell_runtime::time::{format_duration, parse_duration, plus};
use serde_json::json;

use super::policy::Policy;
use super::problem::Problem;

/// The shortest `idleTimeout`, `maxRunTime` or `deletePausedAfter`: short enough for demos and
/// tests (`idleTimeout: 40s`), long enough that a shell is not stopped before it is up.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest `warnBefore`: a warning has to come before the stop.
pub const MIN_WARNING: Duration = Duration::from_secs(1);
/// The longest of any lifetime duration (and how far `extendedUntil` may reach without
/// `--max-run-time`): a year, past which "stop" means nothing.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

fn problem(field: &str, message: String) -> Problem {
    Problem::new("lifetime", format!("spec.lifetime.{field}"), message)
}

/// `text` read as a duration between `min` and `max`, or the problem with it.
fn duration(field: &str, text: &str, min: Duration, max: Duration) -> Result<Duration, Problem> {
    let d = parse_duration(text)
        .ok()
        .filter(|_| !text.trim().ends_with('d'))
        .ok_or_else(|| problem(field, format!("must be a duration such as 40s, 30m or 1h30m, got {text:?}")))?;
    if d < min || d > max {
        return Err(problem(
            field,
            format!("must be between {} and {}, got {text:?}", format_duration(min), format_duration(max)),
        ));
    }
    Ok(d)
}

/// Every rule `lifetime` breaks, at `now`, under `policy` (`--max-run-time`).
pub fn check(lifetime: &Lifetime, policy: &Policy, now: Timestamp, problems: &mut Vec<Problem>) {
    let mut read = |field: &str, value: &Option<String>, min: Duration| {
        value.as_deref().and_then(|text| duration(field, text, min, MAX_DURATION).map_err(|p| problems.push(p)).ok())
    };
    let idle = read("idleTimeout", &lifetime.idle_timeout, MIN_TIMEOUT);
    let run = read("maxRunTime", &lifetime.max_run_time, MIN_TIMEOUT);
    let warn = read("warnBefore", &lifetime.warn_before, MIN_WARNING);
    read("deletePausedAfter", &lifetime.delete_paused_after, MIN_TIMEOUT);
    if let (Some(run), Some(cap)) = (run, policy.max_run_time)
        && run > cap
    {
        problems.push(problem(
            "maxRunTime",
            format!(
                "must be at most {} (the operator's --max-run-time), got {:?}",
                format_duration(cap),
                format_duration(run)
            ),
        ));
    }
    if let Some(warn) = warn {
        for (field, limit) in [("idleTimeout", idle), ("maxRunTime", run)] {
            if let Some(limit) = limit.filter(|limit| warn >= *limit) {
                problems.push(problem(
                    "warnBefore",
                    format!(
                        "must be shorter than spec.lifetime.{field} ({}), got {:?}",
                        format_duration(limit),
                        format_duration(warn)
                    ),
                ));
            }
        }
    }
    if let Some(until) = &lifetime.extended_until {
        let reach = policy.max_run_time.unwrap_or(MAX_DURATION);
        let latest = plus(now, reach);
        if until.0 > latest {
            problems.push(problem(
                "extendedUntil",
                format!("must be at most {} from now ({latest}), got {}", format_duration(reach), until.0),
            ));
        }
    }
}

/// How far ahead of the webhook's clock a time the user writes as "now" may be (clock skew).
pub const CLOCK_SKEW: Duration = Duration::from_secs(300);

/// `spec.updateRequestedAt` is when its owner asked, so not in the future (a time ahead would
/// restart the shell again after every later operator upgrade until then).
pub fn check_not_ahead(asked: &Time, now: Timestamp, problems: &mut Vec<Problem>) {
    let latest = plus(now, CLOCK_SKEW);
    if asked.0 > latest {
        problems.push(Problem::new(
            "updateRequestedAt",
            "spec.updateRequestedAt",
            format!("must not be in the future (it is when the update was asked for), got {}", asked.0),
        ));
    }
}

/// The operations that stamp the times a user asks for "now" with the webhook's clock, `now`:
/// `spec.lifetime.restartedAt` (`kubectl myownshell start`) and `spec.updateRequestedAt`
/// (`kubectl myownshell update`). Each is when the request came, whatever the client's clock
/// said: a laptop clock behind the cluster made a start count from before the stop it was to
/// end (so it did nothing), and a `restartedAt` in the future held off every idle and run-time
/// stop, `--max-run-time` included, until then. A time that is set anew or changed is stamped;
/// one the update leaves as it was is kept (it was stamped when it was asked for).
pub fn stamp_operations(new: Option<&MyOwnShellSpec>, old: Option<&MyOwnShellSpec>, now: &Time) -> Vec<PatchOperation> {
    let restarted = |spec: Option<&MyOwnShellSpec>| spec.and_then(|s| s.lifetime.as_ref()?.restarted_at.clone());
    let asked = |spec: Option<&MyOwnShellSpec>| spec.and_then(|s| s.update_requested_at.clone());
    let fields: [(&[&str], Option<Time>, Option<Time>); 2] = [
        (&["spec", "lifetime", "restartedAt"], restarted(new), restarted(old)),
        (&["spec", "updateRequestedAt"], asked(new), asked(old)),
    ];
    fields
        .into_iter()
        .filter(|(_, new, old)| new.is_some() && new != old && new.as_ref() != Some(now))
        .map(|(path, _, _)| {
            PatchOperation::Replace(ReplaceOperation {
                path: PointerBuf::from_tokens(path.iter().copied()),
                value: json!(now),
            })
        })
        .collect()
}

/// Warnings for a lifetime that passes but will not do what it seems to.
pub fn warnings(lifetime: &Lifetime) -> Vec<String> {
    let mut warnings = Vec::new();
    if lifetime.warn_before.is_some() && lifetime.idle_timeout.is_none() && lifetime.max_run_time.is_none() {
        warnings.push(
            "spec.lifetime.warnBefore: there is no idleTimeout or maxRunTime to warn of; the shell only stops when asked"
                .to_owned(),
        );
    }
    warnings
}

/// The operations that give `spec` the lifetime the operator's flags ask for: `--max-run-time`
/// where the spec has no `maxRunTime`, `--default-idle-timeout` where it has no `idleTimeout`.
/// Runs after the defaults, so `/spec` exists. Costs nothing unless one of the flags is set.
pub fn default_operations(spec: Option<&MyOwnShellSpec>, policy: &Policy) -> Vec<PatchOperation> {
    let wanted = [("maxRunTime", policy.max_run_time), ("idleTimeout", policy.default_idle_timeout)];
    if wanted.iter().all(|(_, d)| d.is_none()) {
        return Vec::new();
    }
    let lifetime = spec.and_then(|s| s.lifetime.as_ref());
    let missing: Vec<(&str, Duration)> = wanted
        .into_iter()
        .filter_map(|(field, d)| d.map(|d| (field, d)))
        .filter(|(field, _)| match *field {
            "maxRunTime" => lifetime.is_none_or(|l| l.max_run_time.is_none()),
            _ => lifetime.is_none_or(|l| l.idle_timeout.is_none()),
        })
        .collect();
    let add = |path: &[&str], value| {
        PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(path.iter().copied()), value })
    };
    match lifetime {
        None if missing.is_empty() => Vec::new(),
        None => {
            let object: serde_json::Map<String, serde_json::Value> =
                missing.iter().map(|(field, d)| ((*field).to_owned(), json!(format_duration(*d)))).collect();
            vec![add(&["spec", "lifetime"], serde_json::Value::Object(object))]
        }
        Some(_) => {
            missing.iter().map(|(field, d)| add(&["spec", "lifetime", field], json!(format_duration(*d)))).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;

    use super::*;

    fn lifetime(idle: Option<&str>, run: Option<&str>, warn: Option<&str>, delete: Option<&str>) -> Lifetime {
        Lifetime {
            idle_timeout: idle.map(Into::into),
            max_run_time: run.map(Into::into),
            warn_before: warn.map(Into::into),
            delete_paused_after: delete.map(Into::into),
            ..Lifetime::default()
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    #[test]
    fn the_lifetime_rules() {
        let capped = Policy { max_run_time: Some(Duration::from_secs(8 * 3600)), ..Policy::default() };
        let open = Policy::default();
        let until = |offset: i64| Lifetime {
            extended_until: Some(Time(now().checked_add(SignedDuration::from_secs(offset)).unwrap())),
            ..Lifetime::default()
        };
        let cases: Vec<(&str, Lifetime, &Policy, Vec<&str>)> = vec![
            ("demo timeouts", lifetime(Some("40s"), None, Some("20s"), None), &open, vec![]),
            ("everything", lifetime(Some("30m"), Some("8h"), Some("5m"), Some("168h")), &capped, vec![]),
            (
                "not a duration",
                lifetime(Some("soon"), None, None, None),
                &open,
                vec!["spec.lifetime.idleTimeout: must be a duration such as 40s, 30m or 1h30m, got \"soon\""],
            ),
            (
                "days are not how Kubernetes writes it",
                lifetime(None, None, None, Some("7d")),
                &open,
                vec!["spec.lifetime.deletePausedAfter: must be a duration such as 40s, 30m or 1h30m, got \"7d\""],
            ),
            (
                "zero",
                lifetime(Some("0s"), None, None, None),
                &open,
                vec!["spec.lifetime.idleTimeout: must be between 10s and 8784h, got \"0s\""],
            ),
            (
                "too short",
                lifetime(None, Some("5s"), None, None),
                &open,
                vec!["spec.lifetime.maxRunTime: must be between 10s and 8784h, got \"5s\""],
            ),
            (
                "too long",
                lifetime(None, Some("9000h"), None, None),
                &open,
                vec!["spec.lifetime.maxRunTime: must be between 10s and 8784h, got \"9000h\""],
            ),
            (
                "above the cap",
                lifetime(None, Some("12h"), None, None),
                &capped,
                vec!["spec.lifetime.maxRunTime: must be at most 8h (the operator's --max-run-time), got \"12h\""],
            ),
            (
                "a warning as long as the timeout",
                lifetime(Some("30m"), Some("20m"), Some("30m"), None),
                &open,
                vec![
                    "spec.lifetime.warnBefore: must be shorter than spec.lifetime.idleTimeout (30m), got \"30m\"",
                    "spec.lifetime.warnBefore: must be shorter than spec.lifetime.maxRunTime (20m), got \"30m\"",
                ],
            ),
            ("extended within reach", until(3600), &capped, vec![]),
            (
                "extended too far",
                until(9 * 3600),
                &capped,
                vec![
                    "spec.lifetime.extendedUntil: must be at most 8h from now (2027-01-15T16:00:00Z), got 2027-01-15T17:00:00Z",
                ],
            ),
        ];
        for (what, lifetime, policy, want) in cases {
            let mut problems = Vec::new();
            check(&lifetime, policy, now(), &mut problems);
            let got: Vec<String> = problems.iter().map(ToString::to_string).collect();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn times_asked_for_now_are_the_webhooks_now() {
        let stamp = Time(now());
        let at = |offset: i64| Some(Time(now().checked_add(SignedDuration::from_secs(offset)).unwrap()));
        let spec = |restarted: Option<Time>, asked: Option<Time>| MyOwnShellSpec {
            lifetime: restarted.map(|r| Lifetime { restarted_at: Some(r), ..Lifetime::default() }),
            update_requested_at: asked,
            ..MyOwnShellSpec::default()
        };
        let restarted = "/spec/lifetime/restartedAt";
        let asked = "/spec/updateRequestedAt";
        let cases: Vec<(&str, MyOwnShellSpec, Option<MyOwnShellSpec>, Vec<&str>)> = vec![
            ("neither set", spec(None, None), None, vec![]),
            ("a start from a laptop clock behind", spec(at(-3600), None), Some(spec(None, None)), vec![restarted]),
            ("a start from a clock ahead", spec(at(86_400 * 365), None), Some(spec(None, None)), vec![restarted]),
            ("a start again", spec(at(-10), None), Some(spec(at(-900), None)), vec![restarted]),
            ("a start left as it was", spec(at(-900), None), Some(spec(at(-900), None)), vec![]),
            ("already now", spec(Some(stamp.clone()), None), Some(spec(None, None)), vec![]),
            ("an update asked for", spec(None, at(-60)), Some(spec(None, None)), vec![asked]),
            ("a create with both", spec(at(60), at(60)), None, vec![restarted, asked]),
            ("both left as they were", spec(at(-5), at(-5)), Some(spec(at(-5), at(-5))), vec![]),
        ];
        for (what, new, old, want) in cases {
            let ops = stamp_operations(Some(&new), old.as_ref(), &stamp);
            let paths: Vec<String> = ops
                .iter()
                .map(|op| match op {
                    PatchOperation::Replace(r) => {
                        assert_eq!(r.value, json!(stamp), "{what}");
                        r.path.to_string()
                    }
                    other => panic!("{what}: {other:?}"),
                })
                .collect();
            assert_eq!(paths, want, "{what}");
        }
    }

    #[test]
    fn an_update_is_asked_for_now_not_later() {
        let mut problems = Vec::new();
        check_not_ahead(&Time(now()), now(), &mut problems);
        check_not_ahead(&Time(now().checked_add(SignedDuration::from_secs(200)).unwrap()), now(), &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        check_not_ahead(&Time(now().checked_add(SignedDuration::from_secs(3600)).unwrap()), now(), &mut problems);
        assert_eq!(
            problems[0].to_string(),
            "spec.updateRequestedAt: must not be in the future (it is when the update was asked for), got 2027-01-15T09:00:00Z"
        );
    }

    #[test]
    fn warns_of_a_warning_with_nothing_to_warn_of() {
        assert_eq!(warnings(&lifetime(None, None, Some("5m"), None)).len(), 1);
        assert!(warnings(&lifetime(Some("30m"), None, Some("5m"), None)).is_empty());
    }

    #[test]
    fn the_flags_default_what_the_spec_leaves_unset() {
        let policy = Policy {
            max_run_time: Some(Duration::from_secs(8 * 3600)),
            default_idle_timeout: Some(Duration::from_secs(1800)),
            ..Policy::default()
        };
        let ops = |spec: Option<MyOwnShellSpec>, policy: &Policy| {
            serde_json::to_value(default_operations(spec.as_ref(), policy)).unwrap()
        };
        let with = |l: Lifetime| Some(MyOwnShellSpec { lifetime: Some(l), ..MyOwnShellSpec::default() });
        assert_eq!(ops(None, &Policy::default()), json!([]), "no flags, no patch");
        assert_eq!(
            ops(None, &policy),
            json!([{"op": "add", "path": "/spec/lifetime", "value": {"maxRunTime": "8h", "idleTimeout": "30m"}}])
        );
        assert_eq!(
            ops(with(lifetime(None, Some("1h"), None, None)), &policy),
            json!([{"op": "add", "path": "/spec/lifetime/idleTimeout", "value": "30m"}]),
            "a lower maxRunTime stays"
        );
        assert_eq!(ops(with(lifetime(Some("2h"), Some("1h"), None, None)), &policy), json!([]));
    }
}
