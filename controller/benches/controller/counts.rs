//! What a phase wrote, as the apiserver counts it and as resourceVersions show it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use myownshell_tests::controller::{resource_versions, written_between};

use crate::apiserver_metrics::{self, POD_RESOURCES, RESOURCES, WRITE_VERBS, label};

/// Write requests the apiserver served for MyOwnShells, Deployments and Events since it started
/// (`apiserver_request_total`, every write verb, any response code).
pub(crate) async fn apiserver_writes(client: &Client) -> f64 {
    // A fold from 0, not `sum()`, which starts at -0.0 and prints "-0" for no writes.
    apiserver_writes_by_resource(client).await.values().fold(0.0, |sum, v| sum + v)
}

/// Write requests the apiserver served since it started, by resource and subresource (e.g.
/// `myownshells/status`), for MyOwnShells, Deployments and Events.
pub(crate) async fn apiserver_writes_by_resource(client: &Client) -> BTreeMap<String, f64> {
    writes_by_resource(client, &RESOURCES).await
}

/// Write requests the apiserver served since it started, by resource and subresource, for
/// `resources`.
async fn writes_by_resource(client: &Client, resources: &[&str]) -> BTreeMap<String, f64> {
    let text = apiserver_metrics::text(client).await;
    let mut by = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        if !apiserver_metrics::of(line, &WRITE_VERBS, resources) {
            continue;
        }
        let resource = label(line, "resource").unwrap_or_default();
        let key = match label(line, "subresource").unwrap_or_default() {
            "" => resource.to_owned(),
            sub => format!("{resource}/{sub}"),
        };
        *by.entry(key).or_insert(0.0) += apiserver_metrics::value(line);
    }
    by
}

/// Objects written between two readings of every MyOwnShell's, Deployment's and Event's
/// resourceVersion in `ns`: the reading after is taken now.
pub(crate) async fn changed(client: &Client, ns: &str, before: &BTreeMap<String, String>) -> usize {
    written_between(before, &resource_versions(client, ns).await.unwrap()).len()
}

/// Every write the apiserver counts over a phase, of every client (the controller's, the
/// benchmark's own, kube-controller-manager's), on MyOwnShells, Deployments and Events, divided
/// by the transitions the phase made: what one transition costs the apiserver.
pub(crate) struct WritesPer {
    before: BTreeMap<String, f64>,
    /// The same for [`POD_RESOURCES`], told apart.
    pods_before: BTreeMap<String, f64>,
    since: Timestamp,
}

impl WritesPer {
    pub(crate) async fn start(client: &Client) -> Self {
        Self {
            before: apiserver_writes_by_resource(client).await,
            pods_before: writes_by_resource(client, &POD_RESOURCES).await,
            since: Timestamp::now(),
        }
    }

    /// `besides: …` the writes on ReplicaSets and pods per transition (`m`), which no controller
    /// of ours makes: what kube-controller-manager, the garbage collector and the node write to
    /// carry a transition out, so that one way of stopping is not cheaper only in the resources
    /// [`WritesPer::line`] counts.
    pub(crate) async fn pods_line(&self, client: &Client, m: usize) -> String {
        let after = writes_by_resource(client, &POD_RESOURCES).await;
        let (_, shares) = per_transition(&after, &self.pods_before, m, 0);
        format!(
            "besides, on ReplicaSets and pods (kube-controller-manager's, the garbage collector's, the node's): {}",
            shares.join(", ")
        )
    }

    /// The Events seen since [`WritesPer::start`], by who wrote them and why, with how many times
    /// each was seen (an Event seen again is one more write, its count's patch): the Events
    /// share of `writes per …` told apart. The most frequent first.
    pub(crate) async fn events_line(&self, client: &Client) -> String {
        let events: Api<Event> = Api::all(client.clone());
        let Ok(list) = events.list(&ListParams::default()).await else {
            return "events: could not be listed".to_owned();
        };
        let mut by: BTreeMap<String, i64> = BTreeMap::new();
        for event in list.items {
            let last = event.last_timestamp.as_ref().map(|t| t.0).or(event.event_time.as_ref().map(|t| t.0));
            if last.is_none_or(|t| t < self.since) {
                continue;
            }
            let who = event
                .reporting_component
                .filter(|c| !c.is_empty())
                .or(event.source.and_then(|s| s.component))
                .unwrap_or_default();
            let key = format!(
                "{who} {} in {}",
                event.reason.unwrap_or_default(),
                event.metadata.namespace.unwrap_or_default()
            );
            *by.entry(key).or_insert(0) += i64::from(event.count.unwrap_or(1).max(1));
        }
        let mut by: Vec<(String, i64)> = by.into_iter().collect();
        by.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let shown: Vec<String> = by.iter().take(8).map(|(key, n)| format!("{key}: {n}")).collect();
        format!("events seen meanwhile, by who, why and where: {}", shown.join(", "))
    }

    /// `writes per WHAT: X` for `m` transitions, less the benchmark's own `requests` (the patch
    /// that asked for each, on `myownshells`), with each resource's share.
    pub(crate) async fn line(&self, client: &Client, what: &str, m: usize, requests: usize) -> String {
        let after = apiserver_writes_by_resource(client).await;
        let (total, shares) = per_transition(&after, &self.before, m, requests);
        format!(
            "writes per {what}: {:.2} ({}; the benchmark's own {requests} requests left out)",
            total / m.max(1) as f64,
            shares.join(", ")
        )
    }
}

/// The writes between two readings (`before`, `after`) per transition (`m`): their total, and
/// each resource's share (`KEY X.XX`) where it wrote at all; the benchmark's own `requests` (on
/// `myownshells`) left out.
fn per_transition(
    after: &BTreeMap<String, f64>,
    before: &BTreeMap<String, f64>,
    m: usize,
    requests: usize,
) -> (f64, Vec<String>) {
    let mut shares = Vec::new();
    let mut total = 0.0;
    for (key, value) in after {
        let mut delta = value - before.get(key).copied().unwrap_or(0.0);
        if key == "myownshells" {
            delta -= requests as f64;
        }
        if delta.abs() >= 0.5 {
            total += delta;
            shares.push(format!("{key} {:.2}", delta / m.max(1) as f64));
        }
    }
    (total, shares)
}
