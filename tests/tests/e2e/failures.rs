//! The failures phase: shells whose pods cannot run on the real node say why in their status
//! (a bad image within 20 s of the apply, a crash loop, an OOM kill, a request no node can
//! hold), come back by themselves once the spec is fixed, and a namespace of shells being
//! deleted costs no failed reconcile.

use std::time::{Duration, Instant};

use kube::Api;
use myownshell_api::MyOwnShell;
use myownshell_api::names::conditions::{AVAILABLE, DEGRADED};
use myownshell_envtest::eventually;

use super::{CONTROLLER, E2e, SYSTEM, TIMEOUT, wait_running};

/// How soon a bad image must show in the status.
const BAD_IMAGE_WITHIN: Duration = Duration::from_secs(20);

fn manifest(name: &str, spec: &str) -> String {
    format!("apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: {name}\nspec: {spec}\n")
}

/// `type_`'s (status, reason, message) in `shell`.
fn condition(shell: &MyOwnShell, type_: &str) -> Option<(String, String, String)> {
    let c = shell.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Wait (up to `within`) until `name` is Degraded for `reason`; its message.
async fn degraded(e2e: &E2e, api: &Api<MyOwnShell>, name: &str, reason: &str, within: Duration) -> String {
    eventually(&format!("{name} Degraded: {reason}"), within, || async {
        let s = api.get(name).await.map_err(|e| e.to_string())?;
        match (condition(&s, DEGRADED), condition(&s, AVAILABLE)) {
            (Some((d, r, message)), Some((a, _, _))) if d == "True" && r == reason && a == "False" => Ok(message),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()))
}

pub async fn failures(e2e: &E2e) {
    let ns = e2e.namespace("e2e-failures").await;
    let api: Api<MyOwnShell> = Api::namespaced(e2e.cluster.control_plane().client().unwrap(), &ns);
    let applied = Instant::now();
    e2e.apply(&ns, &manifest("badimage", "{image: \"localhost/no-such-image:1\"}")).await.unwrap();
    e2e.apply(&ns, &manifest("crashing", "{command: [sh, -c, \"echo bye; exit 3\"]}")).await.unwrap();
    // Doubling a string until the 32Mi limit kills it.
    let oom = "{command: [sh, -c, \"x=aaaaaaaa; while true; do x=$x$x; done\"], resources: {limits: {memory: 32Mi}, requests: {memory: 16Mi}}}";
    e2e.apply(&ns, &manifest("hungry", oom)).await.unwrap();
    e2e.apply(&ns, &manifest("huge", "{resources: {requests: {memory: 900Gi}, limits: {memory: 900Gi}}}"))
        .await
        .unwrap();

    let told = degraded(e2e, &api, "badimage", "ImagePullFailed", BAD_IMAGE_WITHIN).await;
    eprintln!("e2e: a bad image in the status {:.1?} after the apply: {told}", applied.elapsed());
    assert!(told.contains("container shell") && told.contains("localhost/no-such-image:1"), "{told}");

    let told = degraded(e2e, &api, "crashing", "CrashLooping", TIMEOUT).await;
    assert!(told.contains("exit code 3"), "{told}");
    let told = degraded(e2e, &api, "hungry", "OOMKilled", TIMEOUT).await;
    assert!(told.contains("OOMKilled (exit code 137)"), "{told}");
    let told = degraded(e2e, &api, "huge", "Unschedulable", TIMEOUT).await;
    assert!(told.contains("Insufficient memory"), "{told}");

    // Fixing the spec brings it back by itself.
    e2e.apply(&ns, &manifest("badimage", "{}")).await.unwrap();
    wait_running(e2e, &ns, "badimage", 1).await;
    eventually("badimage Available again", TIMEOUT, || async {
        let s = api.get("badimage").await.map_err(|e| e.to_string())?;
        match (condition(&s, AVAILABLE), condition(&s, DEGRADED)) {
            (Some((a, _, _)), Some((d, _, _))) if a == "True" && d == "False" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;

    a_namespace_being_deleted_costs_no_failed_reconcile(e2e).await;
}

/// The controller's log lines about failed reconciles in `ns`.
async fn failed_reconciles(e2e: &E2e, ns: &str) -> usize {
    let log = e2e.run(&["logs", "-n", SYSTEM, &format!("deployment/{CONTROLLER}")]).await;
    log.lines().filter(|l| l.contains("reconcile failed") && l.contains(ns)).count()
}

async fn a_namespace_being_deleted_costs_no_failed_reconcile(e2e: &E2e) {
    let ns = e2e.namespace("e2e-terminating").await;
    let many: String = (0..20).map(|i| manifest(&format!("s{i}"), "{size: 1}") + "---\n").collect();
    e2e.apply(&ns, &many).await.unwrap();
    eventually("20 shells Available", TIMEOUT, || async {
        let pods = e2e.run(&["get", "pods", "-n", &ns, "--field-selector=status.phase=Running", "-o", "name"]).await;
        let n = pods.lines().count();
        if n == 20 { Ok(()) } else { Err(format!("{n} running")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    e2e.run(&["delete", "namespace", &ns, "--timeout=120s"]).await;
    assert_eq!(failed_reconciles(e2e, &ns).await, 0, "failed reconciles while the namespace was deleted");
}
