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

/// Write requests the apiserver served since it started, by resource and subresource (e.g.
/// `myownshells/status`), for MyOwnShells, Deployments and Events.
pub(crate) async fn apiserver_writes_by_resource(client: &Client) -> std::collections::BTreeMap<String, f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();
    let label = |line: &str, name: &str| {
        line.split(&format!("{name}=\"")).nth(1).and_then(|rest| rest.split('"').next()).unwrap_or_default().to_owned()
    };
    let mut by = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let writes = ["POST", "PUT", "PATCH", "APPLY", "DELETE"].contains(&label(line, "verb").as_str());
        let resource = label(line, "resource");
        if !writes || !["myownshells", "deployments", "events"].contains(&resource.as_str()) {
            continue;
        }
        let key = match label(line, "subresource") {
            sub if sub.is_empty() => resource,
            sub => format!("{resource}/{sub}"),
        };
        let value = line.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()).unwrap_or(0.0);
        *by.entry(key).or_insert(0.0) += value;
    }
    by
}

/// Objects written between two readings of every MyOwnShell's, Deployment's and Event's
/// resourceVersion in `ns`: the reading after is taken now.
pub(crate) async fn changed(client: &Client, ns: &str, before: &std::collections::BTreeMap<String, String>) -> usize {
    written_between(before, &resource_versions(client, ns).await.unwrap()).len()
}
