//! The controller's Prometheus metrics (prometheus-client), served by the runtime's `/metrics`
//! route behind the rbac-proxy auth layer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of `myownshell_controller_reconciles_total`: how each reconcile ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success`, `error`, `waiting` (cleanup waits for the Deployment to go), `conflict` (a
    /// foreign Deployment is in the way), `finalizer`, or `cancelled` (dropped before it ended).
    pub result: String,
}

/// Labels of `myownshell_controller_writes_total`: what kind of write request was sent.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `deployment`, `status`, `deployment_delete` or `event`.
    pub kind: String,
}

/// Labels of `myownshell_controller_shells_degraded`: why.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The `Degraded` condition's reason (`ImagePullFailed`, `CrashLooping`, …).
    pub reason: String,
}

/// Labels of `myownshell_controller_lifetime_transitions_total`: what the lifetime did.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// `Started`, `StoppingSoon` (the warning given) or `Stopped`.
    pub transition: String,
    /// The stop's reason (`Idle`, `MaxRunTime`, `Requested`, …); empty for `Started`.
    pub reason: String,
}

/// Bucket bounds (seconds) of the two latency histograms: 1 ms to 60 s in 1-2.5-5 steps, so the
/// SLO bounds of controller scalability (queue latency p99 ≤ 1 s, reconcile p99 ≤ 5 s) are
/// bucket edges and the share of events within them is exact.
pub const SLO_BUCKETS: [f64; 15] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Every metric the controller exports.
#[derive(Clone)]
pub struct Metrics {
    /// `myownshell_controller_reconciles_total{result}`: finished (or dropped) reconciles.
    /// Counted through [`Metrics::start_reconcile`].
    pub reconciles: Family<ResultLabels, Counter>,
    /// `myownshell_controller_reconcile_duration_seconds`: how long each reconcile took
    /// ([`SLO_BUCKETS`]). Observed through [`Metrics::start_reconcile`].
    pub reconcile_duration: Histogram,
    /// `myownshell_controller_reconcile_queue_latency_seconds`: how long an event waited for the
    /// reconcile it triggered to start (see `queue`; [`SLO_BUCKETS`]); the SLO users watch for
    /// overload.
    pub queue_latency: Histogram,
    /// `myownshell_controller_writes_total{kind}`: write requests sent to the apiserver (a
    /// reconcile that finds everything up to date sends none). Counted through
    /// [`Metrics::wrote`].
    pub writes: Family<WriteLabels, Counter>,
    /// `myownshell_controller_managed_objects`: `MyOwnShell` objects in the watch cache, set
    /// after each reconcile.
    pub managed_objects: Gauge,
    /// `myownshell_controller_leader`: 1 while this replica reconciles (holds the Lease, or
    /// runs without leader election), else 0.
    pub leader: Gauge,
    /// `myownshell_controller_reconciles_in_flight`: reconciles running right now.
    pub in_flight: Gauge,
    /// `myownshell_controller_shells_degraded{reason}`: shells whose status says `Degraded=True`
    /// now, by reason (their pods cannot run, or the reconcile fails). Kept through
    /// [`Metrics::shell_degraded`].
    degraded: Family<ReasonLabels, Gauge>,
    /// `myownshell_controller_approval_changes_total{reason}`: changes of what a shell's
    /// approvals come to (`Approved`, `WaitingForApproval`, `Rejected`, `ApprovalExpired`), as
    /// told in their Events: each approval given, taken back, rejected or run out.
    pub approval_changes: Family<ReasonLabels, Counter>,
    /// `myownshell_controller_lifetime_transitions_total{transition,reason}`: every start, stop
    /// warning and stop the lifetime made, once each when its status was written (starts and
    /// stops are no Events: the status tells each shell's, this counts them all).
    pub lifetime_transitions: Family<TransitionLabels, Counter>,
    /// `myownshell_controller_lifetime_stop_delay_seconds`: how long after its deadline (the
    /// `status.nextStop.at` it announced) a lifetime's stop began to delete the shell's
    /// Deployment ([`SLO_BUCKETS`]): the wake-up and the wait for a worker, before the stop's
    /// writes. A class whose shells all come due at one moment shows here first. A stop with no
    /// Deployment to delete is not observed.
    pub lifetime_stop_delay: Histogram,
    /// Which shells are counted in `degraded`, and under which reason.
    degraded_shells: Arc<parking_lot::Mutex<std::collections::HashMap<(String, String), String>>>,
    registry: Arc<Registry>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered under the `myownshell_controller` prefix.
    pub fn new() -> Self {
        let reconciles = Family::<ResultLabels, Counter>::default();
        let reconcile_duration = Histogram::new(SLO_BUCKETS);
        let queue_latency = Histogram::new(SLO_BUCKETS);
        let writes = Family::<WriteLabels, Counter>::default();
        let managed_objects = Gauge::default();
        let leader = Gauge::default();
        let in_flight = Gauge::default();
        let degraded = Family::<ReasonLabels, Gauge>::default();
        let approval_changes = Family::<ReasonLabels, Counter>::default();
        let lifetime_transitions = Family::<TransitionLabels, Counter>::default();
        let lifetime_stop_delay = Histogram::new(SLO_BUCKETS);
        let mut registry = Registry::with_prefix("myownshell_controller");
        registry.register("reconciles", "Reconciles of MyOwnShell objects, by result", reconciles.clone());
        registry.register_with_unit(
            "reconcile_duration",
            "Time one reconcile took",
            prometheus_client::registry::Unit::Seconds,
            reconcile_duration.clone(),
        );
        registry.register_with_unit(
            "reconcile_queue_latency",
            "Time from a watch event to the start of the reconcile it triggered",
            prometheus_client::registry::Unit::Seconds,
            queue_latency.clone(),
        );
        registry.register("writes", "Write requests sent to the API server, by kind", writes.clone());
        registry.register("managed_objects", "MyOwnShell objects in the controller's cache", managed_objects.clone());
        registry.register(
            "leader",
            "1 while this replica holds the leader lease (or runs without election)",
            leader.clone(),
        );
        // kube-runtime does not expose its scheduler queue; reconciles running now is the
        // honest load figure it allows.
        registry.register("reconciles_in_flight", "Reconciles running right now", in_flight.clone());
        registry.register(
            "shells_degraded",
            "MyOwnShells whose Degraded condition is True, by reason (pods that cannot run, failing reconciles)",
            degraded.clone(),
        );
        registry.register(
            "approval_changes",
            "Changes of what shells' approvals come to, by the Approved condition's reason",
            approval_changes.clone(),
        );
        registry.register(
            "lifetime_transitions",
            "Starts, stop warnings and stops of shells, by transition and the stop's reason",
            lifetime_transitions.clone(),
        );
        registry.register_with_unit(
            "lifetime_stop_delay",
            "Time from a lifetime's deadline to the stop's delete of the shell's Deployment",
            prometheus_client::registry::Unit::Seconds,
            lifetime_stop_delay.clone(),
        );
        Self {
            reconciles,
            reconcile_duration,
            queue_latency,
            writes,
            managed_objects,
            leader,
            in_flight,
            degraded,
            approval_changes,
            lifetime_transitions,
            lifetime_stop_delay,
            degraded_shells: Arc::default(),
            registry: Arc::new(registry),
        }
    }

