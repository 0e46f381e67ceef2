//! What a status write changes, in a few words per field, for the debug log of each write: the
//! bench's writes per start and stop are counted by the apiserver, and this says which
//! transition caused each of them (`RUST_LOG=myownshell_controller::reconcile=debug`).

use myownshell_api::MyOwnShellStatus;
use serde_json::Value;

/// The fields of `status` that differ from `previous` (`None`: no status yet), by their JSON
/// names in alphabetical order; a condition by its type, with its reason before and after.
pub fn changes(previous: Option<&MyOwnShellStatus>, status: &MyOwnShellStatus) -> Vec<String> {
    let (before, after) = (fields(previous), fields(Some(status)));
    let mut changed = Vec::new();
    for (key, value) in &after {
        if key == "conditions" {
            changed.extend(condition_changes(before.get(key), value));
        } else if before.get(key) != Some(value) {
            changed.push(key.clone());
        }
    }
    changed.extend(before.keys().filter(|k| !after.contains_key(*k)).map(|k| format!("{k} cleared")));
    changed
}

fn fields(status: Option<&MyOwnShellStatus>) -> serde_json::Map<String, Value> {
    match status.map(serde_json::to_value) {
        Some(Ok(Value::Object(fields))) => fields,
        _ => serde_json::Map::new(),
    }
}

/// What a condition says: its status, reason and message.
fn said(c: &Value) -> [Option<&Value>; 3] {
    [c.get("status"), c.get("reason"), c.get("message")]
}

/// `Type: OldReason -> NewReason` for each condition whose status, reason or message changed
/// (`-` for one that was not there).
fn condition_changes(before: Option<&Value>, after: &Value) -> Vec<String> {
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let (before, after) = (list(before), list(Some(after)));
    let of_type = |list: &[Value], type_: &Value| list.iter().find(|c| c.get("type") == Some(type_)).cloned();
    let reason = |c: Option<&Value>| c.and_then(|c| c.get("reason")).and_then(Value::as_str).unwrap_or("-").to_owned();
    let mut changed = Vec::new();
    for condition in &after {
        let Some(type_) = condition.get("type") else { continue };
        let old = of_type(&before, type_);
        if old.as_ref().map(said) != Some(said(condition)) {
            let name = type_.as_str().unwrap_or_default();
            changed.push(format!("{name}: {} -> {}", reason(old.as_ref()), reason(Some(condition))));
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;

    fn condition(type_: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: "False".into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: myownshell_runtime::time::at_second(0),
            observed_generation: None,
        }
    }

    fn status(replicas: i32, conditions: Vec<Condition>) -> MyOwnShellStatus {
        MyOwnShellStatus { replicas, conditions, ..MyOwnShellStatus::default() }
    }

    #[test]
    fn each_changed_field_and_condition_is_named() {
        let pending = condition("Available", "ShellsNotReady", "0 of 1");
        let ready = condition("Available", "ShellsReady", "1 of 1");
        let cases: Vec<(&str, Option<MyOwnShellStatus>, MyOwnShellStatus, Vec<&str>)> = vec![
            ("the same", Some(status(1, vec![ready.clone()])), status(1, vec![ready.clone()]), vec![]),
            ("a count", Some(status(0, vec![pending.clone()])), status(1, vec![pending.clone()]), vec!["replicas"]),
            (
                "a reason",
                Some(status(1, vec![pending.clone()])),
                status(1, vec![ready.clone()]),
                vec!["Available: ShellsNotReady -> ShellsReady"],
            ),
            (
                "a message only",
                Some(status(1, vec![pending.clone()])),
                status(1, vec![condition("Available", "ShellsNotReady", "1 of 2")]),
                vec!["Available: ShellsNotReady -> ShellsNotReady"],
            ),
            (
                "a new condition",
                Some(status(1, vec![])),
                status(1, vec![ready.clone()]),
                vec!["Available: - -> ShellsReady"],
            ),
            (
                "no status before",
                None,
                status(1, vec![ready]),
                vec!["Available: - -> ShellsReady", "readyReplicas", "replicas"],
            ),
        ];
        for (what, previous, now, expected) in cases {
            assert_eq!(changes(previous.as_ref(), &now), expected, "{what}");
        }
    }

    #[test]
    fn a_field_no_longer_set_is_named_as_cleared() {
        let before = MyOwnShellStatus { state: Some("Running".into()), ..MyOwnShellStatus::default() };
        assert_eq!(changes(Some(&before), &MyOwnShellStatus::default()), vec!["state cleared"]);
    }
}
