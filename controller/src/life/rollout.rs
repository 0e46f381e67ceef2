//! Whether a changed pod template rolls out now or waits ([`decide`], pure).
//!
//! A new template restarts every pod of the shell: a live session is cut and `/tmp` is gone.
//! When the template changed because the *user* changed the spec (image, command, resources), that
//! is what they asked for, and it rolls out at once. When it changed because the *operator* did
//! (an upgrade, a changed operator flag), the shell keeps running as it is and says so
//! (`UpToDate=False`, reason `OperatorUpgraded`) until a moment that costs nobody anything: the
//! shell has no pods (stopped or paused), nobody has connected for `--template-update-quiet-after`,
//! or its owner asks (`spec.updateRequestedAt`, `kubectl myownshell update`). As Coder and
//! JupyterHub apply a new template to a running workspace only at its next start.
//! `--template-updates=immediate` rolls every change at once (a security fix).
//!
//! Which template a Deployment runs is told by the hash of the template the controller built
//! ([`TEMPLATE_HASH_ANNOTATION`]), not by comparing it with the stored one (which the apiserver
//! fills with defaults); a Deployment made before the hash existed is compared field by field.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;
use myownshell_runtime::time::{plus, second_of};
use serde_json::Value;

use crate::deployment::{CLASS_TEMPLATE_ANNOTATION, OWN_SPEC_ANNOTATION};
use crate::deployment::{SHELL_CONTAINER, is_subset};
pub use crate::deployment::{TEMPLATE_APPLIED_ANNOTATION, TEMPLATE_HASH_ANNOTATION, template_hash};
use crate::holder::{own_command, own_mounts};

/// `--template-updates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[expect(
    missing_docs,
    reason = "clap lists documented values in a \"Possible values\" block, which switches the whole --help to its spaced layout; the flag's help says what each does"
)]
pub enum Mode {
    // A template the operator changed waits for a quiet moment.
    WhenQuiet,
    // Every template change rolls out at once.
    Immediate,
}

/// How template changes of the operator's roll out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `--template-updates`.
    pub mode: Mode,
    /// `--template-update-quiet-after`: no new connection for this long is a quiet moment.
    pub quiet_after: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self { mode: Mode::WhenQuiet, quiet_after: Duration::from_secs(3600) }
    }
}

/// Why the new template is applied now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// There is no Deployment yet.
    New,
    /// The user changed the spec's image, command or resources.
    SpecChanged,
    /// `--template-updates=immediate`.
    Forced,
    /// The shell runs no pods (stopped or paused): nothing to cut.
    NoPods,
    /// Its owner asked (`spec.updateRequestedAt`).
    Requested,
    /// Nobody connected for `--template-update-quiet-after`.
    Quiet,
}

impl Why {
    /// In words, for the `TemplateUpdated` event.
    pub fn words(self) -> &'static str {
        match self {
            Why::New => "the shell is new",
            Why::SpecChanged => "the spec changed",
            Why::Forced => "the operator runs with --template-updates=immediate",
            Why::NoPods => "the shell runs no pods",
            Why::Requested => "its owner asked (kubectl myownshell update)",
            Why::Quiet => "nobody connected for --template-update-quiet-after",
        }
    }
}

/// What to do with the pod template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The pods run the template the controller builds now.
    Current,
    /// Apply the new template now.
    Roll(Why),
    /// Keep the running template until `until` (the quiet moment, if nothing happens before).
    Wait {
        /// When nobody will have connected for `quiet_after`, if nobody connects meanwhile.
        until: Timestamp,
        /// The shell's class, when what changed is what the class puts in its pods (else the
        /// operator changed the template: an upgrade, a flag).
        class: Option<String>,
    },
}

impl Decision {
    /// The quiet moment a kept template waits for, if it waits.
    pub fn waits_until(&self) -> Option<Timestamp> {
        match self {
            Decision::Wait { until, .. } => Some(*until),
            _ => None,
        }
    }
}

