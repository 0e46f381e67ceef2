//! `MyOwnShell` status as a pure function of the object, its Deployment, its lifetime's plan,
//! what is wrong with its pods, and the outcome of the reconcile. Conditions follow the Kubernetes API conventions: one entry per type, CamelCase
//! reasons, human messages, and `lastTransitionTime` that moves only when `status` flips.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use myownshell_api::names::conditions::{
    APPROVED, AVAILABLE, DEGRADED, FITS_CLASS, HOME_READY, PROGRESSING, STOPPING, UP_TO_DATE,
};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, MyOwnShellStatus, defaults};

use crate::health::diagnose::Diagnosis;
use crate::home::assess::Assessment;
use crate::labels;
use crate::life::lifetime::{Phase, Plan};
use crate::life::rollout::Decision;

/// A failed reconcile, shown as `Degraded=True` with this reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// CamelCase condition reason, from [`crate::error::Error::reason`].
    pub reason: &'static str,
    /// What went wrong, for people reading `kubectl describe`.
    pub message: String,
}

/// What a reconcile learned, for the status.
#[derive(Debug, Clone, Copy, Default)]
pub struct Inputs<'a> {
    /// The shell's Deployment (ours), if it exists.
    pub deployment: Option<&'a Deployment>,
    /// The reconcile's failure, if it failed.
    pub failure: Option<&'a Failure>,
    /// The lifetime's plan (`None`: reckoned as running, with no lifetime).
    pub plan: Option<&'a Plan>,
    /// What is wrong with the shell's pods, if anything.
    pub diagnosis: Option<&'a Diagnosis>,
    /// Whether the pods run the template the controller builds now (`None`: not known).
    pub template: Option<&'a Decision>,
    /// What the home's claim means for the shell (`None`: no home).
    pub home: Option<&'a Assessment>,
    /// Whether the shell fits its class (`None`: no class).
    pub class_fit: Option<&'a Value>,
    /// Whether the shell has the approval its class asks for (`None`: it asks for none).
    pub approval: Option<&'a Value>,
}