    fn reconciled(&self, result: &str, took: Duration) {
        self.reconciles.get_or_create(&ResultLabels { result: result.to_owned() }).inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    /// Count a reconcile in flight until the returned guard is dropped.
    pub fn start_reconcile(&self) -> ReconcileGuard<'_> {
        self.in_flight.inc();
        ReconcileGuard { metrics: self, started: Instant::now(), result: None }
    }

    /// Shell `namespace/name` is now `Degraded` for `reason` (`None`: it is not, or is gone).
    pub fn shell_degraded(&self, namespace: &str, name: &str, reason: Option<&str>) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut shells = self.degraded_shells.lock();
        let before = match reason {
            Some(r) => shells.insert(key, r.to_owned()),
            None => shells.remove(&key),
        };
        if before.as_deref() == reason {
            return;
        }
        if let Some(old) = before {
            self.degraded.get_or_create(&ReasonLabels { reason: old }).dec();
        }
        if let Some(new) = reason {
            self.degraded.get_or_create(&ReasonLabels { reason: new.to_owned() }).inc();
        }
    }

    /// Count one write request of `kind` (a [`WriteLabels::kind`] value) sent to the apiserver.
    pub fn wrote(&self, kind: &str) {
        self.writes.get_or_create(&WriteLabels { kind: kind.to_owned() }).inc();
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        myownshell_runtime::metrics::encode(&self.registry)
    }

    /// `GET /metrics`, to be served on its own listener.
    pub fn router(&self) -> Router {
        myownshell_runtime::metrics::router(self.registry.clone())
    }
}

