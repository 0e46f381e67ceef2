//! Prometheus metrics of the webhook. The binary serves them ([`Metrics::router`]) on a
//! listener of their own, behind the authenticating layer.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use axum::Router;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::connect::gate::ConnectKind;
use crate::dispatch::{Outcome, Webhook};
use crate::review::Operation;

/// How a request ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestResult {
    /// Allowed unchanged.
    Allowed = 0,
    /// Allowed with a patch.
    Patched = 1,
    /// Denied: the spec breaks a rule.
    Denied = 2,
    /// A review whose request does not decode (denied with code 400).
    Invalid = 3,
    /// Not an AdmissionReview at all (HTTP 400).
    BadRequest = 4,
}

impl RequestResult {
    /// How many there are (the discriminants run from 0).
    const COUNT: usize = RequestResult::BadRequest as usize + 1;

    /// The `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestResult::Allowed => "allowed",
            RequestResult::Patched => "patched",
            RequestResult::Denied => "denied",
            RequestResult::Invalid => "invalid",
            RequestResult::BadRequest => "bad_request",
        }
    }
}

impl From<Outcome> for RequestResult {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Allowed => RequestResult::Allowed,
            Outcome::Patched => RequestResult::Patched,
            Outcome::Denied => RequestResult::Denied,
            Outcome::Invalid => RequestResult::Invalid,
        }
    }
}

/// Labels of `myownshell_webhook_requests_total`. Static values: counting a request
/// allocates nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `mutate` or `validate`.
    pub webhook: &'static str,
    /// `CREATE`, `UPDATE`, … (empty when the request did not decode).
    pub operation: &'static str,
    /// `allowed`, `patched`, `denied`, `invalid` or `bad_request`.
    pub result: &'static str,
}

/// Labels of the latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabel {
    /// `mutate`, `validate` or `connect`.
    pub webhook: &'static str,
}

/// Labels of `myownshell_webhook_connections_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectionLabels {
    /// `exec`, `attach`, `portforward`, `proxy` or `debug`.
    pub kind: &'static str,
    /// `allowed` or `denied`.
    pub result: &'static str,
}

const WEBHOOKS: [Webhook; 3] = Webhook::ALL;
/// `operation` label slots: none (a request that did not decode), then each [`Operation`].
const OPERATION_SLOTS: usize = Operation::Connect as usize + 2;
const REQUEST_SERIES: usize = WEBHOOKS.len() * OPERATION_SLOTS * RequestResult::COUNT;

/// Every metric of the webhook.
pub struct Metrics {
    registry: Arc<Registry>,
    /// Admission requests by webhook, operation and result.
    pub requests: Family<RequestLabels, Counter>,
    /// Time to answer an admission request, by webhook.
    pub latency: Family<WebhookLabel, Histogram>,
    /// Handles on `requests` by (webhook, operation, result) index, taken on first use: a
    /// request counts itself without hashing its labels. A series appears once it is non-zero.
    request_counters: [OnceLock<Counter>; REQUEST_SERIES],
    /// Handles on `latency`, one per webhook.
    latencies: [Histogram; WEBHOOKS.len()],
    /// Seconds until the served certificate expires (negative once expired).
    pub cert_expiry: Gauge<f64, AtomicU64>,
    /// 1 when the injected caBundle trusts the served certificate.
    pub cert_trusted: Gauge,
    /// Connections into shells by kind and result, one handle per pair.
    connections: [[Counter; 2]; ConnectKind::COUNT],
    /// Connections that could not be queued for the record (Event, status).
    pub connections_unrecorded: Counter,
}