/// A condition's value: status, reason, message.
pub type Value = (bool, &'static str, String);

/// Why a shell that is not stopped wants no pods: its size, or a hold its Degraded condition
/// explains (its namespace not opened to shells).
fn why_none(inputs: &Inputs<'_>) -> &'static str {
    if inputs.approval.is_some_and(|(approved, _, _)| !approved) {
        return "held until approved (see Approved)";
    }
    match inputs.failure {
        Some(f) if f.reason == reasons::NAMESPACE_NOT_OPEN || f.reason == reasons::HOME_CLAIM_CONFLICT => {
            "held (see Degraded)"
        }
        _ => "size is 0",
    }
}

fn available(inputs: &Inputs<'_>, wanted: i32, observed: &Observed) -> Value {
    if let Some(Phase::Stopped(stop)) = inputs.plan.map(|p| &p.phase) {
        return (false, reasons::STOPPED, format!("stopped at {} ({}): {}", stop.at.0, stop.reason, stop.message));
    }
    match (inputs.deployment, wanted, inputs.diagnosis) {
        (None, _, _) => (false, reasons::DEPLOYMENT_MISSING, "the shell Deployment does not exist yet".to_owned()),
        (Some(_), 0, _) => (false, reasons::PAUSED, format!("{}: no shell pods run", why_none(inputs))),
        (Some(_), _, Some(d)) => (false, d.reason, d.message.clone()),
        (Some(_), _, None) if observed.ready >= wanted => {
            (true, reasons::SHELLS_READY, format!("{} of {wanted} shell pods are ready", observed.ready))
        }
        (Some(_), _, None) => {
            (false, reasons::SHELLS_NOT_READY, format!("{} of {wanted} shell pods are ready", observed.ready))
        }
    }
}

fn progressing(inputs: &Inputs<'_>, wanted: i32, observed: &Observed) -> Value {
    let stopped = matches!(inputs.plan.map(|p| &p.phase), Some(Phase::Stopped(_)));
    if let Some(message) = &observed.deadline_exceeded {
        (false, reasons::PROGRESS_DEADLINE_EXCEEDED, message.clone())
    } else if stopped && observed.replicas == 0 {
        (false, reasons::STOPPED, "stopped: nothing to roll out".to_owned())
    } else if wanted == 0 && observed.replicas == 0 && inputs.deployment.is_some() {
        (false, reasons::PAUSED, format!("{}: nothing to roll out", why_none(inputs)))
    } else if inputs.deployment.is_some() && observed.settled(wanted) {
        (false, reasons::ROLLOUT_COMPLETE, format!("all {wanted} shell pods are up to date and ready"))
    } else {
        // No count of the pods done so far: it moved at each of the rollout's steps, each then a
        // status write saying nothing `readyReplicas` does not (issue 41: 3.4 status writes per
        // update at a quiet moment, one of them only this count; and `ready.min(updated)` counted
        // the old pod, still ready, as done).
        let pods = if wanted == 1 { "pod" } else { "pods" };
        (
            true,
            reasons::ROLLING_OUT,
            format!("rolling out {wanted} shell {pods}; status.readyReplicas counts the ready ones"),
        )
    }
}

fn degraded(inputs: &Inputs<'_>, observed: &Observed) -> Value {
    if let Some(f) = inputs.failure {
        (true, f.reason, f.message.clone())
    } else if let Some(d) = inputs.diagnosis {
        (true, d.reason, d.message.clone())
    } else if let Some(message) = &observed.replica_failure {
        (true, reasons::REPLICA_FAILURE, message.clone())
    } else if let Some(message) = &observed.deadline_exceeded {
        (true, reasons::PROGRESS_DEADLINE_EXCEEDED, message.clone())
    } else {
        (false, reasons::AS_EXPECTED, "the shells run as specified".to_owned())
    }
}

/// `Stopping`, for shells with a lifetime or a stop: whether one is due within `warnBefore`.
fn stopping(shell: &MyOwnShell, plan: &Plan) -> Option<Value> {
    let name = shell.metadata.name.as_deref().unwrap_or_default();
    match (&plan.phase, &plan.next_stop) {
        (Phase::Stopped(stop), _) => {
            Some((false, reasons::STOPPED, format!("stopped at {} ({})", stop.at.0, stop.reason)))
        }
        (_, Some(next)) if next.warned && next.reason == reasons::APPROVAL_EXPIRED => Some((
            true,
            reasons::APPROVAL_EXPIRED,
            format!(
                "stops at {} (its approval runs out); an approver's `kubectl myownshell approve {name}` renews it",
                next.at.0
            ),
        )),
        (_, Some(next)) if next.warned => Some((
            true,
            if next.reason == reasons::IDLE { reasons::IDLE } else { reasons::MAX_RUN_TIME },
            format!("stops at {} ({}); `kubectl myownshell extend {name}` pushes it back", next.at.0, next.reason),
        )),
        (_, Some(next)) => {
            Some((false, reasons::NO_STOP_DUE, format!("the next stop is at {} ({})", next.at.0, next.reason)))
        }
        (_, None) if shell.spec.lifetime.is_some() => Some((false, reasons::NO_STOP_DUE, "no stop is due".to_owned())),
        (_, None) => None,
    }
}

/// `UpToDate`, once there is a Deployment or the shell is stopped: whether its pods run the
/// template built now (a stopped shell has no pods, and its next start builds the template of the
/// day).
fn up_to_date(shell: &MyOwnShell, decision: &Decision, stopped: bool) -> Value {
    let name = shell.metadata.name.as_deref().unwrap_or_default();
    match decision {
        Decision::Wait { until, class: Some(class) } => (
            false,
            reasons::CLASS_CHANGED,
            format!(
                "MyOwnShellClass {class:?} changed what it puts in its shells' pods (a default image, command or resources); the pods keep the earlier one until the shell next starts, at {until} if nobody connects before, or now with `kubectl myownshell update {name}` (which restarts the pods)"
            ),
        ),
        Decision::Wait { until, class: None } => (
            false,
            reasons::OPERATOR_UPGRADED,
            format!(
                "the pods run the pod template of an earlier operator release (or operator flags); it is applied when the shell next starts, at {until} if nobody connects before, or now with `kubectl myownshell update {name}` (which restarts the pods)"
            ),
        ),
        Decision::Current if stopped => (
            true,
            reasons::TEMPLATE_CURRENT,
            "stopped: its next start runs this operator release's pod template".to_owned(),
        ),
        Decision::Current | Decision::Roll(_) => {
            (true, reasons::TEMPLATE_CURRENT, "the pods run this operator release's pod template".to_owned())
        }
    }
}

/// The status `shell` should have, given what the reconcile learned. `previous` is the latest
/// status known (condition transition times carry over from it).
pub fn compute(
    shell: &MyOwnShell,
    previous: Option<&MyOwnShellStatus>,
    inputs: &Inputs<'_>,
    now: &Time,
) -> MyOwnShellStatus {
    let name = shell.metadata.name.as_deref().unwrap_or_default();
    let generation = shell.metadata.generation;
    let size = shell.spec.size.unwrap_or(defaults::SIZE);
    let wanted = inputs.plan.map_or(size, |p| p.replicas(size));
    let deployment = inputs.deployment;
    let observed = Observed::of(deployment);
    let previous_conditions = previous.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let condition = |type_: &str, (status, reason, message): Value| {
        let status = if status { "True" } else { "False" }.to_owned();
        let last_transition_time = previous_conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        Condition {
            type_: type_.to_owned(),
            status,
            reason: reason.to_owned(),
            message,
            observed_generation: generation,
            last_transition_time,
        }
    };
    let mut conditions = vec![
        condition(AVAILABLE, available(inputs, wanted, &observed)),
        condition(PROGRESSING, progressing(inputs, wanted, &observed)),
        condition(DEGRADED, degraded(inputs, &observed)),
    ];
    conditions.extend(inputs.plan.and_then(|p| stopping(shell, p)).map(|v| condition(STOPPING, v)));
    let stopped = matches!(inputs.plan.map(|p| &p.phase), Some(Phase::Stopped(_)));
    if deployment.is_some() || stopped {
        conditions.extend(inputs.template.map(|d| condition(UP_TO_DATE, up_to_date(shell, d, stopped))));
    }
    conditions.extend(inputs.home.map(|h| condition(HOME_READY, h.ready.clone())));
    conditions.extend(inputs.class_fit.map(|v| condition(FITS_CLASS, v.clone())));
    conditions.extend(inputs.approval.map(|v| condition(APPROVED, v.clone())));
    let (state, started_at, stopped) = match inputs.plan.map(|p| &p.phase) {
        Some(Phase::Running { started_at }) => {
            (Some("Running"), Some(myownshell_runtime::time::to_second(*started_at)), None)
        }
        Some(Phase::Paused) => (Some("Paused"), None, None),
        Some(Phase::Stopped(stop)) => (Some("Stopped"), None, Some(stop.clone())),
        None => (None, None, None),
    };
    MyOwnShellStatus {
        replicas: observed.replicas,
        ready_replicas: observed.ready,
        observed_generation: generation,
        selector: Some(labels::selector_string(&labels::instance_for(name, deployment))),
        // `deployment` is ours here (reconcile never passes a foreign one): record its uid, the
        // proof of ownership that survives the loss of its ownerReference (see `ownership`).
        deployment_uid: deployment.and_then(|d| d.metadata.uid.clone()),
        // The admission webhook's to write (it sees the connections); carried over so that its
        // writes never look like a difference to correct.
        last_connection: previous.and_then(|s| s.last_connection.clone()),
        conditions,
        state: state.map(str::to_owned),
        started_at,
        stopped,
        next_stop: inputs.plan.and_then(|p| p.next_stop.clone()),
        home: inputs.home.map(|h| h.status.clone()),
    }
}

/// Whether `status` is worth a write over `previous`, the latest status known (`None`: none yet).
///
/// Not when nothing changed; and not when only `replicas` moved while the pods roll out
/// (`Progressing=True`): a start's Deployment counts its pod a moment before the pod is ready,
/// and that count alone was a status write of its own, the third of a start (issue 41: 3.23 of
/// the controller's writes per start, and on a cluster whose pods take seconds to start, every
/// start). A rollout ends in a change that is written (`readyReplicas`, and `Progressing`
/// turning `False`: settled, or past its deadline), and that write carries the count, so it is
/// late by one step of a rollout and never left wrong once the rollout is over.
pub fn worth_writing(previous: Option<&MyOwnShellStatus>, status: &MyOwnShellStatus) -> bool {
    let Some(previous) = previous else { return true };
    if previous == status {
        return false;
    }
    let only_the_count = previous.replicas != status.replicas
        && *previous == MyOwnShellStatus { replicas: previous.replicas, ..status.clone() };
    !(only_the_count && rolling_out(status))
}

fn rolling_out(status: &MyOwnShellStatus) -> bool {
    true_condition(status, PROGRESSING).is_some()
}

/// `status`'s condition of type `type_`, if it is `True`.
pub fn true_condition<'a>(status: &'a MyOwnShellStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_ && c.status == "True")
}

