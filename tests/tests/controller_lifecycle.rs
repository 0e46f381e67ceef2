//! The controller process's life: killed in the middle of a cleanup and restarted, restarted over
//! converged objects (it writes nothing), and stopped with SIGTERM.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use myownshell_api::names;
use myownshell_envtest::{create_shell_namespace, eventually, shared};
use myownshell_tests::controller::{
    ControllerProcess, ShellNamespace, resource_versions, sized_shell, written_between,
};
use myownshell_tests::gate::AdmissionGate;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(30);
/// A finalizer the test puts on the Deployment to hold its deletion open, so the controller can
/// be killed exactly between "Deployment deleted" and "finalizer removed".
const HOLD: &str = "test.myownshell.io/hold";

/// Wait until every `MyOwnShell` in the namespace has a status for its current generation.
async fn statuses_current(t: &ShellNamespace, n: usize, controller: &ControllerProcess) {
    eventually(&format!("{n} statuses for the current generation"), TIMEOUT, || async {
        let list = t.shells.list(&Default::default()).await.map_err(|e| e.to_string())?;
        let current = list
            .items
            .iter()
            .filter(|s| s.status.as_ref().and_then(|st| st.observed_generation) == s.metadata.generation)
            .count();
        if current == n { Ok(()) } else { Err(format!("{current} of {}", list.items.len())) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));
}

/// Wait until `controller` has run `n` successful reconciles and nothing is in flight.
async fn reconciled(controller: &ControllerProcess, n: f64) {
    eventually(&format!("{n} successful reconciles"), TIMEOUT, || async {
        let done = controller.metric("myownshell_controller_reconciles_total{result=\"success\"}").await?;
        let in_flight = controller.metric("myownshell_controller_reconciles_in_flight").await?;
        if done >= n && in_flight == 0.0 { Ok(()) } else { Err(format!("{done} done, {in_flight} in flight")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));
}

#[tokio::test]
async fn a_controller_restarted_over_converged_objects_writes_nothing() {
    let t = ShellNamespace::create("ctrl-quiet-restart").await.unwrap();
    let mut first = ControllerProcess::start(t.cp, "quiet-restart-1", &["--namespace", &t.ns]).unwrap();
    const N: usize = 5;
    for i in 0..N {
        t.shells.create(&PostParams::default(), &sized_shell(&format!("quiet-{i}"), 1)).await.unwrap();
    }
    statuses_current(&t, N, &first).await;
    // Every Created event is in too (they are sent without waiting).
    eventually("an event per object", TIMEOUT, || async {
        let versions = resource_versions(&t.client, &t.ns).await?;
        let events = versions.keys().filter(|k| k.starts_with("event/")).count();
        if events >= N { Ok(()) } else { Err(format!("{events} events")) }
    })
    .await
    .unwrap();
    first.process.stop(Duration::from_secs(10)).unwrap();
    let before = resource_versions(&t.client, &t.ns).await.unwrap();

    let second = ControllerProcess::start(t.cp, "quiet-restart-2", &["--namespace", &t.ns]).unwrap();
    // It reconciles every object once (each is new to it) and finds nothing to do.
    reconciled(&second, N as f64).await;
    let writes = second.metric("myownshell_controller_writes_total{kind=\"status\"}").await.unwrap()
        + second.metric("myownshell_controller_writes_total{kind=\"deployment\"}").await.unwrap()
        + second.metric("myownshell_controller_writes_total{kind=\"event\"}").await.unwrap();
    assert_eq!(writes, 0.0, "write requests by the restarted controller\n{}", second.log_tail(30));
    let written = written_between(&before, &resource_versions(&t.client, &t.ns).await.unwrap());
    assert!(written.is_empty(), "objects written after the restart: {written:?}\n{}", second.log_tail(30));
}

#[tokio::test]
async fn a_controller_killed_mid_cleanup_is_finished_by_the_next_one() {
    let ShellNamespace { cp, ns, shells, deployments, .. } = ShellNamespace::create("ctrl-midcleanup").await.unwrap();
    let mut first = ControllerProcess::start(cp, "midcleanup-1", &["--namespace", &ns]).unwrap();

    shells.create(&PostParams::default(), &sized_shell("iota", 1)).await.unwrap();
    eventually("the Deployment and the finalizer", TIMEOUT, || async {
        let d = deployments.get_opt("iota").await.map_err(|e| e.to_string())?;
        let s = shells.get("iota").await.map_err(|e| e.to_string())?;
        if d.is_some() && s.finalizers().iter().any(|f| f == names::FINALIZER) {
            Ok(())
        } else {
            Err(format!("{:?}", s.finalizers()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", first.log_tail(30)));
    deployments
        .patch("iota", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}})))
        .await
        .unwrap();

    shells.delete("iota", &DeleteParams::default()).await.unwrap();
    // The controller has deleted the Deployment (it is terminating, held by HOLD) and waits.
    eventually("the Deployment to be terminating", TIMEOUT, || async {
        let d = deployments.get("iota").await.map_err(|e| e.to_string())?;
        if d.metadata.deletion_timestamp.is_some() { Ok(()) } else { Err("not deleted yet".into()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", first.log_tail(30)));
    first.process.kill().unwrap();

    // Release the Deployment: it goes; the MyOwnShell stays, its finalizer still on.
    deployments
        .patch("iota", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    eventually("the Deployment to be gone", TIMEOUT, || async {
        match deployments.get_opt("iota").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await
    .unwrap();
    let stuck = shells.get("iota").await.unwrap();
    assert!(stuck.metadata.deletion_timestamp.is_some());
    assert_eq!(stuck.finalizers(), [names::FINALIZER.to_owned()], "nobody removed the finalizer yet");

    let second = ControllerProcess::start(cp, "midcleanup-2", &["--namespace", &ns]).unwrap();
    eventually("the MyOwnShell to be gone", TIMEOUT, || async {
        match shells.get_opt("iota").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(s) => Err(format!("finalizers {:?}", s.finalizers())),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", second.log_tail(30)));
}

#[tokio::test]
async fn sigterm_stops_the_controller_with_exit_code_zero() {
    let ShellNamespace { cp, ns, shells, deployments, .. } = ShellNamespace::create("ctrl-sigterm").await.unwrap();
    let mut controller = ControllerProcess::start(cp, "sigterm", &["--namespace", &ns]).unwrap();
    shells.create(&PostParams::default(), &sized_shell("kappa", 1)).await.unwrap();
    eventually("the Deployment", TIMEOUT, || async {
        deployments.get_opt("kappa").await.map_err(|e| e.to_string())?.map(|_| ()).ok_or_else(|| "none".to_owned())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));

    // SIGTERM, and SIGKILL only if it has not exited 10 s later.
    let status = controller.process.stop(Duration::from_secs(10)).unwrap();
    assert!(status.success(), "exit status {status}\n{}", controller.log_tail(30));
    assert!(controller.log_tail(5).contains("controller stopped"), "{}", controller.log_tail(30));
}

#[tokio::test]
async fn sigterm_lets_the_reconcile_in_flight_finish() {
    let ShellNamespace { cp, client, ns, shells, deployments } = ShellNamespace::create("ctrl-inflight").await.unwrap();
    // Deployment writes in this namespace wait at the gate until the test opens it.
    let rule = RuleWithOperations {
        api_groups: Some(vec!["apps".into()]),
        api_versions: Some(vec!["v1".into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
        resources: Some(vec!["deployments".into()]),
        scope: Some("Namespaced".into()),
    };
    let probe: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "gate-probe", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "gate-probe"}},
            "template": {"metadata": {"labels": {"app": "gate-probe"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}},
        },
    }))
    .unwrap();
    let gate = AdmissionGate::install(&client, &format!("{ns}-gate"), &ns, rule, probe).await.unwrap();
    gate.close();

    let mut controller = ControllerProcess::start(cp, "inflight", &["--namespace", &ns]).unwrap();
    shells.create(&PostParams::default(), &sized_shell("lambda", 1)).await.unwrap();
    // The controller's apply of the Deployment is in flight, held at the gate.
    gate.wait_until_holding(1, TIMEOUT).await.unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));

    controller.process.terminate().unwrap();
    eventually("the controller to take the SIGTERM", TIMEOUT, || async {
        if controller.log_tail(50).contains("SIGTERM: shutting down") { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await
    .unwrap();
    assert!(controller.process.is_running(), "exited with a reconcile in flight:\n{}", controller.log_tail(30));

    gate.open();
    let status = eventually("the controller to exit", TIMEOUT, || {
        let exited = controller.process.exit_status();
        async move { exited.ok_or_else(|| "still running".to_owned()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));
    assert!(status.success(), "exit status {status}\n{}", controller.log_tail(30));

    // The reconcile went on after the signal: the Deployment exists and the status it writes
    // after the apply is there.
    assert!(deployments.get_opt("lambda").await.unwrap().is_some());
    let after = shells.get("lambda").await.unwrap();
    let observed = after.status.as_ref().and_then(|s| s.observed_generation);
    assert_eq!(observed, after.metadata.generation, "status not written: {:?}", after.status);
    gate.remove().await.unwrap();
}

#[tokio::test]
async fn json_logs_are_one_object_per_line() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_shell_namespace(&client, "ctrl-json").await.unwrap();
    let controller = ControllerProcess::start(cp, "json", &["--namespace", &ns, "--log-format", "json"]).unwrap();
    eventually("caches synced", TIMEOUT, || async {
        match controller.probe("/readyz").await? {
            (200, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap();
    let log = std::fs::read_to_string(controller.process.log_path()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() >= 3, "{log}");
    for line in lines {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(entry["level"].is_string() && entry["message"].is_string() && entry["timestamp"].is_string(), "{line}");
    }
    assert!(log.contains(r#""message":"caches synced""#), "{log}");
}
