//! Why a shell's pods cannot run, said within seconds, from what the kubelet and the scheduler
//! write into the pods ([`PodHealth`]): a pure function of the pods, the readiness of their
//! nodes and the time ([`diagnose`]).
//!
//! Without it a shell said nothing: a bad image left it "not ready" until the Deployment's
//! 10-minute progress deadline, a crash loop or an OOM kill flipped `Available` with every
//! restart, and a pod on a node that is down, or that no node has room for, read "the shells run
//! as specified". The condition names the pod, the container and the kubelet's reason; the
//! controller writes an Event once per cause.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use myownshell_api::names::reasons;
use myownshell_runtime::time::plus;

/// How long after a container last ended its shell still counts as restarting: a crash loop
/// backs off up to 5 minutes between restarts, so a shell whose container ended less than that
/// ago may well end again. A shell that stays up this long is well again (and a fixed spec makes
/// new pods, which are well at once).
pub const RESTART_WINDOW: Duration = Duration::from_secs(300);

/// How a container ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ended {
    /// `OOMKilled`, `Error`, `StartError`, `Completed`, …
    pub reason: String,
    /// The exit code (137 for a kill).
    pub exit_code: i32,
    /// When.
    pub finished_at: Option<Timestamp>,
    /// The runtime's message (for `StartError`: why it could not start).
    pub message: String,
}

/// What a container's status says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerHealth {
    /// The container.
    pub name: String,
    /// Times the kubelet restarted it.
    pub restarts: i32,
    /// Why it is waiting, if it is: (reason, message).
    pub waiting: Option<(String, String)>,
    /// How it ended, if it is not running.
    pub terminated: Option<Ended>,
    /// How it ended the time before.
    pub last_terminated: Option<Ended>,
}

/// What a pod's status says, as far as a shell's health goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodHealth {
    /// The pod.
    pub name: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Whether it is on its way out (its successor is what counts).
    pub deleting: bool,
    /// `PodScheduled=False` with reason `Unschedulable`: the scheduler's message.
    pub unschedulable: Option<String>,
    /// Its containers (init containers first).
    pub containers: Vec<ContainerHealth>,
}

/// What is wrong with a shell's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// A reason of `myownshell_api::names::reasons` (`ImagePullFailed`, `CrashLooping`, …).
    pub reason: &'static str,
    /// `pod P, container C: <kubelet's reason>: <its message>`.
    pub message: String,
    /// When the diagnosis lapses by itself (a restart ages out of [`RESTART_WINDOW`]): look again then.
    pub until: Option<Timestamp>,
}

impl Diagnosis {
    /// What distinguishes one cause from another (the reason, the pod and the container, not the
    /// counters): an Event is written once per cause.
    pub fn cause(&self) -> String {
        cause_of(self.reason, &self.message)
    }
}

/// The cause a condition or diagnosis of `reason` and `message` tells: the reason and the place
/// (`pod P, container C`), without the counters that follow.
pub fn cause_of(reason: &str, message: &str) -> String {
    let place = message.split(": ").next().unwrap_or_default();
    format!("{reason}/{place}")
}

/// What is wrong with one pod on its own (its node aside), in words: what the pod index compares
/// to decide whether a change of the pod's status matters to its shell. A pod that goes from
/// `ContainerCreating` to running, or whose readiness flips, changes nothing here (the
/// Deployment's status tells those); a pod that starts failing, fails differently or recovers
/// does.
pub fn problem(pod: &PodHealth, now: Timestamp) -> Option<(&'static str, String)> {
    diagnose(std::slice::from_ref(pod), &|_| None, now).map(|d| (d.reason, d.message))
}

/// Waiting reasons of an image that cannot be had.
const IMAGE_REASONS: [&str; 5] =
    ["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ImageInspectError", "ErrImageNeverPull"];
