//! `kubectl myownshell connect NAME`: wait for a ready pod of the shell, saying what it waits
//! for, then open an interactive shell in it with `kubectl exec`. Gives up with the reason after
//! `--timeout`, never hangs.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use myownshell_api::MyOwnShell;
use myownshell_api::names::conditions::{AVAILABLE, DEGRADED};

use crate::client::{Target, kubectl};

/// How often the shell and its pods are looked at while waiting.
const POLL: Duration = Duration::from_millis(500);

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

/// The progress line: rewritten in place at a terminal, one line per change elsewhere.
struct Progress {
    terminal: bool,
    last: String,
}

impl Progress {
    fn show(&mut self, line: &str, waited: Duration) {
        let mut err = std::io::stderr();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line} ({}s)", waited.as_secs());
            let _ = err.flush();
        } else if line != self.last {
            let _ = writeln!(err, "{line}");
        }
        self.last = line.to_owned();
    }

    fn done(&self) {
        if self.terminal && !self.last.is_empty() {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// Wait for a ready pod of `name`, then exec `command` (default `sh`) in it; the exit code is
/// the command's.
pub async fn connect(
    target: &Target,
    name: &str,
    timeout: Duration,
    start: bool,
    command: &[String],
) -> anyhow::Result<ExitCode> {
    let shells: Api<MyOwnShell> = Api::namespaced(target.client.clone(), &target.namespace);
    let pods: Api<Pod> = Api::namespaced(target.client.clone(), &target.namespace);
    let started = Instant::now();
    let mut progress = Progress { terminal: std::io::stderr().is_terminal(), last: String::new() };
    let mut started_it = false;
    let pod = loop {
        let shell = shells
            .get_opt(name)
            .await?
            .with_context(|| format!("no MyOwnShell {name} in namespace {}", target.namespace))?;
        let selector = shell.status.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
        let found = match selector.is_empty() {
            true => Vec::new(),
            false => pods.list(&ListParams::default().labels(&selector)).await?.items,
        };
        match wait_for(&shell, &found) {
            Wait::Ready(pod) => break pod,
            Wait::Stopped(why) if start && !started_it => {
                crate::lifecycle::apply_start(&shells, name).await?;
                started_it = true;
                progress.show(&format!("starting shell {name} ({why})"), started.elapsed());
            }
            Wait::Stopped(why) if !started_it => bail!(why),
            Wait::Stopped(_) => progress.show(&format!("waiting for shell {name} to start"), started.elapsed()),
            Wait::Waiting(line) => progress.show(&line, started.elapsed()),
        }
        if started.elapsed() >= timeout {
            progress.done();
            bail!("gave up after {}s: {}", timeout.as_secs(), progress.last);
        }
        tokio::time::sleep(POLL).await;
    };
    progress.done();
    exec(target, &pod, command)
}

/// `kubectl exec -i[t] POD -c shell -- COMMAND`, on this terminal.
fn exec(target: &Target, pod: &str, command: &[String]) -> anyhow::Result<ExitCode> {
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let mut cmd = std::process::Command::new(kubectl());
    cmd.args(&target.kubectl_flags).args(["--namespace", &target.namespace, "exec"]);
    cmd.arg(if tty { "-it" } else { "-i" }).args([pod, "-c", "shell", "--"]);
    match command {
        [] => cmd.arg("sh"),
        _ => cmd.args(command),
    };
    let status = cmd.status().with_context(|| format!("running {}", kubectl().display()))?;
    Ok(ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting, ContainerStatus, PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use myownshell_api::{MyOwnShellSpec, MyOwnShellStatus, Stop};

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
