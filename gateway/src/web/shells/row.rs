//! One shell as the page shows it: its state in a word and why, and what `kubectl describe`
//! would say of it (its conditions, why it stopped, when its lifetime stops it next), so that
//! nobody needs kubectl to find out why a shell is not running.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use myownshell_api::MyOwnShell;
use myownshell_api::names::conditions::{APPROVED, AVAILABLE, DEGRADED};
use serde::Serialize;

/// One shell in the page's list.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShellRow {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `spec.owner`, as the webhook stamped it.
    pub owner: String,
    /// `Running`, `Starting`, `Stopped`, `Degraded`, `Waiting for approval` or `Deleting`.
    pub state: String,
    /// Why, in the controller's or the webhook's words (empty while it simply runs).
    pub reason: String,
    /// What the shell waits for, when its class asks for approval and it has none (its
    /// `Approved` condition's words); the page offers approvers an Approve button.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for_approval: Option<String>,
    /// Its class, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    /// `spec.stopped`: stopped on request (the page offers Start), as opposed to running.
    pub stopped: bool,
    /// Its home's size and the claim's phase, when it has a home.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<HomeRow>,
    /// When its lifetime stops it next, and why; `warned` once the warning went out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_stop: Option<NextStopRow>,
    /// Every condition, as `kubectl describe` lists them.
    pub conditions: Vec<ConditionRow>,
    /// Who else may connect: users and groups.
    pub shared_with: Vec<String>,
}

/// A shell's home.
#[derive(Serialize, Debug, PartialEq)]
pub struct HomeRow {
    /// `spec.home.size`.
    pub size: String,
    /// The claim's phase (`Bound`, `Pending`), once seen.
    pub phase: String,
}

/// A coming lifetime stop.
#[derive(Serialize, Debug, PartialEq)]
pub struct NextStopRow {
    /// When.
    pub at: Time,
    /// `MaxRunTime`, `IdleTimeout`, `Approval`.
    pub reason: String,
    /// Whether the warning went out.
    pub warned: bool,
}

/// One condition.
#[derive(Serialize, Debug, PartialEq)]
pub struct ConditionRow {
    #[serde(rename = "type")]
    /// `Available`, `Degraded`, `HomeReady`, …
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// In one CamelCase word.
    pub reason: String,
    /// In a sentence.
    pub message: String,
}

/// The state in a word, and why.
fn state(shell: &MyOwnShell) -> (String, String) {
    if shell.metadata.deletion_timestamp.is_some() {
        return ("Deleting".to_owned(), "its pods and, as spec.home.onDelete says, its home go first".to_owned());
    }
    let Some(status) = &shell.status else { return ("Starting".to_owned(), String::new()) };
    let condition = |t: &str| status.conditions.iter().find(|c| c.type_ == t && c.status == "True");
    let unapproved = status.conditions.iter().find(|c| c.type_ == APPROVED && c.status == "False");
    match (&status.stopped, condition(DEGRADED), unapproved, condition(AVAILABLE)) {
        (Some(stop), _, _, _) => ("Stopped".to_owned(), stop.reason.clone()),
        (None, Some(degraded), _, _) => ("Degraded".to_owned(), degraded.message.clone()),
        (None, None, Some(waiting), _) => ("Waiting for approval".to_owned(), waiting.message.clone()),
        (None, None, None, Some(_)) => ("Running".to_owned(), String::new()),
        (None, None, None, None) => ("Starting".to_owned(), String::new()),
    }
}

/// The page's row of `shell`.
pub fn row(shell: &MyOwnShell) -> ShellRow {
    let status = shell.status.as_ref();
    let (state, reason) = state(shell);
    let shared = shell.spec.shared_with.as_ref();
    let users = shared.and_then(|s| s.users.clone()).unwrap_or_default();
    let groups = shared.and_then(|s| s.groups.clone()).unwrap_or_default().into_iter().map(|g| format!("group {g}"));
    ShellRow {
        namespace: shell.metadata.namespace.clone().unwrap_or_default(),
        name: shell.metadata.name.clone().unwrap_or_default(),
        owner: shell.spec.owner.clone().unwrap_or_default(),
        state,
        reason,
        waiting_for_approval: status
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == APPROVED && c.status == "False"))
            .map(|c| c.message.clone()),
        class_name: shell.spec.class_name.clone(),
        stopped: shell.spec.stopped == Some(true),
        home: shell.spec.home.as_ref().map(|home| HomeRow {
            size: home.size.as_ref().map(|q| q.0.clone()).unwrap_or_default(),
            phase: status.and_then(|s| s.home.as_ref()).map(|h| h.phase.clone()).unwrap_or_default(),
        }),
        next_stop: status.and_then(|s| s.next_stop.as_ref()).map(|next| NextStopRow {
            at: next.at.clone(),
            reason: next.reason.clone(),
            warned: next.warned,
        }),
        conditions: status.map(|s| s.conditions.iter().map(condition_row).collect()).unwrap_or_default(),
        shared_with: users.into_iter().chain(groups).collect(),
    }
}

fn condition_row(c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition) -> ConditionRow {
    ConditionRow {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use myownshell_api::{MyOwnShell, MyOwnShellSpec, MyOwnShellStatus, Stop};

    use super::state;

    fn condition(type_: &str, status: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "Because".into(),
            message: message.into(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn shell(status: Option<MyOwnShellStatus>, deleting: bool) -> MyOwnShell {
        let mut shell = MyOwnShell::new("dev", MyOwnShellSpec::default());
        shell.status = status;
        if deleting {
            shell.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        shell
    }

    #[test]
    fn the_state_in_a_word_and_why() {
        let stop = Stop { reason: "IdleTimeout".into(), at: Time(Timestamp::UNIX_EPOCH), message: String::new() };
        let with = |conditions: Vec<Condition>, stopped: Option<Stop>| {
            Some(MyOwnShellStatus { conditions, stopped, ..MyOwnShellStatus::default() })
        };
        let available = condition("Available", "True", "");
        let cases = [
            ("no status yet", shell(None, false), ("Starting", "")),
            ("available", shell(with(vec![available.clone()], None), false), ("Running", "")),
            (
                "stopped wins",
                shell(with(vec![available.clone()], Some(stop.clone())), false),
                ("Stopped", "IdleTimeout"),
            ),
            (
                "degraded says why",
                shell(with(vec![condition("Degraded", "True", "image not found")], None), false),
                ("Degraded", "image not found"),
            ),
            (
                "waiting for approval",
                shell(with(vec![condition("Approved", "False", "needs 1 approval")], None), false),
                ("Waiting for approval", "needs 1 approval"),
            ),
            ("deleting wins over all", shell(with(vec![available], Some(stop)), true), ("Deleting", "")),
        ];
        for (name, shell, (want_state, want_reason)) in cases {
            let (got_state, got_reason) = state(&shell);
            assert_eq!(got_state, want_state, "{name}");
            if want_state != "Deleting" {
                assert_eq!(got_reason, want_reason, "{name}");
            }
        }
    }
}