/// One reconcile being measured. Dropping it leaves the in-flight gauge and records the result
/// and duration: the one [`ReconcileGuard::finish`] gave, or `cancelled` when the reconcile
/// future was dropped before it finished (leadership lost, shutdown), so no path can leak the
/// gauge.
pub struct ReconcileGuard<'a> {
    metrics: &'a Metrics,
    started: Instant,
    result: Option<&'static str>,
}

impl ReconcileGuard<'_> {
    /// The reconcile ended with `result` (a metric label).
    pub fn finish(mut self, result: &'static str) {
        self.result = Some(result);
    }
}

impl Drop for ReconcileGuard<'_> {
    fn drop(&mut self) {
        self.metrics.in_flight.dec();
        self.metrics.reconciled(self.result.unwrap_or("cancelled"), self.started.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_named_for_the_controller() {
        let m = Metrics::new();
        m.start_reconcile().finish("success");
        m.wrote("status");
        m.leader.set(1);
        let text = m.encode().unwrap();
        for line in [
            "myownshell_controller_reconciles_total{result=\"success\"} 1",
            "myownshell_controller_writes_total{kind=\"status\"} 1",
            "myownshell_controller_leader 1",
            "myownshell_controller_reconcile_duration_seconds_count 1",
            "myownshell_controller_reconcile_queue_latency_seconds_count 0",
            "myownshell_controller_managed_objects 0",
            "myownshell_controller_reconciles_in_flight 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn degraded_shells_are_counted_once_each_under_their_latest_reason() {
        let m = Metrics::new();
        m.shell_degraded("team", "a", Some("ImagePullFailed"));
        m.shell_degraded("team", "a", Some("ImagePullFailed"));
        m.shell_degraded("team", "b", Some("ImagePullFailed"));
        m.shell_degraded("team", "b", Some("CrashLooping"));
        m.shell_degraded("team", "c", None);
        let text = m.encode().unwrap();
        assert!(text.contains("myownshell_controller_shells_degraded{reason=\"ImagePullFailed\"} 1"), "{text}");
        assert!(text.contains("myownshell_controller_shells_degraded{reason=\"CrashLooping\"} 1"), "{text}");
        m.shell_degraded("team", "a", None);
        m.shell_degraded("team", "b", None);
        let text = m.encode().unwrap();
        assert!(text.contains("myownshell_controller_shells_degraded{reason=\"ImagePullFailed\"} 0"), "{text}");
        assert!(text.contains("myownshell_controller_shells_degraded{reason=\"CrashLooping\"} 0"), "{text}");
    }

    #[test]
    fn a_reconcile_dropped_midway_leaves_the_gauge_and_counts_as_cancelled() {
        let m = Metrics::new();
        let running = m.start_reconcile();
        assert_eq!(m.in_flight.get(), 1);
        drop(running);
        assert_eq!(m.in_flight.get(), 0);
        let text = m.encode().unwrap();
        assert!(text.contains("myownshell_controller_reconciles_total{result=\"cancelled\"} 1"), "{text}");
    }
}
