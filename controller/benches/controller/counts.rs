//! What a phase wrote, as the apiserver counts it and as resourceVersions show it.

use kube::Client;
use myownshell_tests::controller::{resource_versions, written_between};

/// Write requests the apiserver served for MyOwnShells, Deployments and Events since it started
/// (`apiserver_request_total`, every write verb, any response code).
pub(crate) async fn apiserver_writes(client: &Client) -> f64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| ["POST", "PUT", "PATCH", "APPLY", "DELETE"].iter().any(|v| l.contains(&format!("verb=\"{v}\""))))
        .filter(|l| ["myownshells", "deployments", "events"].iter().any(|r| l.contains(&format!("resource=\"{r}\""))))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .fold(0.0, |sum, v| sum + v)
}

/// Objects written between two readings of every MyOwnShell's, Deployment's and Event's
/// resourceVersion in `ns`: the reading after is taken now.
pub(crate) async fn changed(client: &Client, ns: &str, before: &std::collections::BTreeMap<String, String>) -> usize {
    written_between(before, &resource_versions(client, ns).await.unwrap()).len()
}