/// Waiting reasons of a container that cannot be made or started.
const CREATE_REASONS: [&str; 7] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreCreateHookError",
    "PreStartHookError",
    "PostStartHookError",
    "StartError",
];

/// The order in which problems are told, worst (most fundamental) first.
fn rank(reason: &str) -> u8 {
    match reason {
        r if r == reasons::UNSCHEDULABLE => 0,
        r if r == reasons::NODE_NOT_READY => 1,
        r if r == reasons::IMAGE_PULL_FAILED => 2,
        r if r == reasons::CONTAINER_CREATE_FAILED => 3,
        r if r == reasons::OOM_KILLED => 4,
        _ => 5,
    }
}

fn ended_words(ended: &Ended) -> String {
    let mut words = format!("{} (exit code {})", ended.reason, ended.exit_code);
    if !ended.message.is_empty() {
        words.push_str(&format!(": {}", ended.message.trim()));
    }
    words
}

/// What is wrong with one container of `pod`, if anything.
fn container(pod: &str, c: &ContainerHealth, now: Timestamp) -> Option<Diagnosis> {
    let place = format!("pod {pod}, container {}", c.name);
    let diagnosis =
        |reason, message: String| Some(Diagnosis { reason, message: format!("{place}: {message}"), until: None });
    if let Some((waiting, message)) = &c.waiting {
        let told = if message.is_empty() { waiting.clone() } else { format!("{waiting}: {message}") };
        if IMAGE_REASONS.contains(&waiting.as_str()) {
            return diagnosis(reasons::IMAGE_PULL_FAILED, told);
        }
        if CREATE_REASONS.contains(&waiting.as_str()) {
            return diagnosis(reasons::CONTAINER_CREATE_FAILED, told);
        }
        if waiting == "CrashLoopBackOff" {
            let last = c.last_terminated.clone().unwrap_or_default();
            let reason = match last.reason.as_str() {
                "OOMKilled" => reasons::OOM_KILLED,
                "StartError" | "ContainerCannotRun" => reasons::CONTAINER_CREATE_FAILED,
                _ => reasons::CRASH_LOOPING,
            };
            return diagnosis(
                reason,
                format!("CrashLoopBackOff: ended {}, restarted {} times", ended_words(&last), c.restarts),
            );
        }
    }
    // A container that finished with exit code 0 did its job: an init container (the home's
    // `seed-home`) always ends so. (A shell's own container that keeps ending is restarted and
    // shows as CrashLoopBackOff above.)
    if let Some(ended) = c.terminated.as_ref().filter(|e| e.exit_code != 0 || e.reason != "Completed") {
        let reason = match ended.reason.as_str() {
            "OOMKilled" => reasons::OOM_KILLED,
            "StartError" | "ContainerCannotRun" => reasons::CONTAINER_CREATE_FAILED,
            _ => reasons::CRASH_LOOPING,
        };
        return diagnosis(reason, format!("ended {}", ended_words(ended)));
    }
    // Running again after a recent end: still a crash loop (or OOM kills) until it stays up.
    let recent = c
        .last_terminated
        .as_ref()
        .filter(|e| c.restarts > 0 && e.finished_at.is_some_and(|f| now < plus(f, RESTART_WINDOW)))?;
    let reason = if recent.reason == "OOMKilled" { reasons::OOM_KILLED } else { reasons::CRASH_LOOPING };
    let until = recent.finished_at.map(|f| plus(f, RESTART_WINDOW));
    Some(Diagnosis {
        reason,
        message: format!("{place}: restarted {} times, last ended {}", c.restarts, ended_words(recent)),
        until,
    })
}