/// What [`decide`] looks at.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The Deployment as it is.
    pub live: Option<&'a Deployment>,
    /// The Deployment the controller builds now.
    pub desired: &'a Deployment,
    /// The pods the shell should run (0: stopped or paused).
    pub replicas: i32,
    /// `spec.updateRequestedAt`.
    pub update_requested_at: Option<Timestamp>,
    /// The last sign of use: the last connection, or the start, whichever is later.
    pub last_activity: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}

fn template_of(d: &Deployment) -> Option<&PodTemplateSpec> {
    d.spec.as_ref().map(|s| &s.template)
}

fn annotation<'d>(d: &'d Deployment, key: &str) -> Option<&'d str> {
    d.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether `live` runs a different template than `desired`.
fn template_differs(desired: &Deployment, live: &Deployment) -> bool {
    let Some(want) = template_of(desired) else { return false };
    match annotation(live, TEMPLATE_HASH_ANNOTATION) {
        Some(hash) => hash != template_hash(want),
        // Made before the hash: every field built must be there, as built (the apiserver's
        // defaults aside).
        None => match (serde_json::to_value(want), template_of(live).map(serde_json::to_value)) {
            (Ok(w), Some(Ok(l))) => !is_subset(&w, &l),
            _ => true,
        },
    }
}

fn shell_container(d: &Deployment) -> Option<&Container> {
    template_of(d)?.spec.as_ref()?.containers.iter().find(|c| c.name == SHELL_CONTAINER)
}

/// Whether what the user decides of the pod (image, command, resources, a home) differs (the
/// session holder's wrapping of the command and its mounts are the operator's: a holder added or
/// upgraded waits as an upgrade does). For a
/// shell with a class, the shell's own spec is compared (its hash on both): a new default image
/// of its class is not the user's change, and waits as an upgrade does.
fn spec_changed(desired: &Deployment, live: &Deployment) -> bool {
    if let (Some(want), Some(have)) = (annotation(desired, OWN_SPEC_ANNOTATION), annotation(live, OWN_SPEC_ANNOTATION))
    {
        let mounts =
            |d: &'_ Deployment| shell_container(d).map(|c| own_mounts(c).into_iter().cloned().collect::<Vec<_>>());
        return want != have || mounts(desired) != mounts(live);
    }
    container_changed(desired, live)
}

/// The class, if what it puts in the pods changed between `live` and `desired`.
fn class_changed(desired: &Deployment, live: &Deployment) -> Option<String> {
    let want = annotation(desired, CLASS_TEMPLATE_ANNOTATION)?;
    (annotation(live, CLASS_TEMPLATE_ANNOTATION) != Some(want))
        .then(|| want.split('/').next().unwrap_or(want).to_owned())
}

fn container_changed(desired: &Deployment, live: &Deployment) -> bool {
    let (Some(want), Some(have)) = (shell_container(desired), shell_container(live)) else { return true };
    let json = |v: &Option<_>| serde_json::to_value(v).unwrap_or(Value::Null);
    want.image != have.image
        || own_command(want) != own_command(have)
        || json(&want.resources) != json(&have.resources)
        || own_mounts(want) != own_mounts(have)
}

