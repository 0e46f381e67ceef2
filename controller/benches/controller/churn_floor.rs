//! The churn phase's floor: the same updates (`replicas` 1 <-> 2, the same random picks, the same
//! rate) made to the floor's Deployments directly, with no MyOwnShell and no controller in
//! between. What the cluster alone (kube-controller-manager scaling ReplicaSets, the scheduler,
//! kwok making and removing pods) does with them: how much of the machine it takes, and how long
//! after the last update every Deployment has observed its generation and has its pods ready.
//! When the cluster alone cannot keep up with a rate, no controller in front of it can keep its
//! queue short: the controller's churn figures are read against these.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
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

/// How long from now (the last update answered) until every Deployment had observed its
/// generation, and until every one had as many ready pods as it asks for, as a watch of them sees
/// it. A watch, not a list a second: 10,000 Deployments listed every second were the heaviest
/// reader of the apiserver whose catching up they measured.
async fn caught_up(deployments: &Api<Deployment>) -> (Duration, Duration) {
    let start = Instant::now();
    let mut lag = Lag::default();
    let mut observed = None;
    let mut events = watcher(deployments.clone(), watcher::Config::default()).default_backoff().boxed();
    loop {
        let event = tokio::time::timeout(DEADLINE.saturating_sub(start.elapsed()), events.next()).await;
        match event {
            Ok(Some(Ok(event))) => lag.see(event),
            // The watcher starts over by itself (after a backoff): a dropped connection under load.
            Ok(Some(Err(e))) => eprintln!("(watch interrupted: {e}; resuming)"),
            Ok(None) => panic!("the floor's Deployment watch ended"),
            Err(_) => panic!(
                "the floor's Deployments not caught up after {DEADLINE:?}: {} behind their generation, {} not ready",
                lag.behind.len(),
                lag.unready.len()
            ),
        }
        if !lag.listed {
            continue;
        }
        if observed.is_none() && lag.behind.is_empty() {
            observed = Some(start.elapsed());
        }
        if let Some(observed) = observed
            && lag.unready.is_empty()
        {
            return (observed, start.elapsed());
        }
    }
}

/// Which Deployments are behind their generation and which lack ready pods, as a watch tells.
#[derive(Default)]
struct Lag {
    behind: HashSet<String>,
    unready: HashSet<String>,
    /// The watch's (latest) list is complete.
    listed: bool,
}

impl Lag {
    fn see(&mut self, event: watcher::Event<Deployment>) {
        match event {
            watcher::Event::Init => {
                self.listed = false;
                self.behind.clear();
                self.unready.clear();
            }
            watcher::Event::InitDone => self.listed = true,
            watcher::Event::Apply(d) | watcher::Event::InitApply(d) => {
                let name = d.name_any();
                set(
                    &mut self.behind,
                    &name,
                    d.status.as_ref().and_then(|s| s.observed_generation) != d.metadata.generation,
                );
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let status = d.status.as_ref();
                // A count of 0 is left out of the status, as every zero field is.
                let unready = status.and_then(|s| s.ready_replicas).unwrap_or(0) != want
                    || status.and_then(|s| s.replicas).unwrap_or(0) != want;
                set(&mut self.unready, &name, unready);
            }
            watcher::Event::Delete(d) => {
                self.behind.remove(&d.name_any());
                self.unready.remove(&d.name_any());
            }
        }
    }
}

/// Put `name` in `names` if `is`, else take it out.
fn set(names: &mut HashSet<String>, name: &str, is: bool) {
    if is {
        names.insert(name.to_owned());
    } else {
        names.remove(name);
    }
}