/// The merge patch that makes the stored status `status`. Serialising leaves out an unset
/// field, and a merge patch keeps what it leaves out, so a field that no longer holds (the uid of
/// a Deployment that is gone, a stop that was undone) is cleared explicitly with `null`.
/// `lastConnection` is left out: the admission webhook writes it, and a copy the controller read
/// a moment ago must not overwrite a newer one.
pub fn merge_patch(status: &MyOwnShellStatus) -> serde_json::Value {
    let mut patch = serde_json::json!({ "status": status });
    if let Some(fields) = patch["status"].as_object_mut() {
        for cleared in ["deploymentUID", "state", "startedAt", "stopped", "nextStop"] {
            fields.entry(cleared).or_insert(serde_json::Value::Null);
        }
        fields.remove("lastConnection");
    }
    patch
}

/// The reason of `status`'s `Degraded=True`, if it is degraded.
pub fn degraded_reason(status: &MyOwnShellStatus) -> Option<&str> {
    true_condition(status, DEGRADED).map(|c| c.reason.as_str())
}

/// Whether `status` already shows `Degraded=True` for `reason`.
pub fn degraded_by(status: &MyOwnShellStatus, reason: &str) -> bool {
    degraded_reason(status) == Some(reason)
}

/// What the Deployment reports.
#[derive(Debug, Default)]
struct Observed {
    replicas: i32,
    ready: i32,
    updated: i32,
    /// The Deployment controller has seen the latest Deployment spec.
    current: bool,
    deadline_exceeded: Option<String>,
    replica_failure: Option<String>,
}

