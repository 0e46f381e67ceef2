//! Table tests of the webhooks (the spec rules, the connect gate, whole reviews), on AdmissionReview JSON shaped like the apiserver's:
//! one file per module under test, sharing the helpers below.

mod connect;
mod defaulting;
mod review;
mod spec;
mod validation;

use serde_json::{Value, json};

use crate::admission::*;
use crate::connect::shell_index::ShellIndex;
use crate::dispatch::*;
use crate::review::*;

/// An index that knows no shell (the MyOwnShell webhooks consult it only for `kubectl scale`).
fn no_shells() -> &'static ShellIndex {
    static NONE: std::sync::LazyLock<ShellIndex> = std::sync::LazyLock::new(|| ShellIndex::of([]));
    &NONE
}

/// An AdmissionReview body as kube-apiserver sends it.
pub(crate) fn body(operation: &str, object: Value, old: Value, sub_resource: Option<&str>) -> Vec<u8> {
    let kind = if sub_resource == Some("scale") {
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    } else {
        json!({"group": "myownshell.io", "version": "v1alpha1", "kind": "MyOwnShell"})
    };
    let mut request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": kind,
        "resource": {"group": "myownshell.io", "version": "v1alpha1", "resource": "myownshells"},
        "name": "x",
        "namespace": "ns",
        "operation": operation,
        "userInfo": {"username": "admin", "groups": ["system:masters"]},
        "object": object,
        "oldObject": old,
        "dryRun": false,
    });
    if let Some(sub) = sub_resource {
        request["subResource"] = json!(sub);
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .unwrap()
}

fn shell(spec: Value) -> Value {
    json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "x", "namespace": "ns"}, "spec": spec})
}

/// A request decoded from a body that lives as long as the test (requests borrow their body).
fn request(operation: &str, object: Value, old: Value) -> Request<'static> {
    decode(Box::leak(body(operation, object, old, None).into_boxed_slice())).unwrap()
}

fn apply_patch(object: &Value, response: &Response<'_>) -> Value {
    let mut doc = object.clone();
    if let Some(patch) = &response.patch {
        let patch: json_patch::Patch = serde_json::from_slice(&patch.json).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
    }
    doc
}

fn code(response: &Response<'_>) -> u16 {
    response.status.as_ref().map_or(200, |s| s.code)
}

fn full_spec() -> Value {
    json!({
        "size": 3,
        "image": "ghcr.io/org/shell:1.2",
        "command": ["/bin/bash", "-l"],
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}},
    })
}
