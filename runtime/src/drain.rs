//! How long a stopping server goes on answering: until nobody is sent its way any more.
//!
//! Clients reach a pod through its Service's ready endpoints: the apiserver sends admission
//! reviews to them, kube-proxy routes a ClusterIP's connections to them. A pod that stops
//! answering while it is still listed fails the requests sent to it (for the webhook, with
//! `failurePolicy: Fail`, a refused apply: "failed calling webhook … connection refused"; for the
//! gateway, a page's reconnect that goes nowhere). So the pod must go on answering until its
//! address has left the endpoints and every consumer (the apiservers' endpoint informers,
//! kube-proxy on every node) has seen that: only then does nothing new come its way.
//!
//! So after SIGTERM (readiness already false, the kubelet already marks the pod terminating) the
//! server watches its own Service's EndpointSlices until its address is no longer listed ready,
//! then keeps answering for `settle` more (the consumers lag behind the EndpointSlice by a
//! moment), and stops. However busy the machine, the wait follows what the cluster says rather
//! than a guess; `max_wait` caps it below the pod's grace period, and a server that cannot read
//! its endpoints (not running as a pod, or refused: no RBAC, or its ServiceAccount or Role gone,
//! as when the operator is uninstalled) waits `settle` after SIGTERM.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::ListParams;
use tokio::time::Instant;

/// How often the EndpointSlices are read while waiting. A list of one Service's slices in the
/// webhook's own namespace, a few times a second for a few seconds once per process.
const POLL: Duration = Duration::from_millis(250);

/// Where the server serves from, as the Service's EndpointSlices list it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Its Service.
    pub service: String,
    /// Its namespace.
    pub namespace: String,
    /// This pod's address (`--pod-ip`, from the downward API).
    pub pod_ip: IpAddr,
}

/// Whether `ip` is listed as a ready endpoint in any of `slices`: what clients are still sent
/// to. An endpoint with no `ready` condition counts as ready, as the EndpointSlice
/// API says ("nil should be interpreted as true").
pub fn listed_ready(slices: &[EndpointSlice], ip: IpAddr) -> bool {
    slices.iter().flat_map(|s| s.endpoints.iter()).any(|e| {
        let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
        ready && e.addresses.iter().any(|a| a.parse::<IpAddr>().is_ok_and(|a| a == ip))
    })
}

/// Wait until `endpoint` has left its Service's ready endpoints (or `max_wait` has passed), then
/// `settle` more. Without an endpoint to follow, `settle` alone.
pub async fn until_nobody_is_sent(
    client: kube::Client,
    endpoint: Option<Endpoint>,
    settle: Duration,
    max_wait: Duration,
) {
    if let Some(endpoint) = endpoint {
        let started = Instant::now();
        match wait_out_of_endpoints(&client, &endpoint, max_wait).await {
            Waited::Left => tracing::info!(
                waited = ?started.elapsed(),
                ?settle,
                service = %endpoint.service,
                "this pod left its Service's ready endpoints; answering a little longer while its clients catch up"
            ),
            Waited::Refused(why) => tracing::info!(
                waited = ?started.elapsed(),
                ?settle,
                refused = %why,
                service = %endpoint.service,
                "this pod may not read its Service's endpoints (as when the operator is uninstalled); answering a little longer"
            ),
            Waited::StillListed(seen) => tracing::warn!(
                waited = ?started.elapsed(),
                ?settle,
                last_seen = %seen,
                service = %endpoint.service,
                "this pod is still listed in its Service's ready endpoints; stopping anyway after the delay"
            ),
        }
    } else {
        tracing::info!(?settle, "answering a little longer while the endpoints catch up");
    }
    if !settle.is_zero() {
        tokio::time::sleep(settle).await;
    }
}

/// A token cancelled once nobody is sent this way after `shutdown` ([`until_nobody_is_sent`]):
/// what the serving half of a process stops on, while the rest stops at `shutdown`.
pub fn once_drained(
    client: &kube::Client,
    endpoint: Option<Endpoint>,
    settle: Duration,
    max_wait: Duration,
    shutdown: &tokio_util::sync::CancellationToken,
) -> tokio_util::sync::CancellationToken {
    let serving = tokio_util::sync::CancellationToken::new();
    let (client, shutdown, stop) = (client.clone(), shutdown.clone(), serving.clone());
    tokio::spawn(async move {
        shutdown.cancelled().await;
        until_nobody_is_sent(client, endpoint, settle, max_wait).await;
        stop.cancel();
    });
    serving
}

/// What the wait for a pod's address to leave its Service's ready endpoints came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The address is no longer listed ready.
    Left,
    /// The apiserver refused the read (401 or 403): this pod may not follow its endpoints, so
    /// waiting longer learns nothing. An uninstall does this: `kubectl delete -k` takes the
    /// ServiceAccount and the Role in the same breath as the Deployment, and the gateway, its
    /// reads refused, waited out its `max_wait` (15 s) on every uninstall.
    Refused(String),
    /// Still listed ready at `max_wait` (or unreadable for another reason): what was seen last.
    StillListed(String),
}

/// Poll the Service's EndpointSlices until `endpoint.pod_ip` is no longer listed ready, the
/// apiserver refuses the read, or `max_wait` has passed.
pub async fn wait_out_of_endpoints(client: &kube::Client, endpoint: &Endpoint, max_wait: Duration) -> Waited {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &endpoint.namespace);
    let params = ListParams::default().labels(&format!("kubernetes.io/service-name={}", endpoint.service));
    let deadline = Instant::now() + max_wait;
    loop {
        let seen = match slices.list(&params).await {
            Ok(list) if !listed_ready(&list.items, endpoint.pod_ip) => return Waited::Left,
            Ok(_) => format!("{} listed ready", endpoint.pod_ip),
            Err(kube::Error::Api(status)) if status.code == 401 || status.code == 403 => {
                return Waited::Refused(format!("reading EndpointSlices: {status}"));
            }
            Err(e) => format!("reading EndpointSlices: {e}"),
        };
        if Instant::now() + POLL > deadline {
            return Waited::StillListed(seen);
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::{Endpoint as SliceEndpoint, EndpointConditions};

    use super::*;

    fn slice(endpoints: &[(&str, Option<bool>)]) -> EndpointSlice {
        EndpointSlice {
            endpoints: endpoints
                .iter()
                .map(|(ip, ready)| SliceEndpoint {
                    addresses: vec![(*ip).to_owned()],
                    conditions: Some(EndpointConditions { ready: *ready, ..Default::default() }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn an_address_is_routed_to_while_it_is_listed_ready() {
        let me: IpAddr = "10.214.0.2".parse().unwrap_or_else(|e| panic!("{e}"));
        let cases: &[(&str, Vec<EndpointSlice>, bool)] = &[
            ("no slices", vec![], false),
            ("listed ready", vec![slice(&[("10.214.0.2", Some(true))])], true),
            ("no ready condition means ready", vec![slice(&[("10.214.0.2", None)])], true),
            ("terminating: not ready", vec![slice(&[("10.214.0.2", Some(false))])], false),
            ("only others", vec![slice(&[("10.214.0.3", Some(true))])], false),
            (
                "ready in a second slice",
                vec![slice(&[("10.214.0.3", Some(true))]), slice(&[("10.214.0.2", Some(true))])],
                true,
            ),
            ("not an address", vec![slice(&[("webhook", Some(true))])], false),
        ];
        for (what, slices, want) in cases {
            assert_eq!(listed_ready(slices, me), *want, "{what}");
        }
    }
}