impl Observed {
    fn of(deployment: Option<&Deployment>) -> Self {
        let Some(d) = deployment else { return Self::default() };
        // Asked for no pods, a Deployment has none to count: its ReplicaSet leaves a pod out of
        // its count once the pod is being deleted, which kube-controller-manager writes a moment
        // after the scale-down. Said at once, the status of a stop is written once, not again
        // for each step of the Deployment's status on its way to 0 (issue 41: writes per stop).
        if d.spec.as_ref().and_then(|s| s.replicas) == Some(0) {
            return Self { current: true, ..Self::default() };
        }
        let Some(status) = &d.status else { return Self::default() };
        let conditions = status.conditions.as_deref().unwrap_or_default();
        let find = |type_: &str, status: &str, reason: Option<&str>| {
            conditions
                .iter()
                .find(|c| {
                    c.type_ == type_ && c.status == status && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
                })
                .map(|c| c.message.clone().unwrap_or_else(|| format!("Deployment condition {type_} is {status}")))
        };
        Self {
            replicas: status.replicas.unwrap_or(0),
            ready: status.ready_replicas.unwrap_or(0),
            updated: status.updated_replicas.unwrap_or(0),
            current: status.observed_generation >= d.metadata.generation,
            deadline_exceeded: find("Progressing", "False", Some(reasons::PROGRESS_DEADLINE_EXCEEDED)),
            replica_failure: find("ReplicaFailure", "True", None),
        }
    }