/// The worst problem of `pods` at `now`, if any; `node_not_ready` says why a node is not ready
/// (`None`: it is ready, or unknown to the controller).
pub fn diagnose(
    pods: &[PodHealth],
    node_not_ready: &dyn Fn(&str) -> Option<String>,
    now: Timestamp,
) -> Option<Diagnosis> {
    let mut found: Vec<Diagnosis> = Vec::new();
    for pod in pods.iter().filter(|p| !p.deleting) {
        if let Some(message) = &pod.unschedulable {
            found.push(Diagnosis {
                reason: reasons::UNSCHEDULABLE,
                message: format!("pod {} cannot be scheduled: {message}", pod.name),
                until: None,
            });
            continue;
        }
        if let Some(why) = pod.node.as_deref().and_then(|n| node_not_ready(n).map(|why| (n, why))) {
            found.push(Diagnosis {
                reason: reasons::NODE_NOT_READY,
                message: format!("pod {} runs on node {}, which is not ready: {}", pod.name, why.0, why.1),
                until: None,
            });
            continue;
        }
        found.extend(pod.containers.iter().filter_map(|c| container(&pod.name, c, now)));
    }
    found.into_iter().min_by_key(|d| rank(d.reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000;

    fn at(offset: i64) -> Timestamp {
        Timestamp::from_second(T0 + offset).unwrap()
    }

    fn pod(containers: Vec<ContainerHealth>) -> PodHealth {
        PodHealth { name: "web-1".into(), node: Some("node-a".into()), containers, ..PodHealth::default() }
    }

    fn waiting(reason: &str, message: &str) -> ContainerHealth {
        ContainerHealth {
            name: "shell".into(),
            waiting: Some((reason.into(), message.into())),
            ..ContainerHealth::default()
        }
    }

    fn ended(reason: &str, code: i32, offset: i64) -> Ended {
        Ended { reason: reason.into(), exit_code: code, finished_at: Some(at(offset)), message: String::new() }
    }

    #[test]
    fn each_way_a_shell_cannot_run() {
        let ready = |_: &str| None;
        let crash = ContainerHealth {
            restarts: 3,
            last_terminated: Some(ended("Error", 1, -10)),
            ..waiting("CrashLoopBackOff", "back-off 40s restarting failed container")
        };
        let oom = ContainerHealth {
            restarts: 2,
            last_terminated: Some(ended("OOMKilled", 137, -10)),
            ..waiting("CrashLoopBackOff", "")
        };
        let recovered_recently = ContainerHealth {
            name: "shell".into(),
            restarts: 1,
            last_terminated: Some(ended("OOMKilled", 137, -60)),
            ..ContainerHealth::default()
        };
        let recovered_long_ago =
            ContainerHealth { last_terminated: Some(ended("OOMKilled", 137, -400)), ..recovered_recently.clone() };
        type Told<'a> = Option<(&'a str, &'a str)>;
        let seeded = ContainerHealth {
            name: "seed-home".into(),
            terminated: Some(Ended { reason: "Completed".into(), ..ended("", 0, -30) }),
            ..ContainerHealth::default()
        };
        let seed_failed = ContainerHealth {
            terminated: Some(Ended { reason: "Error".into(), ..ended("", 1, -30) }),
            ..seeded.clone()
        };
        let cases: Vec<(&str, Vec<PodHealth>, Told)> = vec![
            ("healthy", vec![pod(vec![ContainerHealth { name: "shell".into(), ..ContainerHealth::default() }])], None),
            (
                "a home seeded by its init container, which completed",
                vec![pod(vec![seeded, ContainerHealth { name: "shell".into(), ..ContainerHealth::default() }])],
                None,
            ),
            (
                "a seed that failed",
                vec![pod(vec![seed_failed])],
                Some(("CrashLooping", "pod web-1, container seed-home: ended Error (exit code 1)")),
            ),
            ("starting", vec![pod(vec![waiting("ContainerCreating", "")])], None),
            (
                "a bad image",
                vec![pod(vec![waiting("ImagePullBackOff", "Back-off pulling image \"nope:1\"")])],
                Some((
                    "ImagePullFailed",
                    "pod web-1, container shell: ImagePullBackOff: Back-off pulling image \"nope:1\"",
                )),
            ),
            (
                "an invalid name",
                vec![pod(vec![waiting("InvalidImageName", "couldn't parse")])],
                Some(("ImagePullFailed", "pod web-1, container shell: InvalidImageName: couldn't parse")),
            ),
            (
                "a crash loop",
                vec![pod(vec![crash])],
                Some((
                    "CrashLooping",
                    "pod web-1, container shell: CrashLoopBackOff: ended Error (exit code 1), restarted 3 times",
                )),
            ),
            (
                "an OOM kill loop",
                vec![pod(vec![oom])],
                Some((
                    "OOMKilled",
                    "pod web-1, container shell: CrashLoopBackOff: ended OOMKilled (exit code 137), restarted 2 times",
                )),
            ),
            (
                "up again after a recent OOM kill",
                vec![pod(vec![recovered_recently])],
                Some((
                    "OOMKilled",
                    "pod web-1, container shell: restarted 1 times, last ended OOMKilled (exit code 137)",
                )),
            ),
            ("up for long after one", vec![pod(vec![recovered_long_ago])], None),
            (
                "a missing secret",
                vec![pod(vec![waiting("CreateContainerConfigError", "secret \"x\" not found")])],
                Some((
                    "ContainerCreateFailed",
                    "pod web-1, container shell: CreateContainerConfigError: secret \"x\" not found",
                )),
            ),
            (
                "no node has room",
                vec![PodHealth {
                    name: "web-2".into(),
                    unschedulable: Some("0/1 nodes are available: 1 Too many pods.".into()),
                    ..PodHealth::default()
                }],
                Some(("Unschedulable", "pod web-2 cannot be scheduled: 0/1 nodes are available: 1 Too many pods.")),
            ),
            (
                "a pod on its way out does not count",
                vec![PodHealth { deleting: true, ..pod(vec![waiting("ImagePullBackOff", "")]) }],
                None,
            ),
        ];
        for (what, pods, want) in cases {
            let got = diagnose(&pods, &ready, at(0));
            assert_eq!(got.as_ref().map(|d| (d.reason, d.message.as_str())), want, "{what}");
        }
    }

    #[test]
    fn a_start_error_is_a_container_that_cannot_be_made() {
        let c = ContainerHealth {
            name: "shell".into(),
            terminated: Some(Ended { message: "exec: \"nope\": not found".into(), ..ended("StartError", 128, -1) }),
            ..ContainerHealth::default()
        };
        let d = diagnose(&[pod(vec![c])], &|_| None, at(0)).unwrap();
        assert_eq!(d.reason, "ContainerCreateFailed");
        assert_eq!(
            d.message,
            "pod web-1, container shell: ended StartError (exit code 128): exec: \"nope\": not found"
        );
    }

    #[test]
    fn the_worst_problem_is_told_and_a_node_down_is_named() {
        let node_down = |n: &str| (n == "node-a").then(|| "Kubelet stopped posting node status.".to_owned());
        let pods = vec![
            PodHealth { name: "web-1".into(), node: Some("node-a".into()), ..PodHealth::default() },
            pod(vec![waiting("ImagePullBackOff", "")]),
        ];
        let d = diagnose(&pods, &node_down, at(0)).unwrap();
        assert_eq!(d.reason, "NodeNotReady");
        assert_eq!(
            d.message,
            "pod web-1 runs on node node-a, which is not ready: Kubelet stopped posting node status."
        );
        let recent = ContainerHealth {
            name: "shell".into(),
            restarts: 1,
            last_terminated: Some(ended("Error", 1, -60)),
            ..ContainerHealth::default()
        };
        let lapses = diagnose(&[pod(vec![recent])], &|_| None, at(0)).unwrap();
        assert_eq!(lapses.until, Some(at(240)), "looked at again when the restart ages out");
        assert_eq!(lapses.cause(), "CrashLooping/pod web-1, container shell");
    }
}
