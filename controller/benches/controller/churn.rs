//! Spec updates to random objects at a fixed rate, and the SLO figures over them.

use std::time::{Duration, Instant};

use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use myownshell_api::MyOwnShell;
use myownshell_envtest::eventually;
use myownshell_tests::controller::{histogram_buckets, histogram_delta, histogram_quantile};

use crate::*;

/// Resolves when every MyOwnShell in `ns` reports its current generation.
pub(crate) async fn statuses_current(client: &Client, ns: &str) {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    eventually("every status to show its generation", DEADLINE, || async {
        let list = shells.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let behind = list
            .items
            .iter()
            .filter(|s| s.status.as_ref().and_then(|st| st.observed_generation) != s.metadata.generation)
            .count();
        if behind == 0 { Ok(()) } else { Err(format!("{behind} behind")) }
    })
    .await
    .unwrap();
}

/// A small deterministic generator for picking objects (splitmix64).
pub(crate) struct Picker(u64);

impl Picker {
    /// The same seed picks the same objects (the churn floor and the churn of one rate).
    pub(crate) fn seeded(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// `rate` updates a second for `seconds`, each flipping a random object's count (`counts[i]`)
/// between 1 and 2, picked as [`Picker::seeded`]`(rate)` picks: the churn floor and the churn of
/// one rate update the same objects in the same order. `update(i, count)` sends the request.
/// Returns how many were sent, how many failed, and how long sending took.
pub(crate) async fn flip_at_rate<F, Fut>(
    counts: &mut [i32],
    rate: u32,
    seconds: u64,
    update: F,
) -> (usize, usize, Duration)
where
    F: Fn(usize, i32) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>> + Send + 'static,
{
    let mut picker = Picker::seeded(u64::from(rate));
    let mut ticks = crate::pace::ticks(rate);
    // Enough in flight for the rate at a few hundred ms per update; beyond it the rate falls.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(512));
    let mut sent = tokio::task::JoinSet::new();
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    while Instant::now() < end {
        ticks.tick().await;
        let i = picker.below(counts.len());
        counts[i] = if counts[i] == 1 { 2 } else { 1 };
        let (request, slot) = (update(i, counts[i]), slots.clone().acquire_owned().await.unwrap());
        sent.spawn(async move {
            let result = request.await;
            drop(slot);
            result
        });
    }
    let updates = sent.len();
    let failed = crate::pace::failures(sent).await;
    (updates, failed, start.elapsed())
}

/// The p50 and p99, in ms, of the controller's histogram `name` between two scrapes of its
/// metrics.
pub(crate) fn histogram_figures(before: &str, after: &str, name: &str) -> (f64, f64) {
    let delta = histogram_delta(&histogram_buckets(after, name), &histogram_buckets(before, name));
    let ms = |q| histogram_quantile(q, &delta).map_or(f64::NAN, |s| s * 1000.0);
    (ms(0.5), ms(0.99))
}

/// The controller's queue latency and reconcile duration between two scrapes of its metrics:
/// `[(p50, p99) of the queue, (p50, p99) of the reconciles]`, in ms.
pub(crate) fn reconcile_figures(before: &str, after: &str) -> [(f64, f64); 2] {
    [QUEUE_LATENCY, RECONCILE_DURATION].map(|name| histogram_figures(before, after, name))
}

/// The controller's reconciles and writes between two scrapes of its metrics.
pub(crate) fn reconciles_and_writes(before: &str, after: &str) -> (f64, f64) {
    let delta = |name| family_sum(after, name) - family_sum(before, name);
    (delta("myownshell_controller_reconciles_total"), delta("myownshell_controller_writes_total"))
}

/// One churn phase: `rate` updates per second to random objects for `seconds`, then until every
/// status is current again; the SLO figures from the controller's histograms over the phase.
pub(crate) async fn churn(
    client: &Client,
    ns: &str,
    sizes: &mut [i32],
    rate: u32,
    seconds: u64,
    scraper: &Scraper,
    controller: &Controller,
) {
    let before = scraper.scrape(controller).await;
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let (updates, failed, sending) = flip_at_rate(sizes, rate, seconds, |i, size| {
        let shells = shells.clone();
        async move {
            let patch = Patch::Merge(serde_json::json!({"spec": {"size": size}}));
            shells.patch(&shell(i).name_any(), &PatchParams::default(), &patch).await.map(drop)
        }
    })
    .await;
    statuses_current(client, ns).await;
    let drained = start.elapsed().saturating_sub(sending);
    let after = scraper.scrape(controller).await;
    let [(q50, q99), (r50, r99)] = reconcile_figures(&before, &after);
    let verdict = |p99_ms: f64, slo_ms: f64| if p99_ms <= slo_ms { "within" } else { "OVER" };
    println!(
        "  churn {rate}/s for {seconds} s: {updates} updates ({:.0}/s achieved, {failed} failed); statuses current {drained:.2?} after the last",
        updates as f64 / sending.as_secs_f64()
    );
    println!(
        "    queue latency p50 {q50:.1} ms, p99 {q99:.1} ms ({} the SLO p99 <= 1 s); reconcile p50 {r50:.1} ms, p99 {r99:.1} ms ({} the SLO p99 <= 5 s)",
        verdict(q99, 1000.0),
        verdict(r99, 5000.0)
    );
    let (reconciles, writes) = reconciles_and_writes(&before, &after);
    println!(
        "    reconciles {reconciles:.0}, writes {writes:.0}; controller RSS now {:.1} MiB, peak {:.1} MiB",
        controller.rss_mib("VmRSS:"),
        controller.rss_mib("VmHWM:"),
    );
}