fn latency_histogram() -> Histogram {
    // 50 µs … ~400 ms: admission answers in well under a millisecond.
    Histogram::new([0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.4])
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric, registered (and at zero).
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("myownshell_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("requests", "Admission requests by webhook, operation and result", requests.clone());
        let latency = Family::<WebhookLabel, Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register_with_unit(
            "request_duration",
            "Time to answer an admission request, body read to response",
            prometheus_client::registry::Unit::Seconds,
            latency.clone(),
        );
        let cert_expiry = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit(
            "certificate_expiry",
            "Seconds until the served certificate expires",
            prometheus_client::registry::Unit::Seconds,
            cert_expiry.clone(),
        );
        let cert_trusted = Gauge::default();
        registry.register(
            "certificate_trusted",
            "1 if the caBundle injected in the webhook configurations trusts the served certificate",
            cert_trusted.clone(),
        );
        let latencies = WEBHOOKS.map(|w| latency.get_or_create(&WebhookLabel { webhook: w.as_str() }).clone());
        let connections_family = Family::<ConnectionLabels, Counter>::default();
        registry.register(
            "connections",
            "Connections into shell pods (exec, attach, port-forward, cp, debug) by kind and result",
            connections_family.clone(),
        );
        let connections = ConnectKind::ALL.map(|kind| {
            ["allowed", "denied"].map(|result| {
                connections_family.get_or_create(&ConnectionLabels { kind: kind.as_str(), result }).clone()
            })
        });
        let connections_unrecorded = Counter::default();
        registry.register(
            "connections_unrecorded",
            "Connections into shells left out of the record (Event, status) because its queue was full",
            connections_unrecorded.clone(),
        );
        Self {
            registry: Arc::new(registry),
            requests,
            latency,
            request_counters: [const { OnceLock::new() }; REQUEST_SERIES],
            latencies,
            cert_expiry,
            cert_trusted,
            connections,
            connections_unrecorded,
        }
    }

    /// Count one connection into a shell.
    pub fn connection(&self, kind: ConnectKind, allowed: bool) {
        if let Some(pair) = self.connections.get(kind as usize) {
            pair[usize::from(!allowed)].inc();
        }
    }

    /// Count one answered request and its latency.
    pub fn observe(&self, webhook: Webhook, operation: Option<Operation>, result: RequestResult, elapsed: Duration) {
        let w = webhook as usize;
        let op = operation.map_or(0, |o| o as usize + 1);
        let index = (w * OPERATION_SLOTS + op) * RequestResult::COUNT + result as usize;
        if let Some(slot) = self.request_counters.get(index) {
            let labels = || RequestLabels {
                webhook: webhook.as_str(),
                operation: operation.map_or("", Operation::as_str),
                result: result.as_str(),
            };
            slot.get_or_init(|| self.requests.get_or_create(&labels()).clone()).inc();
        }
        if let Some(histogram) = self.latencies.get(w) {
            histogram.observe(elapsed.as_secs_f64());
        }
    }

    /// Update the certificate gauges.
    pub fn set_certificate(&self, not_after: Option<SystemTime>, trusted: bool) {
        let left = match not_after {
            Some(t) => match t.duration_since(SystemTime::now()) {
                Ok(d) => d.as_secs_f64(),
                Err(e) => -e.duration().as_secs_f64(),
            },
            None => 0.0,
        };
        self.cert_expiry.set(left);
        self.cert_trusted.set(i64::from(trusted));
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        myownshell_runtime::metrics::encode(&self.registry)
    }

    /// `GET /metrics`, to be served on its own listener behind the authenticating layer.
    pub fn router(&self) -> Router {
        myownshell_runtime::metrics::router(self.registry.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_every_metric() {
        let m = Metrics::new();
        m.observe(Webhook::Validate, Some(Operation::Create), RequestResult::Denied, Duration::from_micros(300));
        m.observe(Webhook::Validate, Some(Operation::Create), RequestResult::Denied, Duration::from_micros(300));
        m.observe(Webhook::Mutate, None, RequestResult::BadRequest, Duration::from_micros(30));
        m.set_certificate(Some(SystemTime::now() + Duration::from_secs(100)), true);
        m.connection(ConnectKind::Exec, false);
        m.observe(Webhook::Connect, Some(Operation::Connect), RequestResult::Denied, Duration::from_micros(40));
        let text = m.encode().unwrap();
        for want in [
            "myownshell_webhook_requests_total{webhook=\"validate\",operation=\"CREATE\",result=\"denied\"} 2",
            "myownshell_webhook_requests_total{webhook=\"mutate\",operation=\"\",result=\"bad_request\"} 1",
            "myownshell_webhook_request_duration_seconds_bucket{le=\"0.0005\",webhook=\"validate\"} 2",
            "myownshell_webhook_request_duration_seconds_bucket{le=\"0.00005\",webhook=\"mutate\"} 1",
            "myownshell_webhook_certificate_trusted 1",
            "myownshell_webhook_certificate_expiry_seconds 9",
            "myownshell_webhook_connections_total{kind=\"exec\",result=\"denied\"} 1",
            "myownshell_webhook_connections_total{kind=\"debug\",result=\"allowed\"} 0",
            "myownshell_webhook_requests_total{webhook=\"connect\",operation=\"CONNECT\",result=\"denied\"} 1",
            "myownshell_webhook_connections_unrecorded_total 0",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
    }
}
