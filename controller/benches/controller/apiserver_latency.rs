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

use crate::apiserver_metrics::{self, CHANGE_VERBS, label};

const NAME: &str = "apiserver_request_duration_seconds_bucket{";

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

/// The cumulative buckets of every change (not deletion) of `apiserver_metrics::RESOURCES`,
/// summed over their label sets.
async fn write_buckets(client: &Client) -> Vec<(f64, f64)> {
    let text = apiserver_metrics::text(client).await;
    let mut by_le: Vec<(f64, f64)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(NAME)) {
        if !apiserver_metrics::of_resources(line, &CHANGE_VERBS) {
            continue;
        }
        let le = match label(line, "le") {
            Some("+Inf") => f64::INFINITY,
            Some(le) => match le.parse() {
                Ok(le) => le,
                Err(_) => continue,
            },
            None => continue,
        };
        let value = apiserver_metrics::value(line);
        match by_le.iter_mut().find(|(l, _)| *l == le) {
            Some((_, sum)) => *sum += value,
            None => by_le.push((le, value)),
        }
    }
    by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_le
}
