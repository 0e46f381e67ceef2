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

/// A reading of the apiserver's latency histograms for changes and for deletions, to compare
/// with a later one.
pub(crate) struct ApiserverLatency {
    changes: Vec<(f64, f64)>,
    deletes: Vec<(f64, f64)>,
}

impl ApiserverLatency {
    pub(crate) async fn start(client: &Client) -> Self {
        let text = apiserver_metrics::text(client).await;
        Self { changes: buckets(&text, &CHANGE_VERBS), deletes: buckets(&text, &["DELETE"]) }
    }

    /// The p50 and p99 of the changes and of the deletions since [`ApiserverLatency::start`], in
    /// ms, as one line (a kind with none left out: a stop deletes, a churn changes).
    pub(crate) async fn line(&self, client: &Client) -> String {
        let text = apiserver_metrics::text(client).await;
        let figures = |what: &str, now: Vec<(f64, f64)>, before: &[(f64, f64)]| {
            let delta = histogram_delta(&now, before);
            let count = delta.last().map_or(0.0, |b| b.1);
            let ms = |q| histogram_quantile(q, &delta).map_or(f64::NAN, |s| s * 1000.0);
            (count > 0.0).then(|| format!("{count:.0} {what} p50 {:.0} ms, p99 {:.0} ms", ms(0.5), ms(0.99)))
        };
        let parts: Vec<String> = [
            figures("writes", buckets(&text, &CHANGE_VERBS), &self.changes),
            figures("deletes", buckets(&text, &["DELETE"]), &self.deletes),
        ]
        .into_iter()
        .flatten()
        .collect();
        let parts = if parts.is_empty() { "no writes".to_owned() } else { parts.join("; ") };
        format!(
            "the apiserver's own latency for MyOwnShells, Deployments and Events meanwhile (apiserver_request_duration_seconds): {parts}"
        )
    }
}

/// The cumulative buckets of every request with one of `verbs` on
/// `apiserver_metrics::RESOURCES`, summed over their label sets.
fn buckets(text: &str, verbs: &[&str]) -> Vec<(f64, f64)> {
    let mut by_le: Vec<(f64, f64)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(NAME)) {
        if !apiserver_metrics::of_resources(line, verbs) {
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
