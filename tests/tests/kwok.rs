//! The kwok cluster the benchmarks run at scale: a Deployment's pods are scheduled onto fake
//! nodes and turn Running and Ready with no kubelet, and go away when it is scaled to zero.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use myownshell_envtest::kwok::{KwokCluster, KwokOptions};
use myownshell_envtest::process::cpu_time;
use myownshell_envtest::{create_namespace, eventually};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(30);
const REPLICAS: usize = 3;

fn deployment(replicas: usize) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "shells" },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": "shells" } },
            "template": {
                "metadata": { "labels": { "app": "shells" } },
                "spec": { "containers": [{ "name": "shell", "image": "busybox:1.37.0", "command": ["sleep", "infinity"] }] },
            },
        },
    }))
    .unwrap()
}

/// Each pod as `name node phase ready`, for the report of what was seen.
fn describe(pod: &Pod) -> (String, String, String, bool) {
    let status = pod.status.clone().unwrap_or_default();
    let ready = status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
    (
        pod.metadata.name.clone().unwrap_or_default(),
        pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
        status.phase.unwrap_or_default(),
        ready,
    )
}

fn cpu(cluster: &KwokCluster) -> Vec<(String, Duration)> {
    cluster.pids().into_iter().map(|(name, pid)| (name.to_owned(), cpu_time(pid).unwrap_or_default())).collect()
}

#[tokio::test]
async fn a_deployment_runs_ready_on_fake_nodes_and_scales_to_zero() {
    let options = KwokOptions::new(2, 10).unwrap_or_else(|e| panic!("{e}"));
    let cluster = KwokCluster::start(options).await.unwrap_or_else(|e| panic!("the kwok cluster did not start: {e}"));
    let (started, cpu_at_start) = (Instant::now(), cpu(&cluster));
    let client = cluster.control_plane().client().unwrap();
    let ns = create_namespace(&client, "kwok").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let selector = ListParams::default().labels("app=shells");
    deployments.create(&PostParams::default(), &deployment(REPLICAS)).await.unwrap();

    eventually(&format!("{REPLICAS} pods Running and Ready on kwok nodes"), TIMEOUT, || async {
        let seen: Vec<_> = pods.list(&selector).await.map_err(|e| e.to_string())?.iter().map(describe).collect();
        let on_fake_node = |node: &String| cluster.nodes().contains(node);
        let ready = seen.iter().filter(|(_, node, phase, ready)| on_fake_node(node) && phase == "Running" && *ready);
        if ready.count() == REPLICAS && seen.len() == REPLICAS { Ok(()) } else { Err(format!("{seen:?}")) }
    })
    .await
    .unwrap();

    let scale = Patch::Merge(json!({ "spec": { "replicas": 0 } }));
    deployments.patch("shells", &PatchParams::default(), &scale).await.unwrap();
    eventually("every pod gone (kwok's pod-delete stage)", TIMEOUT, || async {
        let seen: Vec<_> = pods.list(&selector).await.map_err(|e| e.to_string())?.iter().map(describe).collect();
        if seen.is_empty() { Ok(()) } else { Err(format!("{seen:?}")) }
    })
    .await
    .unwrap();

    let used: Vec<String> = cpu(&cluster)
        .into_iter()
        .zip(cpu_at_start)
        .map(|((name, now), (_, before))| format!("{name} {:?} ({:?} in all)", now.saturating_sub(before), now))
        .collect();
    eprintln!(
        "{}; the test took {:.1?} after it; CPU during the test: {}",
        cluster.summary(),
        started.elapsed(),
        used.join(", ")
    );
    cluster.stop().unwrap();
}
