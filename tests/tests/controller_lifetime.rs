//! Lifetimes against a real kube-apiserver, in seconds: a shell warned then stopped when idle,
//! started again with `kubectl myownshell start`, extended without a change to what runs,
//! stopped while in use by `maxRunTime`, deleted after `deletePausedAfter`, and a controller
//! restart in the middle that neither loses nor repeats a stop. (Pods, uids and `/tmp` on a
//! real node: the e2e suite's lifetime phase.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use myownshell_api::names::conditions::{AVAILABLE, STOPPING};
use myownshell_api::{Lifetime, MyOwnShell, MyOwnShellSpec};
use myownshell_envtest::eventually;
use myownshell_tests::controller::{ControllerProcess, ControllerTest, cond, condition};
use myownshell_tests::plugin;
use serde_json::json;

fn shell(name: &str, lifetime: Lifetime) -> MyOwnShell {
    MyOwnShell::new(name, MyOwnShellSpec { size: Some(2), lifetime: Some(lifetime), ..MyOwnShellSpec::default() })
}

fn lifetime(idle: Option<&str>, run: Option<&str>, warn: Option<&str>) -> Lifetime {
    Lifetime {
        idle_timeout: idle.map(Into::into),
        max_run_time: run.map(Into::into),
        warn_before: warn.map(Into::into),
        ..Lifetime::default()
    }
}

fn state(s: &MyOwnShell) -> Option<&str> {
    s.status.as_ref().and_then(|s| s.state.as_deref())
}

/// Seconds from `a` to `b`.
fn seconds(a: Timestamp, b: Timestamp) -> i64 {
    b.as_second() - a.as_second()
}

