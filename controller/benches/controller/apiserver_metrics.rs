//! Reading kube-apiserver's own `/metrics`: the text, a label of one sample line, its value, and
//! which requests are the writes this benchmark looks at.

use kube::Client;

/// The resources whose writes the benchmark counts and times: what the controller path writes.
pub(crate) const RESOURCES: [&str; 3] = ["myownshells", "deployments", "events"];
/// What runs a Deployment's pods, written by kube-controller-manager, the garbage collector and
/// the node, not by the controller: counted apart, as what a transition costs besides.
pub(crate) const POD_RESOURCES: [&str; 2] = ["replicasets", "pods"];
/// The verbs that create or change an object.
pub(crate) const CHANGE_VERBS: [&str; 4] = ["POST", "PUT", "PATCH", "APPLY"];
/// The verbs of every write: changes and deletions.
pub(crate) const WRITE_VERBS: [&str; 5] = ["POST", "PUT", "PATCH", "APPLY", "DELETE"];

/// The apiserver's metrics, as text.
pub(crate) async fn text(client: &Client) -> String {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    client.request_text(request).await.unwrap()
}

/// The value of label `name` in a sample line (`metric{a="x",b="y"} 3`).
pub(crate) fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split(&format!("{name}=\"")).nth(1).and_then(|rest| rest.split('"').next())
}

/// The sample's value, 0 if it has none.
pub(crate) fn value(line: &str) -> f64 {
    line.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()).unwrap_or(0.0)
}

/// Whether the sample is of a request with one of `verbs` on one of [`RESOURCES`].
pub(crate) fn of_resources(line: &str, verbs: &[&str]) -> bool {
    of(line, verbs, &RESOURCES)
}

/// Whether the sample is of a request with one of `verbs` on one of `resources`.
pub(crate) fn of(line: &str, verbs: &[&str], resources: &[&str]) -> bool {
    label(line, "verb").is_some_and(|v| verbs.contains(&v))
        && label(line, "resource").is_some_and(|r| resources.contains(&r))
}
