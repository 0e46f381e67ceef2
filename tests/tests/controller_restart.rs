//! An apiserver restart under a running controller: it resumes watching and converges without
//! a restart of its own. Its own test binary: stopping the apiserver would disturb other tests.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_api::MyOwnShell;
use myownshell_envtest::eventually;
use myownshell_tests::controller_helpers::{ControllerProcess, ShellNamespace, sized_shell};
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
    let ShellNamespace { cp, ns, shells, deployments, .. } = ShellNamespace::create("ctrl-restart").await.unwrap();
    let mut controller = ControllerProcess::start(cp, "restart", &["--namespace", &ns]).unwrap();

    shells.create(&PostParams::default(), &sized_shell("mu", 1)).await.unwrap();
    replicas_become(&deployments, "mu", 1, &controller).await;

    cp.stop_apiserver().unwrap();
    cp.start_apiserver().await.unwrap();
    // Clients hold connections to the old process: a fresh one for the test's own calls.
    let client = cp.client().unwrap();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    shells.patch("mu", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 3}}))).await.unwrap();
    shells.create(&PostParams::default(), &sized_shell("nu", 2)).await.unwrap();
    replicas_become(&deployments, "mu", 3, &controller).await;
    replicas_become(&deployments, "nu", 2, &controller).await;
    assert!(controller.process.is_running(), "the controller kept running:\n{}", controller.log_tail(40));
}
