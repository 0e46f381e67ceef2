//! `kubectl myownshell ls`: one line per shell.

use k8s_openapi::jiff::Timestamp;
use myownshell_api::MyOwnShell;
use myownshell_api::names::conditions::{APPROVED, DEGRADED, HOME_READY, STOPPING, UP_TO_DATE};
use myownshell_runtime::time::format_age;

/// One line of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The namespace (shown with `-A`).
    pub namespace: String,
    /// The shell.
    pub name: String,
    /// `spec.className`, or `-`.
    pub class: String,
    /// `spec.owner`, or `-` for a shell from before owners.
    pub owner: String,
    /// Running, Stopped, Paused, …
    pub state: String,
    /// `ready/size`.
    pub ready: String,
    /// `True`, or `False` while a template changed by an operator upgrade waits (`-`: not known).
    pub up_to_date: String,
    /// How long until the next stop (`-`: none due).
    pub stops_in: String,
    /// The home: its size once usable, else why not (`HomePending`, …); `-` without one.
    pub home: String,
    /// Why it stopped, why it will, or what is wrong.
    pub reason: String,
}

/// The line for `shell` at `now`.
pub fn row(shell: &MyOwnShell, now: Timestamp) -> Row {
    let status = shell.status.clone().unwrap_or_default();
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_ && c.status == "True");
    let outdated = status.conditions.iter().find(|c| c.type_ == UP_TO_DATE && c.status == "False");
    // A shell waiting for approval says for whom: how many of how many, who rejected it.
    let unapproved = status.conditions.iter().find(|c| c.type_ == APPROVED && c.status == "False");
    let reason = match (&status.stopped, condition(DEGRADED), unapproved, condition(STOPPING), outdated) {
        (Some(stop), _, _, _, _) => stop.reason.clone(),
        (None, Some(degraded), _, _, _) => degraded.reason.clone(),
        (None, None, Some(waiting), _, _) => format!("{}: {}", waiting.reason, waiting.message),
        (None, None, None, Some(stopping), _) => stopping.reason.clone(),
        (None, None, None, None, Some(outdated)) => outdated.reason.clone(),
        _ => String::new(),
    };
    let up_to_date =
        status.conditions.iter().find(|c| c.type_ == UP_TO_DATE).map_or_else(|| "-".to_owned(), |c| c.status.clone());
    let stops_in = match &status.next_stop {
        Some(next) if status.stopped.is_none() => format_age(next.at.0.as_second() - now.as_second()),
        _ => "-".to_owned(),
    };
    let home = match (&shell.spec.home, status.conditions.iter().find(|c| c.type_ == HOME_READY)) {
        (None, _) => "-".to_owned(),
        (Some(_), None) => "Pending".to_owned(),
        (Some(_), Some(c)) if c.status == "True" => {
            status.home.as_ref().and_then(|h| h.capacity.as_ref()).map_or_else(|| c.reason.clone(), |q| q.0.clone())
        }
        (Some(_), Some(c)) => c.reason.clone(),
    };
    Row {
        namespace: shell.metadata.namespace.clone().unwrap_or_default(),
        name: shell.metadata.name.clone().unwrap_or_default(),
        class: shell.spec.class_name.clone().unwrap_or_else(|| "-".to_owned()),
        owner: shell.spec.owner.clone().unwrap_or_else(|| "-".to_owned()),
        state: status.state.clone().unwrap_or_else(|| "Pending".to_owned()),
        ready: format!("{}/{}", status.ready_replicas, shell.spec.size.unwrap_or(myownshell_api::defaults::SIZE)),
        up_to_date,
        stops_in,
        home,
        reason,
    }
}

