//! An apiserver restart under a running controller: it relists without writing anything, resumes
//! watching and converges without a restart of its own. Its own test binary: stopping the
//! apiserver would disturb other tests.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_api::MyOwnShell;
use myownshell_envtest::eventually;
use myownshell_tests::controller::{
    ControllerProcess, ShellNamespace, resource_versions, sized_shell, written_between,
};
use serde_json::json;

/// Generous: the apiserver restart itself takes seconds, then the watch reconnects with backoff.
const TIMEOUT: Duration = Duration::from_secs(60);

async fn replicas_become(deployments: &Api<Deployment>, name: &str, want: i32, controller: &ControllerProcess) {
    eventually(&format!("Deployment {name} replicas = {want}"), TIMEOUT, || async {
        let d = deployments.get_opt(name).await.map_err(|e| e.to_string())?;
        let got = d.and_then(|d| d.spec).and_then(|s| s.replicas);
        if got == Some(want) { Ok(()) } else { Err(format!("replicas {got:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(40)));
}

#[tokio::test]
async fn the_controller_converges_after_an_apiserver_restart() {
    let ShellNamespace { cp, client, ns, shells, deployments } = ShellNamespace::create("ctrl-restart").await.unwrap();
    let mut controller = ControllerProcess::start(cp, "restart", &["--namespace", &ns]).unwrap();

    shells.create(&PostParams::default(), &sized_shell("mu", 1)).await.unwrap();
    replicas_become(&deployments, "mu", 1, &controller).await;
    // Converged: the status shows the generation, the Created event is in, nothing in flight.
    let settled = || async {
        let s = shells.get("mu").await.map_err(|e| e.to_string())?;
        let current = s.status.as_ref().and_then(|st| st.observed_generation) == s.metadata.generation;
        let versions = resource_versions(&client, &ns).await?;
        let events = versions.keys().filter(|k| k.starts_with("event/")).count();
        let in_flight = controller.metric("myownshell_controller_reconciles_in_flight").await?;
        if current && events == 1 && in_flight == 0.0 {
            Ok(versions)
        } else {
            Err(format!("status current {current}, {events} events, {in_flight} in flight"))
        }
    };
    let before = eventually("mu converged", TIMEOUT, settled).await.unwrap();
    let series = "myownshell_controller_reconciles_total{result=\"success\"}";
    let reconciles = controller.metric(series).await.unwrap();
    let writes = |text: String| -> f64 {
        text.lines()
            .filter(|l| l.starts_with("myownshell_controller_writes_total{"))
            .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
            .sum()
    };
    let writes_before = writes(controller.metrics().await.unwrap());

    cp.stop_apiserver().unwrap();
    cp.start_apiserver().await.unwrap();
    // Clients hold connections to the old process: a fresh one for the test's own calls.
    let client = cp.client().unwrap();

    // The watches relist (the apiserver's watch cache starts anew), which reconciles every
    // object again: nothing is written.
    eventually("a reconcile after the relist", TIMEOUT, || async {
        let now = controller.metric(series).await?;
        let in_flight = controller.metric("myownshell_controller_reconciles_in_flight").await?;
        if now > reconciles && in_flight == 0.0 {
            Ok(())
        } else {
            Err(format!("{now} reconciles, {in_flight} in flight"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(40)));
    assert_eq!(writes(controller.metrics().await.unwrap()), writes_before, "no write requests after the relist");
    let written = written_between(&before, &resource_versions(&client, &ns).await.unwrap());
    assert!(
        written.is_empty(),
        "objects written after the apiserver restart: {written:?}\n{}",
        controller.log_tail(40)
    );
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    shells.patch("mu", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 3}}))).await.unwrap();
    shells.create(&PostParams::default(), &sized_shell("nu", 2)).await.unwrap();
    replicas_become(&deployments, "mu", 3, &controller).await;
    replicas_become(&deployments, "nu", 2, &controller).await;
    assert!(controller.process.is_running(), "the controller kept running:\n{}", controller.log_tail(40));
}
