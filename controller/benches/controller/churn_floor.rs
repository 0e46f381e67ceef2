//! The churn phase's floor: the same updates (`replicas` 1 <-> 2, the same random picks, the same
//! rate) made to the floor's Deployments directly, with no MyOwnShell and no controller in
//! between. What the cluster alone (kube-controller-manager scaling ReplicaSets, the scheduler,
//! kwok making and removing pods) does with them: how much of the machine it takes, and how long
//! after the last update every Deployment has observed its generation and has its pods ready.
//! When the cluster alone cannot keep up with a rate, no controller in front of it can keep its
//! queue short: the controller's churn figures are read against these.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use myownshell_envtest::kwok::KwokCluster;

use crate::*;

/// `rate` updates a second to random Deployments of `ns` (the floor's, whose replica counts are
/// `replicas`) for `seconds`, then until every one has caught up; prints the figures and the CPU.
/// `controller` is the controller's process (idle meanwhile: it watches another namespace), for
/// the CPU line.
pub(crate) async fn churn_floor(
    cluster: &KwokCluster,
    client: &Client,
    ns: &str,
    replicas: &mut [i32],
    (rate, seconds): (u32, u64),
    controller: u32,
) {
    let cpu = CpuMeter::start(cluster, controller);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let (updates, failed, sending) = flip_at_rate(replicas, rate, seconds, |i, count| {
        let deployments = deployments.clone();
        async move {
            let patch = Patch::Merge(serde_json::json!({"spec": {"replicas": count}}));
            deployments.patch(&shell(i).name_any(), &PatchParams::default(), &patch).await.map(drop)
        }
    })
    .await;
    let (observed, ready) = caught_up(&deployments).await;
    println!(
        "  churn floor {rate}/s for {} s, the same updates to Deployments directly (no controller): {updates} updates ({:.0}/s achieved, {failed} failed); every Deployment observed its generation {:.2?} and had its pods ready {:.2?} after the last",
        seconds,
        updates as f64 / sending.as_secs_f64(),
        observed,
        ready,
    );
    println!("    {}", cpu.line(cluster, controller));
}

/// Wait until every Deployment of `ns` has observed its generation and has its pods.
pub(crate) async fn floor_caught_up(client: &Client, ns: &str) {
    caught_up(&Api::namespaced(client.clone(), ns)).await;
}

/// How long from now (the last update answered) until every Deployment had observed its generation, and until every one
/// had as many ready pods as it asks for (polled every second, each figure to the second).
async fn caught_up(deployments: &Api<Deployment>) -> (Duration, Duration) {
    let start = Instant::now();
    let mut observed = None;
    loop {
        let list = deployments.list(&ListParams::default()).await.unwrap().items;
        let behind = |d: &&Deployment| d.status.as_ref().and_then(|s| s.observed_generation) != d.metadata.generation;
        let unready = |d: &&Deployment| {
            let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let status = d.status.as_ref();
            // A count of 0 is left out of the status, as every zero field is.
            status.and_then(|s| s.ready_replicas).unwrap_or(0) != want
                || status.and_then(|s| s.replicas).unwrap_or(0) != want
        };
        if observed.is_none() && !list.iter().any(|d| behind(&d)) {
            observed = Some(start.elapsed());
        }
        if let Some(observed) = observed
            && !list.iter().any(|d| unready(&d))
        {
            return (observed, start.elapsed());
        }
        let late = list.iter().filter(|d| unready(d)).count();
        assert!(
            start.elapsed() < DEADLINE,
            "the floor's Deployments not caught up after {DEADLINE:?}: {late} not ready"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