/// The table, columns padded as kubectl pads them; with the namespace when `all_namespaces`.
pub fn render(rows: &[Row], all_namespaces: bool) -> String {
    let mut lines: Vec<Vec<&str>> =
        vec![vec!["NAMESPACE", "NAME", "CLASS", "OWNER", "STATE", "READY", "UP-TO-DATE", "STOPS IN", "HOME", "REASON"]];
    for r in rows {
        let cells = [
            &r.namespace,
            &r.name,
            &r.class,
            &r.owner,
            &r.state,
            &r.ready,
            &r.up_to_date,
            &r.stops_in,
            &r.home,
            &r.reason,
        ];
        lines.push(cells.iter().map(|c| c.as_str()).collect());
    }
    if !all_namespaces {
        for line in &mut lines {
            line.remove(0);
        }
    }
    crate::table::render(&lines)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use myownshell_api::{MyOwnShellSpec, MyOwnShellStatus, NextStop, Stop};
    use myownshell_runtime::time::at_second;

    use super::*;

    fn at(seconds: i64) -> Time {
        at_second(seconds)
    }

    fn shell(name: &str, status: MyOwnShellStatus) -> MyOwnShell {
        let spec = MyOwnShellSpec { size: Some(1), owner: Some("alice".into()), ..MyOwnShellSpec::default() };
        let mut s = MyOwnShell::new(name, spec);
        s.metadata.namespace = Some("team".into());
        s.status = Some(status);
        s
    }

    #[test]
    fn each_state_in_a_line() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let degraded = Condition {
            type_: DEGRADED.into(),
            status: "True".into(),
            reason: "ImagePullFailed".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: at(0),
        };
        let cases = [
            (
                shell(
                    "idle",
                    MyOwnShellStatus {
                        state: Some("Running".into()),
                        ready_replicas: 1,
                        next_stop: Some(NextStop { at: at(1_000_299), reason: "Idle".into(), warned: false }),
                        ..MyOwnShellStatus::default()
                    },
                ),
                ("Running", "1/1", "4m59s", ""),
            ),
            (
                shell(
                    "gone",
                    MyOwnShellStatus {
                        state: Some("Stopped".into()),
                        stopped: Some(Stop { reason: "MaxRunTime".into(), at: at(999_000), message: String::new() }),
                        ..MyOwnShellStatus::default()
                    },
                ),
                ("Stopped", "0/1", "-", "MaxRunTime"),
            ),
            (
                shell(
                    "broken",
                    MyOwnShellStatus {
                        state: Some("Running".into()),
                        conditions: vec![degraded.clone()],
                        ..MyOwnShellStatus::default()
                    },
                ),
                ("Running", "0/1", "-", "ImagePullFailed"),
            ),
            (shell("new", MyOwnShellStatus::default()), ("Pending", "0/1", "-", "")),
            (
                shell(
                    "outdated",
                    MyOwnShellStatus {
                        state: Some("Running".into()),
                        ready_replicas: 1,
                        conditions: vec![Condition {
                            type_: UP_TO_DATE.into(),
                            status: "False".into(),
                            reason: "OperatorUpgraded".into(),
                            ..degraded.clone()
                        }],
                        ..MyOwnShellStatus::default()
                    },
                ),
                ("Running", "1/1", "-", "OperatorUpgraded"),
            ),
            (
                shell(
                    "guarded",
                    MyOwnShellStatus {
                        state: Some("Paused".into()),
                        conditions: vec![Condition {
                            type_: APPROVED.into(),
                            status: "False".into(),
                            reason: "WaitingForApproval".into(),
                            message: "waiting for approval: 1 of 2 (bob)".into(),
                            ..degraded.clone()
                        }],
                        ..MyOwnShellStatus::default()
                    },
                ),
                ("Paused", "0/1", "-", "WaitingForApproval: waiting for approval: 1 of 2 (bob)"),
            ),
        ];
        for (shell, (state, ready, stops, reason)) in cases {
            let r = row(&shell, now);
            assert_eq!(
                (r.state.as_str(), r.ready.as_str(), r.stops_in.as_str(), r.reason.as_str()),
                (state, ready, stops, reason),
                "{}",
                r.name
            );
        }
    }

    #[test]
    fn the_home_column() {
        let now = Timestamp::from_second(0).unwrap();
        let ready = |status: &str, reason: &str| Condition {
            type_: HOME_READY.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: at(0),
        };
        let with_home = |status: MyOwnShellStatus| {
            let mut s = shell("h", status);
            s.spec.home = Some(myownshell_api::Home::default());
            s
        };
        let bound = MyOwnShellStatus {
            conditions: vec![ready("True", "HomeBound")],
            home: Some(myownshell_api::HomeStatus {
                claim_name: "h".into(),
                phase: "Bound".into(),
                capacity: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into())),
                node: None,
            }),
            ..MyOwnShellStatus::default()
        };
        let gone =
            MyOwnShellStatus { conditions: vec![ready("False", "HomeNodeUnavailable")], ..MyOwnShellStatus::default() };
        let rows = [
            (shell("none", MyOwnShellStatus::default()), "-"),
            (with_home(MyOwnShellStatus::default()), "Pending"),
            (with_home(bound), "1Gi"),
            (with_home(gone), "HomeNodeUnavailable"),
        ];
        for (shell, want) in rows {
            assert_eq!(row(&shell, now).home, want);
        }
    }

    #[test]
    fn the_table_lines_up() {
        let now = Timestamp::from_second(0).unwrap();
        let rows = vec![
            row(&shell("a", MyOwnShellStatus::default()), now),
            row(&shell("longer-name", MyOwnShellStatus::default()), now),
        ];
        let table = render(&rows, false);
        assert_eq!(
            table,
            "NAME          CLASS   OWNER   STATE     READY   UP-TO-DATE   STOPS IN   HOME   REASON\n\
             a             -       alice   Pending   0/1     -            -          -\n\
             longer-name   -       alice   Pending   0/1     -            -          -\n"
        );
        assert!(render(&rows, true).starts_with("NAMESPACE   NAME"));
    }
}
