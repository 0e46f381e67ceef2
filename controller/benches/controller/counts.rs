//! What a phase wrote, as the apiserver counts it and as resourceVersions show it.

use std::collections::BTreeMap;

use kube::Client;
use myownshell_tests::controller::{resource_versions, written_between};

use crate::apiserver_metrics::{self, WRITE_VERBS, label};

/// Write requests the apiserver served for MyOwnShells, Deployments and Events since it started
/// (`apiserver_request_total`, every write verb, any response code).
pub(crate) async fn apiserver_writes(client: &Client) -> f64 {
    // A fold from 0, not `sum()`, which starts at -0.0 and prints "-0" for no writes.
    apiserver_writes_by_resource(client).await.values().fold(0.0, |sum, v| sum + v)
}

/// Write requests the apiserver served since it started, by resource and subresource (e.g.
/// `myownshells/status`), for MyOwnShells, Deployments and Events.
pub(crate) async fn apiserver_writes_by_resource(client: &Client) -> BTreeMap<String, f64> {
    let text = apiserver_metrics::text(client).await;
    let mut by = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        if !apiserver_metrics::of_resources(line, &WRITE_VERBS) {
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
