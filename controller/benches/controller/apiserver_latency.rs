//! The apiserver's own write latency over a phase: the floor under the controller's latency.
//!
//! A reconcile that changes something makes at least one write (the Deployment, the status), and
//! its queue latency is the wait for one of `--concurrency` reconciles to finish. When the
//! apiserver itself takes seconds to answer a write (on 2 cores with 10,000 pods it shares the
//! machine with etcd, kube-controller-manager and kwok), no controller's reconcile p99 can be
//! below that. Read from `apiserver_request_duration_seconds` over the same phase, this says
//! which part of a latency figure is the controller's.

use kube::Client;
use myownshell_tests::controller::{histogram_delta, histogram_quantile};

const NAME: &str = "apiserver_request_duration_seconds_bucket{";
const WRITE_VERBS: [&str; 4] = ["POST", "PUT", "PATCH", "APPLY"];
const RESOURCES: [&str; 3] = ["myownshells", "deployments", "events"];

/// A reading of the apiserver's write-latency histogram, to compare with a later one.
pub(crate) struct ApiserverLatency {
    before: Vec<(f64, f64)>,
}

impl ApiserverLatency {
    pub(crate) async fn start(client: &Client) -> Self {
        Self { before: write_buckets(client).await }
    }

    /// The p50 and p99 of the writes since [`ApiserverLatency::start`], in ms, as one line.
    pub(crate) async fn line(&self, client: &Client) -> String {
        let delta = histogram_delta(&write_buckets(client).await, &self.before);
        let ms = |q| histogram_quantile(q, &delta).map_or(f64::NAN, |s| s * 1000.0);
        let count = delta.last().map_or(0.0, |b| b.1);
        format!(
            "the apiserver's own latency for the {count:.0} writes of MyOwnShells, Deployments and Events meanwhile (apiserver_request_duration_seconds): p50 {:.0} ms, p99 {:.0} ms",
            ms(0.5),
            ms(0.99)
        )
    }
}

/// The cumulative buckets of every write of [`RESOURCES`], summed over their label sets.
async fn write_buckets(client: &Client) -> Vec<(f64, f64)> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();
    let mut by_le: Vec<(f64, f64)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(NAME)) {
        let label = |name: &str| line.split(&format!("{name}=\"")).nth(1).and_then(|r| r.split('"').next());
        let write = label("verb").is_some_and(|v| WRITE_VERBS.contains(&v));
        if !write || !label("resource").is_some_and(|r| RESOURCES.contains(&r)) {
            continue;
        }
        let le = match label("le") {
            Some("+Inf") => f64::INFINITY,
            Some(le) => match le.parse() {
                Ok(le) => le,
                Err(_) => continue,
            },
            None => continue,
        };
        let value = line.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()).unwrap_or(0.0);
        match by_le.iter_mut().find(|(l, _)| *l == le) {
            Some((_, sum)) => *sum += value,
            None => by_le.push((le, value)),
        }
    }
    by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_le
}
