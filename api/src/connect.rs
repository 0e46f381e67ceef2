//! Which pod of a shell a connection goes to, or what it waits for: the one rule `kubectl
//! myownshell connect` and the gateway both follow, as a pure function of the shell and its
//! pods.

use k8s_openapi::api::core::v1::Pod;

use crate::MyOwnShell;
use crate::names::conditions::{AVAILABLE, DEGRADED};

/// What waiting for `shell` comes to, given its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// This pod is ready: connect to it.
    Ready(String),
    /// Still waiting; for what.
    Waiting(String),
    /// The shell is stopped: say so and how to start it.
    Stopped(String),
}

/// A pod's state in a few words: `Pending`, `ContainerCreating`, `ImagePullBackOff`, …
fn pod_state(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let waiting =
        status.container_statuses.iter().flatten().find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
    let unschedulable = status.conditions.iter().flatten().find(|c| c.type_ == "PodScheduled" && c.status == "False");
    match (waiting, unschedulable) {
        (Some(reason), _) => reason,
        (None, Some(c)) => format!("unschedulable: {}", c.message.clone().unwrap_or_default()),
        (None, None) => status.phase.unwrap_or_else(|| "Pending".to_owned()),
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What `connect` is waiting for, or the pod to connect to (the oldest ready one).
pub fn wait_for(shell: &MyOwnShell, pods: &[Pod]) -> Wait {
    let name = shell.metadata.name.clone().unwrap_or_default();
    let status = shell.status.clone().unwrap_or_default();
    if let Some(stop) = &status.stopped {
        return Wait::Stopped(format!(
            "shell {name} is stopped ({}: {}); start it with `kubectl myownshell start {name}`, or connect with --start",
            stop.reason, stop.message
        ));
    }
    if shell.spec.size == Some(0) {
        return Wait::Stopped(format!("shell {name} is paused (size 0); give it a size to connect"));
    }
    let mut ready: Vec<&Pod> = pods.iter().filter(|p| is_ready(p)).collect();
    ready.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
    if let Some(pod) = ready.first() {
        return Wait::Ready(pod.metadata.name.clone().unwrap_or_default());
    }
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_).cloned();
    let why = match (condition(DEGRADED).filter(|c| c.status == "True"), pods.first()) {
        (Some(degraded), _) => format!("{}: {}", degraded.reason, degraded.message),
        (None, Some(pod)) => format!("pod {}: {}", pod.metadata.name.clone().unwrap_or_default(), pod_state(pod)),
        (None, None) => condition(AVAILABLE).map_or_else(|| "its pods to be made".to_owned(), |c| c.message),
    };
    Wait::Waiting(format!("waiting for shell {name}: {why}"))
}

#[cfg(test)]
mod tests {
    use crate::{MyOwnShellSpec, MyOwnShellStatus, Stop};
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting, ContainerStatus, PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn shell(status: MyOwnShellStatus) -> MyOwnShell {
        let mut s = MyOwnShell::new("web", MyOwnShellSpec { size: Some(1), ..MyOwnShellSpec::default() });
        s.status = Some(status);
        s
    }

    fn pod(name: &str, ready: bool, waiting: Option<&str>, created: i64) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        p.status = Some(PodStatus {
            phase: Some(if ready { "Running" } else { "Pending" }.into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..PodCondition::default()
            }]),
            container_statuses: waiting.map(|w| {
                vec![ContainerStatus {
                    name: "shell".into(),
                    state: Some(ContainerState {
                        waiting: Some(ContainerStateWaiting { reason: Some(w.into()), message: None }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]
            }),
            ..PodStatus::default()
        });
        p
    }

    #[test]
    fn what_connect_waits_for() {
        let t = Time(Timestamp::from_second(0).unwrap());
        let degraded = Condition {
            type_: DEGRADED.into(),
            status: "True".into(),
            reason: "ImagePullFailed".into(),
            message: "pod web-1, container shell: ImagePullBackOff".into(),
            observed_generation: None,
            last_transition_time: t.clone(),
        };
        let stopped = MyOwnShellStatus {
            stopped: Some(Stop { reason: "Idle".into(), at: t.clone(), message: "no connection for 30m".into() }),
            ..MyOwnShellStatus::default()
        };
        let cases: Vec<(&str, MyOwnShell, Vec<Pod>, Wait)> = vec![
            (
                "the oldest ready pod",
                shell(MyOwnShellStatus::default()),
                vec![pod("new", true, None, 20), pod("old", true, None, 10), pod("starting", false, None, 5)],
                Wait::Ready("old".into()),
            ),
            (
                "a pod being made",
                shell(MyOwnShellStatus::default()),
                vec![pod("web-1", false, Some("ContainerCreating"), 1)],
                Wait::Waiting("waiting for shell web: pod web-1: ContainerCreating".into()),
            ),
            (
                "what is wrong",
                shell(MyOwnShellStatus { conditions: vec![degraded], ..MyOwnShellStatus::default() }),
                vec![pod("web-1", false, Some("ImagePullBackOff"), 1)],
                Wait::Waiting("waiting for shell web: ImagePullFailed: pod web-1, container shell: ImagePullBackOff".into()),
            ),
            (
                "stopped",
                shell(stopped),
                vec![],
                Wait::Stopped("shell web is stopped (Idle: no connection for 30m); start it with `kubectl myownshell start web`, or connect with --start".into()),
            ),
        ];
        for (what, shell, pods, want) in cases {
            assert_eq!(wait_for(&shell, &pods), want, "{what}");
        }
    }
}
