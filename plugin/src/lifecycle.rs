//! `start`, `stop`, `extend`, `update`: merge patches of the shell's spec (so, like any spec
//! change, only its owner may make them). None but `update` touches the pod template: a running
//! shell keeps its pods, and what is in them.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use myownshell_api::MyOwnShell;
use myownshell_runtime::time::{plus, to_second};
use serde_json::{Value, json};

pub use myownshell_api::lifecycle::DEFAULT_EXTENSION;

fn time(t: Timestamp) -> Value {
    serde_json::to_value(to_second(t)).unwrap_or(Value::Null)
}

/// `start`: run again, clocks restarted from `now`.
pub fn start_patch(now: Timestamp) -> Value {
    myownshell_api::lifecycle::start_patch(&to_second(now))
}

/// `update`: this operator release's pod template, now.
pub fn update_patch(now: Timestamp) -> Value {
    json!({"spec": {"updateRequestedAt": time(now)}})
}

pub use myownshell_api::lifecycle::stop_patch;

/// `extend`: no lifetime stop before `now + by`. Returns the patch and that time.
pub fn extend_patch(now: Timestamp, by: Duration) -> (Value, Timestamp) {
    let until = plus(now, by);
    (myownshell_api::lifecycle::extend_patch(&to_second(until)), until)
}

/// How long `extend` pushes the stop back when no duration is given (the gateway's extend
/// button pushes it as far): the shell's idle timeout, else [`DEFAULT_EXTENSION`].
pub fn default_extension(shell: &MyOwnShell) -> Duration {
    myownshell_api::lifecycle::idle_timeout(shell)
        .and_then(|t| myownshell_runtime::time::parse_duration(t).ok())
        .unwrap_or(DEFAULT_EXTENSION)
}

/// Merge-patch shell `name` with `patch`.
pub async fn patch(shells: &kube::Api<MyOwnShell>, name: &str, patch: &Value) -> Result<(), kube::Error> {
    let params = kube::api::PatchParams::default();
    shells.patch(name, &params, &kube::api::Patch::Merge(patch)).await.map(drop)
}

/// The JSON patch that adds an approval (the webhook records who, why they may and when):
/// appended to `spec.approvals`, or the list made when the shell has none.
pub fn approval_patch(has_list: bool, decision: myownshell_api::Decision, reason: Option<&str>) -> Value {
    let entry = serde_json::to_value(myownshell_api::Approval {
        decision,
        reason: reason.map(str::to_owned),
        ..myownshell_api::Approval::default()
    })
    .unwrap_or(Value::Null);
    match has_list {
        true => json!([{"op": "add", "path": "/spec/approvals/-", "value": entry}]),
        false => json!([{"op": "add", "path": "/spec/approvals", "value": [entry]}]),
    }
}

/// Add an approval (or rejection) of shell `name` as the caller.
pub async fn add_approval(
    shells: &kube::Api<MyOwnShell>,
    name: &str,
    decision: myownshell_api::Decision,
    reason: Option<&str>,
) -> Result<(), kube::Error> {
    let shell = shells.get(name).await?;
    let patch = approval_patch(shell.spec.approvals.is_some(), decision, reason);
    let patch = kube::api::Patch::<()>::Json(serde_json::from_value(patch).map_err(kube::Error::SerdeError)?);
    shells.patch(name, &kube::api::PatchParams::default(), &patch).await.map(drop)
}

/// What a shell's `Approved` condition says, or that it needs no approval.
pub fn approval_words(shell: &MyOwnShell) -> String {
    let condition = shell
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == myownshell_api::names::conditions::APPROVED));
    condition.map_or_else(|| "recorded (the controller has not looked yet)".to_owned(), |c| c.message.clone())
}

/// Start shell `name` now.
pub async fn apply_start(shells: &kube::Api<MyOwnShell>, name: &str) -> Result<(), kube::Error> {
    patch(shells, name, &start_patch(Timestamp::now())).await
}

#[cfg(test)]
mod tests {
    use myownshell_api::{Lifetime, MyOwnShellSpec};

    use super::*;

    #[test]
    fn the_patches() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(
            start_patch(now),
            json!({"spec": {"stopped": false, "lifetime": {"restartedAt": "2027-01-15T08:00:00Z"}}})
        );
        assert_eq!(stop_patch(), json!({"spec": {"stopped": true}}));
        assert_eq!(
            approval_patch(false, myownshell_api::Decision::Approve, Some("on call")),
            json!([{"op": "add", "path": "/spec/approvals", "value": [{"decision": "Approve", "reason": "on call"}]}])
        );
        assert_eq!(
            approval_patch(true, myownshell_api::Decision::Reject, None),
            json!([{"op": "add", "path": "/spec/approvals/-", "value": {"decision": "Reject"}}])
        );
        assert_eq!(update_patch(now), json!({"spec": {"updateRequestedAt": "2027-01-15T08:00:00Z"}}));
        let (patch, until) = extend_patch(now, Duration::from_secs(1800));
        assert_eq!(patch, json!({"spec": {"lifetime": {"extendedUntil": "2027-01-15T08:30:00Z"}}}));
        assert_eq!(until.as_second() - now.as_second(), 1800);
    }

    #[test]
    fn extend_defaults_to_the_idle_timeout() {
        let mut shell = MyOwnShell::new("web", MyOwnShellSpec::default());
        assert_eq!(default_extension(&shell), DEFAULT_EXTENSION);
        shell.spec.lifetime = Some(Lifetime { idle_timeout: Some("30m".into()), ..Lifetime::default() });
        assert_eq!(default_extension(&shell), Duration::from_secs(1800));
    }
}