/// When the live template was applied: its annotation, else when the Deployment was made.
pub fn applied_at(live: &Deployment) -> Option<Timestamp> {
    annotation(live, TEMPLATE_APPLIED_ANNOTATION)
        .and_then(|t| t.parse().ok())
        .or_else(|| live.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Roll now, wait, or nothing to roll.
pub fn decide(input: &Input<'_>, policy: &Policy) -> Decision {
    let Some(live) = input.live else { return Decision::Roll(Why::New) };
    if !template_differs(input.desired, live) {
        return Decision::Current;
    }
    if spec_changed(input.desired, live) {
        return Decision::Roll(Why::SpecChanged);
    }
    if policy.mode == Mode::Immediate {
        return Decision::Roll(Why::Forced);
    }
    let running = live.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    if input.replicas == 0 || running == 0 {
        return Decision::Roll(Why::NoPods);
    }
    let applied = applied_at(live);
    if input.update_requested_at.is_some_and(|asked| applied.is_none_or(|at| asked > at)) {
        return Decision::Roll(Why::Requested);
    }
    let since = [input.last_activity, applied].into_iter().flatten().max().unwrap_or(input.now);
    let until = plus(since, policy.quiet_after);
    if input.now >= until {
        Decision::Roll(Why::Quiet)
    } else {
        Decision::Wait { until, class: class_changed(input.desired, live) }
    }
}

/// `built` (the Deployment as the controller builds it now) shaped by `decision`: a rolled
/// template records when (`now`); a current one keeps the record it has; a waiting one keeps
/// the running template, its records and its hashes, so that only what else changed (the replica
/// count, say) is written, and nothing at all if nothing else did.
pub fn shape(mut built: Deployment, live: Option<&Deployment>, decision: &Decision, now: Timestamp) -> Deployment {
    let carried = |key: &str| live.and_then(|l| annotation(l, key)).map(str::to_owned);
    let set = |d: &mut Deployment, key: &str, value: Option<String>| {
        let annotations = d.metadata.annotations.get_or_insert_with(Default::default);
        match value {
            Some(v) => annotations.insert(key.to_owned(), v),
            None => annotations.remove(key),
        };
    };
    match decision {
        Decision::Roll(_) => {
            let second = second_of(now);
            set(&mut built, TEMPLATE_APPLIED_ANNOTATION, Some(second.to_string()));
            crate::deployment::rehash(&mut built);
        }
        Decision::Current => {
            set(&mut built, TEMPLATE_APPLIED_ANNOTATION, carried(TEMPLATE_APPLIED_ANNOTATION));
            crate::deployment::rehash(&mut built);
        }
        Decision::Wait { .. } => {
            if let (Some(spec), Some(running)) = (built.spec.as_mut(), live.and_then(template_of)) {
                spec.template = running.clone();
            }
            // What the class put in the running template stays recorded as the running one, so
            // that the next reconcile still says the class is what waits.
            let keys = [
                TEMPLATE_APPLIED_ANNOTATION,
                TEMPLATE_HASH_ANNOTATION,
                crate::deployment::SPEC_HASH_ANNOTATION,
                CLASS_TEMPLATE_ANNOTATION,
            ];
            for key in keys {
                set(&mut built, key, carried(key));
            }
        }
    }
    built
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use myownshell_api::{MyOwnShell, MyOwnShellSpec};

    use super::*;
    use crate::deployment::{TemplateSettings, desired_for};

    const T0: i64 = 1_800_000_000;

    fn at(offset: i64) -> Timestamp {
        Timestamp::from_second(T0 + offset).unwrap()
    }

    fn shell(image: &str) -> MyOwnShell {
        let mut s = MyOwnShell::new("web", MyOwnShellSpec { image: Some(image.into()), ..MyOwnShellSpec::default() });
        s.metadata.namespace = Some("team".into());
        s.metadata.uid = Some("uid-1".into());
        s
    }

    /// The Deployment of `image` built with pod annotation `release=<release>`, as it would be
    /// stored: made at T0, with or without the template annotations (made before they existed).
    fn built(image: &str, release: &str, replicas: i32, annotated: bool) -> Deployment {
        let settings = TemplateSettings {
            pod_annotations: BTreeMap::from([("release".into(), release.into())]),
            ..TemplateSettings::default()
        };
        let mut d = desired_for(&shell(image), None, replicas, &settings).unwrap();
        d.metadata.creation_timestamp = Some(Time(at(0)));
        if let Some(a) = d.metadata.annotations.as_mut() {
            if annotated {
                a.insert(TEMPLATE_APPLIED_ANNOTATION.into(), at(0).to_string());
            } else {
                a.remove(TEMPLATE_HASH_ANNOTATION);
            }
        }
        d
    }

    /// The Deployment of a shell running `command`, with the session holder of `holder`'s image
    /// (none: without the holder), made at T0 with the template annotations.
    fn held(command: &str, holder: Option<&str>) -> Deployment {
        let session = holder.map(|image| crate::holder::SessionSettings {
            image: image.into(),
            detached_timeout: Duration::from_secs(3600),
            max_sessions: 16,
        });
        let settings = TemplateSettings { session, ..TemplateSettings::default() };
        let mut s = shell("busybox:1");
        s.spec.command = Some(vec!["sh".into(), "-c".into(), command.into()]);
        let mut d = desired_for(&s, None, 1, &settings).unwrap();
        d.metadata.creation_timestamp = Some(Time(at(0)));
        d.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(TEMPLATE_APPLIED_ANNOTATION.into(), at(0).to_string());
        d
    }

    /// The holder wraps the shell's command and adds mounts; that is the operator's change (it
    /// waits for a quiet moment), and a change of the user's command under it is the user's.
    #[test]
    fn the_holder_is_the_operators_change() {
        let policy = Policy::default();
        let wait = Decision::Wait { until: at(4200), class: None };
        let cases = [
            ("the holder added by an upgrade", held("sleep 1d", None), held("sleep 1d", Some("op:2")), wait.clone()),
            ("the holder's image upgraded", held("sleep 1d", Some("op:1")), held("sleep 1d", Some("op:2")), wait),
            (
                "the user's command changed under the holder",
                held("sleep 1d", Some("op:1")),
                held("sleep 2d", Some("op:1")),
                Decision::Roll(Why::SpecChanged),
            ),
            ("the same", held("sleep 1d", Some("op:1")), held("sleep 1d", Some("op:1")), Decision::Current),
        ];
        for (what, live, desired, want) in cases {
            let input = Input {
                live: Some(&live),
                desired: &desired,
                replicas: 1,
                update_requested_at: None,
                last_activity: Some(at(600)),
                now: at(700),
            };
            assert_eq!(decide(&input, &policy), want, "{what}");
        }
    }

    #[test]
    fn roll_now_or_wait() {
        let policy = Policy { mode: Mode::WhenQuiet, quiet_after: Duration::from_secs(3600) };
        let immediate = Policy { mode: Mode::Immediate, ..policy };
        let new = built("busybox:1", "2", 1, true);
        let old = built("busybox:1", "1", 1, true);
        let old_unannotated = built("busybox:1", "1", 1, false);
        let same_unannotated = built("busybox:1", "2", 1, false);
        let stopped = built("busybox:1", "1", 0, true);
        let user_changed = built("busybox:2", "2", 1, true);
        type Case<'a> =
            (&'a str, Option<&'a Deployment>, &'a Deployment, i32, Option<i64>, Option<i64>, i64, &'a Policy, Decision);
        let cases: Vec<Case> = vec![
            ("no Deployment yet", None, &new, 1, None, None, 10, &policy, Decision::Roll(Why::New)),
            ("the same template", Some(&new), &new, 1, None, Some(5), 10, &policy, Decision::Current),
            (
                "the same, made before the hash",
                Some(&same_unannotated),
                &new,
                1,
                None,
                Some(5),
                10,
                &policy,
                Decision::Current,
            ),
            (
                "the operator changed it: wait",
                Some(&old),
                &new,
                1,
                None,
                Some(600),
                700,
                &policy,
                Decision::Wait { until: at(4200), class: None },
            ),
            (
                "made before the hash: wait too",
                Some(&old_unannotated),
                &new,
                1,
                None,
                Some(600),
                700,
                &policy,
                Decision::Wait { until: at(4200), class: None },
            ),
            ("quiet for an hour", Some(&old), &new, 1, None, Some(600), 4200, &policy, Decision::Roll(Why::Quiet)),
            (
                "never connected: quiet from the template's start",
                Some(&old),
                &new,
                1,
                None,
                None,
                3600,
                &policy,
                Decision::Roll(Why::Quiet),
            ),
            (
                "the user changed the image",
                Some(&old),
                &user_changed,
                1,
                None,
                Some(600),
                700,
                &policy,
                Decision::Roll(Why::SpecChanged),
            ),
            ("immediate", Some(&old), &new, 1, None, Some(600), 700, &immediate, Decision::Roll(Why::Forced)),
            (
                "stopping: no pods to cut",
                Some(&old),
                &new,
                0,
                None,
                Some(600),
                700,
                &policy,
                Decision::Roll(Why::NoPods),
            ),
            (
                "stopped: no pods to cut",
                Some(&stopped),
                &new,
                1,
                None,
                Some(600),
                700,
                &policy,
                Decision::Roll(Why::NoPods),
            ),
            (
                "asked after the template",
                Some(&old),
                &new,
                1,
                Some(650),
                Some(600),
                700,
                &policy,
                Decision::Roll(Why::Requested),
            ),
            (
                "asked before it: no",
                Some(&old),
                &new,
                1,
                Some(-5),
                Some(600),
                700,
                &policy,
                Decision::Wait { until: at(4200), class: None },
            ),
        ];
        for (what, live, desired, replicas, asked, active, now, policy, want) in cases {
            let input = Input {
                live,
                desired,
                replicas,
                update_requested_at: asked.map(at),
                last_activity: active.map(at),
                now: at(now),
            };
            assert_eq!(decide(&input, policy), want, "{what}");
        }
    }
}

#[cfg(test)]
mod shape_tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use myownshell_api::{MyOwnShell, MyOwnShellSpec};

    use super::*;
    use crate::deployment::{SPEC_HASH_ANNOTATION, TemplateSettings, desired_for, needs_apply};

    fn built(release: &str, replicas: i32) -> Deployment {
        let mut s = MyOwnShell::new("web", MyOwnShellSpec::default());
        s.metadata.namespace = Some("team".into());
        s.metadata.uid = Some("uid-1".into());
        let settings = TemplateSettings {
            pod_annotations: BTreeMap::from([("release".into(), release.into())]),
            ..TemplateSettings::default()
        };
        desired_for(&s, None, replicas, &settings).unwrap()
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// What the apiserver stores for `applied`: the same, plus defaults and a creation time.
    fn stored(applied: &Deployment) -> Deployment {
        let mut d = applied.clone();
        d.metadata.creation_timestamp = Some(Time(at(1_800_000_000)));
        if let Some(pod) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
            pod.dns_policy = Some("ClusterFirst".into());
            pod.restart_policy = Some("Always".into());
        }
        d
    }

    #[test]
    fn a_waiting_template_costs_no_write_and_a_current_one_keeps_its_record() {
        let created = shape(built("1", 1), None, &Decision::Roll(Why::New), at(1_800_000_000));
        let live = stored(&created);
        let annotations = created.metadata.annotations.clone().unwrap();
        assert_eq!(annotations.get(TEMPLATE_APPLIED_ANNOTATION).map(String::as_str), Some("2027-01-15T08:00:00Z"));

        let again = shape(built("1", 1), Some(&live), &Decision::Current, at(1_800_000_500));
        assert!(!needs_apply(&again, Some(&live)), "a current template is not written again");

        let upgraded = built("2", 1);
        let waiting = shape(
            upgraded.clone(),
            Some(&live),
            &Decision::Wait { until: at(1_800_003_600), class: None },
            at(1_800_000_500),
        );
        assert!(!needs_apply(&waiting, Some(&live)), "a waiting template costs no write");
        let scaled = shape(
            built("2", 3),
            Some(&live),
            &Decision::Wait { until: at(1_800_003_600), class: None },
            at(1_800_000_500),
        );
        assert!(needs_apply(&scaled, Some(&live)), "a resize while waiting is written");
        assert_eq!(
            scaled.spec.as_ref().unwrap().template,
            live.spec.as_ref().unwrap().template,
            "with the running template"
        );

        let rolled = shape(upgraded, Some(&live), &Decision::Roll(Why::Quiet), at(1_800_004_000));
        assert!(needs_apply(&rolled, Some(&live)));
        let annotations = rolled.metadata.annotations.unwrap();
        assert_eq!(annotations.get(TEMPLATE_APPLIED_ANNOTATION).map(String::as_str), Some("2027-01-15T09:06:40Z"));
        assert_ne!(
            annotations.get(SPEC_HASH_ANNOTATION),
            created.metadata.annotations.unwrap().get(SPEC_HASH_ANNOTATION)
        );
    }
}
