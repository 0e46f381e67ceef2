//! Decode + mutate + validate + connect on arbitrary bytes: as a whole AdmissionReview body, and
//! as the `spec` of an otherwise well-formed review (so the fuzzer reaches the rules, not just the
//! JSON parser). Any panic is a bug; so is a patch that does not apply to the object it was made
//! for.

#![no_main]

use libfuzzer_sys::fuzz_target;
use myownshell_webhook::connect::access::ShellAccess;
use myownshell_webhook::admission::Policy;
use myownshell_webhook::dispatch::{Answer, Webhook, review};
use myownshell_webhook::connect::shell_index::ShellIndex;

fn review_with_spec(spec: &serde_json::Value, scale: bool) -> Vec<u8> {
    let (kind, object) = if scale {
        (
            serde_json::json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            serde_json::json!({"metadata": {"name": "x"}, "spec": {"replicas": spec}}),
        )
    } else {
        (
            serde_json::json!({"group": "myownshell.io", "version": "v1alpha1", "kind": "MyOwnShell"}),
            serde_json::json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "x"}, "spec": spec}),
        )
    };
    let mut request = serde_json::json!({
        "uid": "fuzz", "kind": kind,
        "resource": {"group": "myownshell.io", "version": "v1alpha1", "resource": "myownshells"},
        "name": "x", "namespace": "ns", "operation": "UPDATE", "userInfo": {},
        "object": object, "oldObject": object,
    });
    if scale {
        request["subResource"] = serde_json::json!("scale");
    }
    serde_json::to_vec(
        &serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}),
    )
    .unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let policy = Policy {
        max_size: 50,
        allowed_registries: vec!["docker.io".into(), "ghcr.io/org".into()],
        admin_groups: vec!["system:masters".into()],
        // The lifetime flags on, so the mutating webhook reads the whole spec too.
        max_run_time: Some(std::time::Duration::from_secs(8 * 3600)),
        default_idle_timeout: Some(std::time::Duration::from_secs(1800)),
        home_default_size: "1Gi".into(),
        home_max_size: "10Gi".into(),
    };
    let shells = ShellIndex::of([(
        "ns".to_owned(),
        ShellAccess { name: "x".into(), owner: Some("alice".into()), ..ShellAccess::default() },
    )]);
    // Each body with the object it carries, when the fuzzer's bytes became a spec.
    let mut bodies: Vec<(Vec<u8>, Option<serde_json::Value>)> = vec![(data.to_vec(), None)];
    if let Ok(spec) = serde_json::from_slice::<serde_json::Value>(data) {
        let object = serde_json::json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "x"}, "spec": spec});
        bodies.push((review_with_spec(&spec, false), Some(object)));
        bodies.push((review_with_spec(&spec, true), None));
    }
    for (body, object) in &bodies {
        for webhook in Webhook::ALL {
            if let Answer::Review { response, .. } = review(webhook, body, &policy, &shells) {
                // The answer is always JSON.
                assert!(serde_json::from_slice::<serde_json::Value>(&response.to_review_json()).is_ok());
                // A patch applies to the object it was made for.
                if let (Some(object), Some(patch)) = (object, &response.patch) {
                    let ops: json_patch::Patch =
                        serde_json::from_slice(&patch.json).expect("the patch is a JSON Patch");
                    let mut patched = object.clone();
                    json_patch::patch(&mut patched, &ops).expect("the patch applies to its object");
                }
            }
        }
    }
});