    /// Rolled out: the latest spec is observed, no old or surplus pods, all wanted pods ready.
    fn settled(&self, wanted: i32) -> bool {
        self.current && self.replicas == wanted && self.updated >= wanted && self.ready >= wanted
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
    use myownshell_api::MyOwnShellSpec;

    use super::*;

    fn time(secs: i64) -> Time {
        myownshell_runtime::time::at_second(secs)
    }

    fn shell(size: i32) -> MyOwnShell {
        let mut s = MyOwnShell::new("web", MyOwnShellSpec { size: Some(size), ..MyOwnShellSpec::default() });
        s.metadata.generation = Some(3);
        s
    }

    fn deployment(generation: i64, status: Option<DeploymentStatus>) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.generation = Some(generation);
        d.status = status;
        d
    }

    fn rolled(replicas: i32, updated: i32, ready: i32) -> Option<DeploymentStatus> {
        Some(DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(replicas),
            updated_replicas: Some(updated),
            ready_replicas: Some(ready),
            ..DeploymentStatus::default()
        })
    }

    fn of<'a>(deployment: Option<&'a Deployment>, failure: Option<&'a Failure>) -> Inputs<'a> {
        Inputs { deployment, failure, ..Inputs::default() }
    }

    fn summary(status: &MyOwnShellStatus) -> Vec<(String, String, String)> {
        status.conditions.iter().map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone())).collect()
    }

    fn triple(t: &str, s: &str, r: &str) -> (String, String, String) {
        (t.to_owned(), s.to_owned(), r.to_owned())
    }

    #[test]
    fn conditions_table() {
        let failure = Failure { reason: "DeploymentApplyFailed", message: "nope".into() };
        let deadline = Some(DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(2),
            conditions: Some(vec![DeploymentCondition {
                type_: "Progressing".into(),
                status: "False".into(),
                reason: Some("ProgressDeadlineExceeded".into()),
                message: Some("ReplicaSet web-1 has timed out progressing.".into()),
                ..DeploymentCondition::default()
            }]),
            ..DeploymentStatus::default()
        });
        type Case<'a> = (&'a str, i32, Option<Deployment>, Option<&'a Failure>, [(&'a str, &'a str, &'a str); 3]);
        let cases: Vec<Case> = vec![
            (
                "no Deployment yet",
                2,
                None,
                None,
                [
                    ("Available", "False", "DeploymentMissing"),
                    ("Progressing", "True", "RollingOut"),
                    ("Degraded", "False", "AsExpected"),
                ],
            ),
            (
                "created, nothing ready",
                2,
                Some(deployment(1, None)),
                None,
                [
                    ("Available", "False", "ShellsNotReady"),
                    ("Progressing", "True", "RollingOut"),
                    ("Degraded", "False", "AsExpected"),
                ],
            ),
            (
                "all ready",
                2,
                Some(deployment(1, rolled(2, 2, 2))),
                None,
                [
                    ("Available", "True", "ShellsReady"),
                    ("Progressing", "False", "RolloutComplete"),
                    ("Degraded", "False", "AsExpected"),
                ],
            ),
            (
                "scaled up: old pods ready, new spec not yet observed",
                3,
                Some(deployment(2, rolled(2, 2, 2))),
                None,
                [
                    ("Available", "False", "ShellsNotReady"),
                    ("Progressing", "True", "RollingOut"),
                    ("Degraded", "False", "AsExpected"),
                ],
            ),
            (
                "scaled down: surplus pods still there",
                1,
                Some(deployment(1, rolled(2, 2, 2))),
                None,
                [
                    ("Available", "True", "ShellsReady"),
                    ("Progressing", "True", "RollingOut"),
                    ("Degraded", "False", "AsExpected"),
                ],
            ),
            (
                "paused",
                0,
                Some(deployment(1, rolled(0, 0, 0))),
                None,
                [
                    ("Available", "False", "Paused"),
                    ("Progressing", "False", "Paused"),
                    ("Degraded", "False", "AsExpected"),
                ],
            ),
            (
                "apply failed",
                2,
                Some(deployment(1, rolled(2, 2, 2))),
                Some(&failure),
                [
                    ("Available", "True", "ShellsReady"),
                    ("Progressing", "False", "RolloutComplete"),
                    ("Degraded", "True", "DeploymentApplyFailed"),
                ],
            ),
            (
                "progress deadline exceeded",
                2,
                Some(deployment(1, deadline)),
                None,
                [
                    ("Available", "False", "ShellsNotReady"),
                    ("Progressing", "False", "ProgressDeadlineExceeded"),
                    ("Degraded", "True", "ProgressDeadlineExceeded"),
                ],
            ),
        ];
        for (case, size, deployment, failure, want) in cases {
            let status = compute(&shell(size), None, &of(deployment.as_ref(), failure), &time(100));
            let want: Vec<_> = want.iter().map(|(t, s, r)| triple(t, s, r)).collect();
            assert_eq!(summary(&status), want, "{case}");
            assert!(status.conditions.iter().all(|c| !c.message.is_empty()), "{case}: every condition explains itself");
            assert!(status.conditions.iter().all(|c| c.observed_generation == Some(3)), "{case}");
        }
    }

    /// A Deployment scaled to 0 counts no pods from the moment it is asked (its ReplicaSet no
    /// longer counts a pod being deleted): a stop's status is final at once.
    #[test]
    fn a_deployment_asked_for_no_pods_counts_none_at_once() {
        let mut stopped = deployment(2, rolled(2, 2, 2));
        stopped.spec = Some(k8s_openapi::api::apps::v1::DeploymentSpec { replicas: Some(0), ..Default::default() });
        let status = compute(&shell(0), None, &of(Some(&stopped), None), &time(100));
        assert_eq!((status.replicas, status.ready_replicas), (0, 0));
        let progressing = status.conditions.iter().find(|c| c.type_ == PROGRESSING).unwrap();
        assert_eq!((progressing.status.as_str(), progressing.reason.as_str()), ("False", reasons::PAUSED));
    }

    /// A rollout's steps (the new template applied, its pod made beside the old one still ready,
    /// the new one ready too) say the same `Progressing`: each step is no status write of its own
    /// unless a count in the status moved.
    #[test]
    fn a_rollout_says_the_same_progressing_at_each_step() {
        let steps = [
            ("applied, not yet seen", deployment(2, rolled(1, 0, 1))),
            ("the new pod made", deployment(1, rolled(2, 1, 1))),
            ("the new pod ready beside the old", deployment(1, rolled(2, 1, 2))),
        ];
        let progressing = |d: &Deployment| {
            let status = compute(&shell(1), None, &of(Some(d), None), &time(100));
            let c = status.conditions.into_iter().find(|c| c.type_ == PROGRESSING).unwrap();
            (c.status, c.reason, c.message)
        };
        let first = progressing(&steps[0].1);
        assert_eq!((first.0.as_str(), first.1.as_str()), ("True", reasons::ROLLING_OUT));
        for (step, d) in &steps {
            assert_eq!(progressing(d), first, "{step}");
        }
    }

    #[test]
    fn a_stopped_shell_without_a_deployment_reads_stopped_and_current() {
        let stop = myownshell_api::Stop { reason: "Requested".into(), at: time(90), message: "asked".into() };
        let plan =
            Plan { phase: Phase::Stopped(stop), next_stop: None, happenings: vec![], wake_at: None, delete: false };
        let inputs = Inputs { plan: Some(&plan), template: Some(&Decision::Current), ..Inputs::default() };
        let status = compute(&shell(1), None, &inputs, &time(100));
        let read = |type_: &str| {
            let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_}"));
            (c.status.clone(), c.reason.clone())
        };
        // (condition, status, reason)
        let cases = [
            (AVAILABLE, "False", reasons::STOPPED),
            (PROGRESSING, "False", reasons::STOPPED),
            (DEGRADED, "False", reasons::AS_EXPECTED),
            (STOPPING, "False", reasons::STOPPED),
            (UP_TO_DATE, "True", reasons::TEMPLATE_CURRENT),
        ];
        for (type_, want_status, want_reason) in cases {
            assert_eq!(read(type_), (want_status.to_owned(), want_reason.to_owned()), "{type_}");
        }
        assert_eq!(
            (status.replicas, status.deployment_uid.as_deref(), status.state.as_deref()),
            (0, None, Some("Stopped"))
        );
    }

    #[test]
    fn counts_selector_and_generation() {
        let status = compute(&shell(2), None, &of(Some(&deployment(1, rolled(2, 2, 1))), None), &time(100));
        assert_eq!((status.replicas, status.ready_replicas), (2, 1));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            status.selector.as_deref(),
            Some("app.kubernetes.io/instance=web,app.kubernetes.io/name=myownshell")
        );
        assert_eq!(status.conditions[0].message, "1 of 2 shell pods are ready");
    }

    #[test]
    fn the_merge_patch_clears_a_recorded_uid_that_no_longer_holds() {
        let recorded = MyOwnShellStatus { deployment_uid: Some("deploy-uid".into()), ..MyOwnShellStatus::default() };
        assert_eq!(merge_patch(&recorded)["status"]["deploymentUID"], "deploy-uid");
        let cleared = merge_patch(&MyOwnShellStatus::default());
        assert!(cleared["status"]["deploymentUID"].is_null(), "{cleared}");
        assert!(cleared["status"].as_object().is_some_and(|s| s.contains_key("deploymentUID")), "{cleared}");
    }

    #[test]
    fn the_deployment_uid_is_recorded_while_the_deployment_exists() {
        let mut ours = deployment(1, rolled(1, 1, 1));
        ours.metadata.uid = Some("deploy-uid".into());
        let status = compute(&shell(1), None, &of(Some(&ours), None), &time(100));
        assert_eq!(status.deployment_uid.as_deref(), Some("deploy-uid"));
        let gone = compute(&shell(1), Some(&status), &of(None, None), &time(101));
        assert_eq!(gone.deployment_uid, None, "a Deployment that is gone is no proof of anything");
    }

    #[test]
    fn last_transition_time_moves_only_on_a_transition() {
        let ready = Some(deployment(1, rolled(2, 2, 2)));
        let first = compute(&shell(2), None, &of(None, None), &time(100));
        assert!(first.conditions.iter().all(|c| c.last_transition_time == time(100)));

        // Same statuses later (a message may change): times stay.
        let again = compute(&shell(2), Some(&first), &of(Some(&deployment(1, rolled(2, 2, 1))), None), &time(200));
        let times: Vec<_> = again.conditions.iter().map(|c| c.last_transition_time.clone()).collect();
        assert_eq!(times, vec![time(100), time(100), time(100)]);

        // Available and Progressing flip; Degraded does not.
        let flipped = compute(&shell(2), Some(&again), &of(ready.as_ref(), None), &time(300));
        let times: Vec<_> = flipped.conditions.iter().map(|c| c.last_transition_time.clone()).collect();
        assert_eq!(times, vec![time(300), time(300), time(100)]);

        // Nothing changed at all: the status is equal, so the controller writes nothing.
        assert_eq!(compute(&shell(2), Some(&flipped), &of(ready.as_ref(), None), &time(400)), flipped);
    }

    #[test]
    fn a_pod_count_alone_waits_for_the_rollouts_next_change() {
        let at = |status: Option<DeploymentStatus>, previous: Option<&MyOwnShellStatus>| {
            compute(&shell(1), previous, &of(Some(&deployment(1, status)), None), &time(100))
        };
        // A start: the Deployment made, its pod counted, the pod ready.
        let made = at(None, None);
        let counted = at(rolled(1, 1, 0), Some(&made));
        let ready = at(rolled(1, 1, 1), Some(&counted));
        let lied = MyOwnShellStatus { replicas: 5, ..ready.clone() };
        let cases: [(&str, Option<&MyOwnShellStatus>, &MyOwnShellStatus, bool); 7] = [
            ("no status yet", None, &made, true),
            ("nothing changed", Some(&made), &made, false),
            ("the count alone, rolling out", Some(&made), &counted, false),
            ("ready after the count was held", Some(&made), &ready, true),
            ("ready after the count was written", Some(&counted), &ready, true),
            ("the count alone, settled: someone else's count put right", Some(&lied), &ready, true),
            ("a start's first status after a stop", Some(&ready), &made, true),
        ];
        for (what, previous, status, worth) in cases {
            assert_eq!(worth_writing(previous, status), worth, "{what}");
        }
        assert_eq!((made.replicas, counted.replicas), (0, 1), "the case above moves the count alone");
    }
}