#[tokio::test]
async fn an_idle_shell_is_warned_then_stopped_and_start_brings_its_pods_back() {
    let t = ControllerTest::start("life-idle").await;
    t.shells.create(&PostParams::default(), &shell("idle", lifetime(Some("12s"), None, Some("6s")))).await.unwrap();
    t.replicas_become("idle", 2).await;
    let running = t
        .shell_where("idle", "running, with its next stop", |s| {
            let status = s.status.clone().unwrap_or_default();
            match (&status.state, &status.next_stop, condition(s, STOPPING)) {
                (Some(state), Some(next), Some(stopping)) if state == "Running" && next.reason == "Idle" => {
                    if stopping == cond("False", "NoStopDue").unwrap() { Ok(()) } else { Err(format!("{stopping:?}")) }
                }
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let status = running.status.unwrap();
    let (started, due) = (status.started_at.unwrap().0, status.next_stop.unwrap().at.0);
    assert_eq!(seconds(started, due), 12, "idle 12s from the start, no connection yet");

    t.shell_where("idle", "Stopping=True (Idle) ahead of the stop", |s| match condition(s, STOPPING) {
        c if c == cond("True", "Idle") => Ok(()),
        c => Err(format!("{c:?}")),
    })
    .await;
    t.event_with_reason("idle", "StoppingSoon").await;

    t.deployment_gone("idle").await;
    // The stop's reconcile only deletes; the reconcile that the deletion's watch event brings
    // records it, well before the controller's fallback would (`STOP_RECORD_FALLBACK`, 30 s:
    // how long a lost event leaves the status behind).
    let within = Duration::from_secs(15);
    let stopped = t
        .shell_where_within("idle", "stopped, and why, soon after the Deployment went", within, |s| {
            match (state(s), condition(s, AVAILABLE)) {
                (Some("Stopped"), Some(a)) if a == cond("False", "Stopped").unwrap() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let stop = stopped.status.as_ref().unwrap().stopped.clone().unwrap();
    assert_eq!(stop.reason, "Idle");
    assert!((0..=1).contains(&seconds(due, stop.at.0)), "stopped at {} for a stop due at {due}", stop.at.0);
    assert_eq!(stopped.spec.size, Some(2), "a stop keeps the size");
    assert!(stop.message.contains("no new connection"), "the status says why: {}", stop.message);
    // A stop is counted, and told by the status alone: no Event says it again (issue 41).
    assert_eq!(t.settled_metric(&transitions("Stopped", "Idle")).await, 1.0, "the stop counted once");
    // How late it began after the deadline `nextStop` announced: once, and within the second the
    // stop's time above allows.
    let delays = "myownshell_controller_lifetime_stop_delay_seconds";
    assert_eq!(t.settled_metric(&format!("{delays}_count")).await, 1.0, "the stop's delay observed once");
    let late = t.settled_metric(&format!("{delays}_sum")).await;
    assert!((0.0..2.0).contains(&late), "the stop began {late} s after its deadline");
    let reasons = t.event_reasons("idle").await;
    assert!(!reasons.iter().any(|r| r == "Stopped"), "a stop is the status's to tell: {reasons:?}");
    let started_before = t.settled_metric(&transitions("Started", "")).await;

    let listed = plugin::ok(&t.cp.kubeconfig_path(), &t.ns, &["ls"]).unwrap();
    let row = listed.lines().find(|l| l.starts_with("idle ")).unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains("Stopped") && row.contains("0/2") && row.contains("Idle"), "{listed}");

    let said = plugin::ok(&t.cp.kubeconfig_path(), &t.ns, &["start", "idle"]).unwrap();
    assert_eq!(said.trim(), "myownshell.myownshell.io/idle started");
    t.replicas_become("idle", 2).await;
    let again = t.shell_where("idle", "running again", |s| match state(s) {
        Some("Running") => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let again = again.await.status.unwrap();
    assert!(again.stopped.is_none());
    assert!(again.started_at.unwrap().0 >= stop.at.0, "the clocks restart");
    assert_eq!(t.settled_metric(&transitions("Started", "")).await, started_before + 1.0, "the start counted");
    let reasons = t.event_reasons("idle").await;
    assert!(
        !reasons.iter().any(|r| r == "Scaled" || r == "Started"),
        "a stop and a start are the status's to tell, not an Event's: {reasons:?}"
    );
    // The Deployment the stop deleted is made again without an Event for it.
    assert_eq!(reasons.iter().filter(|r| *r == "Created").count(), 1, "{reasons:?}");
}

/// The series of `myownshell_controller_lifetime_transitions_total` for one transition.
fn transitions(transition: &str, reason: &str) -> String {
    format!(r#"myownshell_controller_lifetime_transitions_total{{transition="{transition}",reason="{reason}"}}"#)
}

#[tokio::test]
async fn extend_pushes_the_stop_back_and_changes_nothing_that_runs() {
    let t = ControllerTest::start("life-extend").await;
    t.shells.create(&PostParams::default(), &shell("ext", lifetime(Some("20s"), None, None))).await.unwrap();
    let before = t.replicas_become("ext", 2).await;
    t.shell_where("ext", "a next stop", |s| {
        s.status.as_ref().and_then(|s| s.next_stop.as_ref()).map(drop).ok_or("none".into())
    })
    .await;

    let said = plugin::ok(&t.cp.kubeconfig_path(), &t.ns, &["extend", "ext", "10m"]).unwrap();
    assert!(said.starts_with("myownshell.myownshell.io/ext extended: no stop before "), "{said}");
    let now = Timestamp::now();
    t.shell_where("ext", "the stop 10 minutes out", |s| {
        let at = s.status.as_ref().and_then(|s| s.next_stop.as_ref()).map(|n| n.at.0);
        match at.map(|at| seconds(now, at)) {
            Some(598..=601) => Ok(()),
            other => Err(format!("stops in {other:?}s")),
        }
    })
    .await;
    let after = t.deployments.get("ext").await.unwrap();
    assert_eq!(after.metadata.generation, before.metadata.generation, "the Deployment was not changed");
    assert_eq!(
        serde_json::to_value(&after.spec.unwrap().template).unwrap(),
        serde_json::to_value(&before.spec.unwrap().template).unwrap()
    );
}

#[tokio::test]
async fn max_run_time_stops_a_shell_in_use() {
    let t = ControllerTest::start("life-run").await;
    t.shells.create(&PostParams::default(), &shell("busy", lifetime(Some("1h"), Some("8s"), None))).await.unwrap();
    t.replicas_become("busy", 2).await;
    // Connections keep coming, as the webhook records them: the idle clock never runs out.
    let stopped = eventually("a MaxRunTime stop while connections keep coming", Duration::from_secs(30), || async {
        let patch = json!({"status": {"lastConnection": {
            "user": "alice", "time": Timestamp::now().to_string().split('.').next().unwrap().to_owned() + "Z",
            "pod": "busy-1", "kind": "exec",
        }}});
        t.shells
            .patch_status("busy", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| e.to_string())?;
        let s = t.shells.get("busy").await.map_err(|e| e.to_string())?;
        match s.status.as_ref().and_then(|s| s.stopped.clone()) {
            Some(stop) => Ok(stop),
            None => Err(format!("{:?}", state(&s))),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    assert_eq!(stopped.reason, "MaxRunTime");
    t.deployment_gone("busy").await;
}

#[tokio::test]
async fn a_stopped_shell_is_deleted_after_delete_paused_after() {
    let t = ControllerTest::start("life-delete").await;
    let l = Lifetime { delete_paused_after: Some("3s".into()), ..Lifetime::default() };
    t.shells.create(&PostParams::default(), &shell("old", l)).await.unwrap();
    t.replicas_become("old", 2).await;
    let said = plugin::ok(&t.cp.kubeconfig_path(), &t.ns, &["stop", "old"]).unwrap();
    assert_eq!(said.trim(), "myownshell.myownshell.io/old stopped");
    t.deployment_gone("old").await;
    eventually("the stopped shell and its Deployment gone", Duration::from_secs(30), || async {
        let shell = t.shells.get_opt("old").await.map_err(|e| e.to_string())?;
        let deployment = t.deployments.get_opt("old").await.map_err(|e| e.to_string())?;
        match (shell, deployment) {
            (None, None) => Ok(()),
            (s, d) => Err(format!("shell {:?}, Deployment {}", s.as_ref().and_then(state), d.is_some())),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    let reasons = t.event_reasons("old").await;
    assert!(reasons.iter().any(|r| r == "DeletedAfterStop"), "{reasons:?}");
}

#[tokio::test]
async fn a_controller_restart_neither_loses_nor_repeats_a_stop() {
    let mut t = ControllerTest::start("life-restart").await;
    t.shells.create(&PostParams::default(), &shell("steady", lifetime(Some("14s"), None, None))).await.unwrap();
    t.replicas_become("steady", 2).await;
    let first = t
        .shell_where("steady", "a next stop", |s| {
            s.status.as_ref().and_then(|s| s.next_stop.as_ref()).map(drop).ok_or("none".into())
        })
        .await
        .status
        .unwrap();

    // A new controller half-way: the same start, the same stop.
    let restart = |t: &mut ControllerTest, name: &str| {
        t.controller.kill().unwrap();
        t.controller = ControllerProcess::start(t.cp, name, &["--namespace", &t.ns]).unwrap();
    };
    restart(&mut t, "life-restart-2");
    let writes = t.settled_writes().await;
    assert_eq!(writes, 0.0, "the new controller rewrote what was right");
    let now = t.shells.get("steady").await.unwrap().status.unwrap();
    assert_eq!((now.started_at, now.next_stop), (first.started_at, first.next_stop.clone()));

    let stopped = t
        .shell_where("steady", "stopped on time by the second controller", |s| match state(s) {
            Some("Stopped") => Ok(()),
            other => Err(format!("{other:?}")),
        })
        .await;
    let at = stopped.status.unwrap().stopped.unwrap().at.0;
    assert!((0..=1).contains(&seconds(first.next_stop.unwrap().at.0, at)));

    // The second controller counted the stop it made.
    assert_eq!(t.settled_metric(&transitions("Stopped", "Idle")).await, 1.0);

    // And another after the stop: no second stop, nothing written, nothing counted.
    restart(&mut t, "life-restart-3");
    assert_eq!(t.settled_writes().await, 0.0, "the stop was made again");
    assert_eq!(t.settled_metric(&transitions("Stopped", "Idle")).await, 0.0, "a second stop counted");
}
