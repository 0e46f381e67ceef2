//! Table tests of the admission functions, on AdmissionReview JSON shaped like the apiserver's.

use myownshell_api::{defaults, names};
use serde_json::{Value, json};

use super::*;

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
    if let Some(patch) = response.patch {
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

#[test]
fn mutation_fills_exactly_what_is_missing() {
    let defaults_resources = serde_json::to_value(defaults::resources()).unwrap();
    let cases = [
        (
            "no spec at all",
            json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "x"}}),
        ),
        ("empty spec", shell(json!({}))),
        ("only size", shell(json!({"size": 0}))),
        ("everything set", shell(full_spec())),
        ("null image", shell(json!({"image": null, "size": 2}))),
    ];
    for (what, object) in cases {
        let response = mutate(&request("CREATE", object.clone(), Value::Null));
        assert!(response.allowed, "{what}");
        let patched = apply_patch(&object, &response);
        let spec = &patched["spec"];
        let original = &object["spec"];
        // Defaults where unset, user values untouched.
        let pick = |field: &str, default: Value| {
            if original.get(field).is_none_or(Value::is_null) { default } else { original[field].clone() }
        };
        assert_eq!(spec["size"], pick("size", json!(1)), "{what}");
        assert_eq!(spec["image"], pick("image", json!(defaults::IMAGE)), "{what}");
        assert_eq!(spec["command"], pick("command", json!(defaults::command())), "{what}");
        assert_eq!(spec["resources"], pick("resources", defaults_resources.clone()), "{what}");
        assert_eq!(patched["metadata"]["finalizers"], json!([names::FINALIZER]), "{what}");
        // Nothing else changed.
        let mut rest = patched.clone();
        let mut orig = object.clone();
        for v in [&mut rest, &mut orig] {
            v.as_object_mut().unwrap().remove("spec");
            v["metadata"].as_object_mut().unwrap().remove("finalizers");
        }
        assert_eq!(rest, orig, "{what}");
    }
}

#[test]
fn mutation_patch_is_minimal_and_ordered() {
    let response = mutate(&request("CREATE", shell(json!({"size": 2, "image": "busybox:1"})), Value::Null));
    let ops: Value = serde_json::from_slice(&response.patch.unwrap().json).unwrap();
    let paths: Vec<&str> = ops.as_array().unwrap().iter().map(|o| o["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/spec/command", "/spec/resources", "/metadata/finalizers"]);
    assert!(ops.as_array().unwrap().iter().all(|o| o["op"] == "add"));

    // No spec: the parent is created first.
    let response = mutate(&request("CREATE", json!({"metadata": {"name": "x"}}), Value::Null));
    let ops: Value = serde_json::from_slice(&response.patch.unwrap().json).unwrap();
    assert_eq!(ops[0], json!({"op": "add", "path": "/spec", "value": {}}));
}

#[test]
fn no_patch_when_nothing_changes() {
    let mut object = shell(full_spec());
    object["metadata"]["finalizers"] = json!(["other.io/keep", names::FINALIZER]);
    let response = mutate(&request("UPDATE", object.clone(), object));
    assert!(response.allowed);
    assert_eq!(response.patch, None);
}

#[test]
fn finalizer_is_appended_to_others_and_never_added_while_deleting() {
    let mut object = shell(full_spec());
    object["metadata"]["finalizers"] = json!(["other.io/keep"]);
    let patched = apply_patch(&object, &mutate(&request("UPDATE", object.clone(), object.clone())));
    assert_eq!(patched["metadata"]["finalizers"], json!(["other.io/keep", names::FINALIZER]));

    object["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    object["metadata"]["finalizers"] = json!([]);
    let response = mutate(&request("UPDATE", object.clone(), object));
    assert_eq!(response.patch, None, "a deleting object gets no finalizer back");
}

#[test]
fn validation_table() {
    let policy = Policy { max_size: 50, allowed_registries: vec![] };
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let ok: &[Value] = &[
        json!({}),
        full_spec(),
        json!({"size": 0}),
        json!({"size": 50}),
        json!({"image": format!("registry.example.com:5000/a/b@{digest}")}),
        json!({"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1024Mi"}}}),
        json!({"resources": {"requests": {"cpu": "2"}}}),
        json!({"resources": {"limits": {"example.com/dongle": "1", "hugepages-2Mi": "4Mi", "memory": "64Mi"}}}),
    ];
    for spec in ok {
        let response = validate(&request("CREATE", shell(spec.clone()), Value::Null), &policy);
        assert!(response.allowed, "{spec}: {}", response.message());
    }
    let bad: &[(Value, &str)] = &[
        (json!({"size": 51}), "spec.size: must be between 0 and 50, got 51"),
        (json!({"size": 500}), "spec.size: must be between 0 and 50, got 500"),
        (json!({"size": -1}), "spec.size: must be between 0 and 50, got -1"),
        (
            json!({"image": "Busybox"}),
            "spec.image: must be a valid image reference (repository path must be lowercase), got \"Busybox\"",
        ),
        (
            json!({"image": "busybox@sha256:abc"}),
            "spec.image: must be a valid image reference (sha256 digest must be 64 lowercase hex digits)",
        ),
        (json!({"image": "busy box"}), "spec.image: must be a valid image reference (contains whitespace)"),
        (json!({"command": []}), "spec.command: must not be empty, got []"),
        (json!({"command": [""]}), "spec.command[0]: the executable must not be empty, got \"\""),
        (
            json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
            "spec.resources.requests[cpu]: must be less than or equal to the limit \"1\", got \"2\"",
        ),
        (
            json!({"resources": {"requests": {"memory": "65Mi"}, "limits": {"memory": "64Mi"}}}),
            "spec.resources.requests[memory]: must be less than or equal to the limit \"64Mi\", got \"65Mi\"",
        ),
        (
            json!({"resources": {"limits": {"cpu": "lots"}}}),
            "spec.resources.limits[cpu]: must be a valid quantity such as 250m or 64Mi (not a number), got \"lots\"",
        ),
        (
            json!({"resources": {"limits": {"memory": "-1"}}}),
            "spec.resources.limits[memory]: must not be negative, got \"-1\"",
        ),
        (json!({"resources": {"limits": {"cpus": "1"}}}), "spec.resources.limits[cpus]: must be cpu, memory"),
    ];
    for (spec, want) in bad {
        let response = validate(&request("CREATE", shell(spec.clone()), Value::Null), &policy);
        assert!(!response.allowed, "{spec} was allowed");
        assert!(response.message().starts_with(want), "{spec}: {}", response.message());
        assert_eq!(code(&response), 422);
    }
}

/// The apiserver's rules for a container's resources (k8s.io/kubernetes
/// pkg/apis/core/validation, `ValidateContainerResourceRequirements`), which would otherwise
/// reject the Deployment after the MyOwnShell was admitted.
#[test]
fn resources_follow_the_apiservers_rules_for_containers() {
    let policy = Policy::default();
    let ok: &[Value] = &[
        // Extended resources: whole numbers, request equal to the limit (a limit alone is fine:
        // the pod's request defaults to it).
        json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": 1}}),
        json!({"limits": {"example.com/gpu": "2"}}),
        json!({"requests": {"example.com/gpu": "1000m"}, "limits": {"example.com/gpu": "1"}}),
        // Hugepages: multiples of the page size, with cpu or memory, request equal to the limit.
        json!({"limits": {"hugepages-2Mi": "4Mi", "memory": "64Mi"}}),
        json!({"requests": {"hugepages-1Gi": "2Gi", "cpu": "1"}, "limits": {"hugepages-1Gi": "2Gi"}}),
        json!({"limits": {"hugepages-2Mi": "0", "cpu": "1"}}),
        // Names in the kubernetes.io domain are the apiserver's own: not extended resources.
        json!({"requests": {"kubernetes.io/custom": "1.5"}}),
        json!({"requests": {"example.kubernetes.io/custom": "1"}, "limits": {"example.kubernetes.io/custom": "2.5"}}),
        // Compared as stored: both round up to 1001m.
        json!({"requests": {"cpu": "1.0002"}, "limits": {"cpu": "1.0001"}}),
        // The ceiling itself.
        json!({"limits": {"memory": "9223372036854775807", "ephemeral-storage": "7Ei"}}),
        json!({"limits": {"a.b-c.example.com/x_y.z": "1"}}),
    ];
    for resources in ok {
        let response = validate(&request("CREATE", shell(json!({"resources": resources})), Value::Null), &policy);
        assert!(response.allowed, "{resources}: {}", response.message());
    }
    let long_domain = format!("{}.com/gpu", "a".repeat(241));
    let bad: &[(Value, &str)] = &[
        (
            json!({"requests": {"example.com/gpu": "1"}}),
            "spec.resources.requests[example.com/gpu]: needs an equal limit (example.com/gpu cannot be overcommitted), got \"1\" and no limit",
        ),
        (
            json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
            "spec.resources.requests[example.com/gpu]: must equal the limit \"2\" (example.com/gpu cannot be overcommitted), got \"1\"",
        ),
        (
            json!({"limits": {"example.com/gpu": "1.5"}}),
            "spec.resources.limits[example.com/gpu]: must be a whole number (extended resources are counted in units), got \"1.5\"",
        ),
        (
            json!({"requests": {"example.com/gpu": "500m"}, "limits": {"example.com/gpu": "500m"}}),
            "spec.resources.requests[example.com/gpu]: must be a whole number (extended resources are counted in units), got \"500m\"",
        ),
        (
            json!({"limits": {"hugepages-2Mi": "2Mi"}}),
            "spec.resources: hugepages need a cpu or memory request or limit too",
        ),
        (
            json!({"limits": {"hugepages-2Mi": "3Mi", "memory": "64Mi"}}),
            "spec.resources.limits[hugepages-2Mi]: must be a multiple of the page size 2Mi (2097152), got \"3Mi\"",
        ),
        (
            json!({"limits": {"hugepages-2Mi": "2097152.5", "memory": "64Mi"}}),
            "spec.resources.limits[hugepages-2Mi]: must be a multiple of the page size 2Mi (2097152), got \"2097152.5\"",
        ),
        (
            json!({"requests": {"hugepages-2Mi": "2Mi", "memory": "64Mi"}}),
            "spec.resources.requests[hugepages-2Mi]: needs an equal limit (hugepages-2Mi cannot be overcommitted), got \"2Mi\" and no limit",
        ),
        (
            json!({"requests": {"hugepages-2Mi": "2Mi", "memory": "64Mi"}, "limits": {"hugepages-2Mi": "4Mi"}}),
            "spec.resources.requests[hugepages-2Mi]: must equal the limit \"4Mi\" (hugepages-2Mi cannot be overcommitted), got \"2Mi\"",
        ),
        (
            json!({"limits": {"hugepages-foo": "2Mi", "memory": "64Mi"}}),
            "spec.resources.limits[hugepages-foo]: must be a multiple of the page size, but \"foo\" is not a page size (such as 2Mi or 1Gi), got \"2Mi\"",
        ),
        (
            json!({"limits": {"pods": "1"}}),
            "spec.resources.limits[pods]: must be cpu, memory, ephemeral-storage, hugepages-<size> or an extended resource name such as example.com/gpu, got \"pods\"",
        ),
        (
            json!({"limits": {"requests.example.com/gpu": "1"}}),
            "spec.resources.limits[requests.example.com/gpu]: an extended resource name must not start with \"requests.\"",
        ),
        (
            json!({"limits": {long_domain.clone(): "1"}}),
            "the domain of an extended resource name must be at most 244 characters",
        ),
        (
            json!({"limits": {"Example.com/gpu": "1"}}),
            "spec.resources.limits[Example.com/gpu]: must be a qualified name: an optional DNS subdomain prefix (lowercase) and '/', then a name of at most 63 characters",
        ),
        (json!({"limits": {"example.com/": "1"}}), "spec.resources.limits[example.com/]: must be a qualified name"),
        (json!({"limits": {"a/b/c": "1"}}), "spec.resources.limits[a/b/c]: must be a qualified name"),
        (
            json!({"limits": {"example.com/-gpu": "1"}}),
            "spec.resources.limits[example.com/-gpu]: must be a qualified name",
        ),
        (
            json!({"limits": {"memory": "8Ei"}}),
            "spec.resources.limits[memory]: must be at most 9223372036854775807 (8Ei would be capped by the API server), got \"8Ei\"",
        ),
        (
            json!({"requests": {"cpu": "10E"}}),
            "spec.resources.requests[cpu]: must be at most 9223372036854775807 (Kubernetes counts resources in 64-bit integers), got \"10E\"",
        ),
    ];
    for (resources, want) in bad {
        let response = validate(&request("CREATE", shell(json!({"resources": resources})), Value::Null), &policy);
        assert!(!response.allowed, "{resources} was allowed");
        assert!(response.message().contains(want), "{resources}:\n got {}\nwant {want}", response.message());
        assert_eq!(code(&response), 422);
    }
}

#[test]
fn several_problems_are_reported_together() {
    let policy = Policy::default();
    let spec = json!({"size": 99, "image": "UPPER", "command": [""], "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}});
    let response = validate(&request("CREATE", shell(spec), Value::Null), &policy);
    let fields: Vec<&str> = response.message().split("; ").map(|p| p.split(':').next().unwrap()).collect();
    assert_eq!(fields, ["spec.size", "spec.image", "spec.command[0]", "spec.resources.requests[cpu]"]);
}

#[test]
fn allowed_registries() {
    let policy = Policy { max_size: 50, allowed_registries: vec!["docker.io".into(), "ghcr.io/my-org".into()] };
    for (image, allowed) in [
        ("busybox:1.37.0", true),
        ("docker.io/library/busybox:1", true),
        ("ghcr.io/my-org/shell:1", true),
        ("ghcr.io/other/shell:1", false),
        ("quay.io/shell:1", false),
    ] {
        let response = validate(&request("CREATE", shell(json!({"image": image})), Value::Null), &policy);
        assert_eq!(response.allowed, allowed, "{image}: {}", response.message());
        if !allowed {
            assert!(response.message().contains("must come from an allowed registry (docker.io, ghcr.io/my-org)"));
        }
    }
}

#[test]
fn moving_tags_pass_with_a_warning() {
    for (image, warned) in [
        ("busybox:latest", true),
        ("busybox", true),
        ("busybox:1.37.0", false),
        ("busybox:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", false),
    ] {
        let response = validate(&request("CREATE", shell(json!({"image": image})), Value::Null), &Policy::default());
        assert!(response.allowed, "{image}");
        let w = response.warnings;
        assert_eq!(!w.is_empty(), warned, "{image}: {w:?}");
        if warned {
            assert!(w[0].starts_with("spec.image:") && w[0].contains("latest"), "{w:?}");
        }
    }
}

#[test]
fn updates_only_answer_for_what_changes() {
    let strict = Policy { max_size: 5, ..Policy::default() };
    let old = shell(json!({"size": 10, "image": "busybox:1"}));
    // Size was fine under an older policy; a label change still passes.
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    assert!(validate(&request("UPDATE", relabelled, old.clone()), &strict).allowed);
    // Changing the image to a valid one passes too; changing size to another bad one does not.
    assert!(
        validate(&request("UPDATE", shell(json!({"size": 10, "image": "busybox:2"})), old.clone()), &strict).allowed
    );
    let bigger = validate(&request("UPDATE", shell(json!({"size": 11, "image": "busybox:1"})), old), &strict);
    assert!(!bigger.allowed);
    assert!(bigger.message().contains("must be between 0 and 5, got 11"));
}

#[test]
fn removing_finalizers_from_a_deleting_object_is_always_allowed() {
    let strict = Policy { max_size: 1, ..Policy::default() };
    let mut old = shell(json!({"size": 10, "image": "BAD"}));
    old["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    old["metadata"]["finalizers"] = json!([names::FINALIZER, "other.io/x"]);
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!(["other.io/x"]);
    assert!(validate(&request("UPDATE", new.clone(), old.clone()), &strict).allowed);
    new["metadata"]["finalizers"] = json!([]);
    assert!(validate(&request("UPDATE", new, old), &strict).allowed);
}

#[test]
fn a_deleting_object_takes_any_metadata_change_but_its_spec_changes_are_validated() {
    let policy = Policy { max_size: 5, ..Policy::default() };
    let deleting = |spec: Value| {
        let mut object = shell(spec);
        object["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        object["metadata"]["finalizers"] = json!([names::FINALIZER]);
        object
    };
    let with_metadata = |object: &Value, f: &dyn Fn(&mut Value)| {
        let mut changed = object.clone();
        f(&mut changed["metadata"]);
        changed
    };
    let relabel = |m: &mut Value| m["labels"] = json!({"team": "a"});
    let release = |m: &mut Value| {
        m["labels"] = json!({"team": "a"});
        m["finalizers"] = json!([]);
    };
    // Spec unchanged: admitted whatever the spec, even one that no longer decodes, so that
    // nothing about a spec can hold up a deletion.
    for old in [deleting(json!({"size": 10, "image": "BAD"})), deleting(json!({"size": "three"}))] {
        for change in [&relabel as &dyn Fn(&mut Value), &release] {
            let response = validate(&request("UPDATE", with_metadata(&old, change), old.clone()), &policy);
            assert!(response.allowed, "{old}: {}", response.message());
        }
    }
    // Spec changed: held to the rules like any update (the changed fields only).
    let old = deleting(json!({"size": 1, "image": "busybox:1"}));
    for (spec, want) in [
        (json!({"size": 1000, "image": "busybox:1"}), "spec.size: must be between 0 and 5, got 1000"),
        (
            json!({"size": 1, "image": "EVIL IMAGE"}),
            "spec.image: must be a valid image reference (contains whitespace)",
        ),
    ] {
        let response = validate(&request("UPDATE", deleting(spec.clone()), old.clone()), &policy);
        assert!(!response.allowed && response.message().starts_with(want), "{spec}: {}", response.message());
    }
    let fine = validate(&request("UPDATE", deleting(json!({"size": 2, "image": "busybox:1"})), old), &policy);
    assert!(fine.allowed, "{}", fine.message());
}

#[test]
fn scale_subresource_is_checked_as_size() {
    let scale = |n: i64| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x", "namespace": "ns"}, "spec": {"replicas": n}, "status": {"replicas": 1}});
    let run = |n: i64| {
        let b = body("UPDATE", scale(n), scale(1), Some("scale"));
        let req = decode(&b).unwrap();
        let response = validate(&req, &Policy::default());
        (response.allowed, response.message().to_owned())
    };
    assert!(run(50).0);
    assert!(run(0).0);
    assert_eq!(run(500), (false, "spec.size: must be between 0 and 50, got 500".to_owned()));
    let (allowed, message) = run(i64::from(i32::MAX) + 1);
    assert!(!allowed && message.contains("spec.replicas must be a 32-bit integer, got 2147483648"), "{message}");
    // Not a number at all: named too.
    let b = body("UPDATE", json!({"spec": {"replicas": "x"}}), scale(1), Some("scale"));
    let response = validate(&decode(&b).unwrap(), &Policy::default());
    assert_eq!(
        response.message(),
        r#"spec does not decode: spec.replicas: must be a 32-bit integer (invalid type: string "x", expected a JSON number)"#
    );
    // The mutating webhook is not registered for scale; if called, it leaves it alone.
    let b = body("UPDATE", scale(500), scale(1), Some("scale"));
    assert_eq!(mutate(&decode(&b).unwrap()).patch, None);
}

#[test]
fn bad_input_gets_a_plain_reason() {
    let bad_request = |b: &[u8]| match review(Webhook::Validate, b, &Policy::default()) {
        Answer::BadRequest(reason) => reason,
        other => panic!("{other:?}"),
    };
    assert!(bad_request(b"{not json").starts_with("malformed JSON"));
    assert!(bad_request(b"").starts_with("malformed JSON"));
    assert!(
        bad_request(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}"#)
            .contains("expected apiVersion admission.k8s.io/v1 and kind AdmissionReview")
    );
    assert!(bad_request(br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}"#).contains("kind AdmissionReview"));
    assert_eq!(
        bad_request(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
        "the AdmissionReview has no request"
    );
    assert!(bad_request(br#"[1,2]"#).contains("expected apiVersion"));

    // The review is fine but the spec is not a MyOwnShell's: the validating webhook denies it
    // (code 400); the mutating one fills only what is unset and leaves the bad value for the
    // schema check that follows mutation.
    let undecodable = body("CREATE", shell(json!({"size": "three"})), Value::Null, None);
    match review(Webhook::Validate, &undecodable, &Policy::default()) {
        Answer::Review { response, outcome, .. } => {
            assert!(!response.allowed);
            assert_eq!(outcome, Outcome::Invalid);
            assert_eq!(response.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
            assert!(response.message().contains("spec does not decode"), "{}", response.message());
        }
        other => panic!("{other:?}"),
    }
    match review(Webhook::Mutate, &undecodable, &Policy::default()) {
        Answer::Review { response, outcome, .. } => {
            assert_eq!(outcome, Outcome::Patched);
            let patched = apply_patch(&shell(json!({"size": "three"})), &response);
            assert_eq!(patched["spec"]["size"], "three", "not touched");
            assert_eq!(patched["spec"]["image"], defaults::IMAGE);
        }
        other => panic!("{other:?}"),
    }
    for webhook in [Webhook::Mutate, Webhook::Validate] {
        // Broken request fields (operation unknown) with a uid: denied too.
        let mut v: Value = serde_json::from_slice(&body("CREATE", shell(json!({})), Value::Null, None)).unwrap();
        v["request"]["operation"] = json!("EXPLODE");
        match review(webhook, &serde_json::to_vec(&v).unwrap(), &Policy::default()) {
            Answer::Review { response, .. } => assert!(!response.allowed),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn review_answers_carry_uid_type_and_outcome() {
    let b = body("CREATE", shell(json!({})), Value::Null, None);
    let answer = review(Webhook::Mutate, &b, &Policy::default());
    let Answer::Review { response, operation, outcome } = answer else { panic!() };
    assert_eq!((operation, outcome), (Some(Operation::Create), Outcome::Patched));
    let json: Value = serde_json::from_slice(&response.to_review_json()).unwrap();
    assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(json["kind"], "AdmissionReview");
    assert_eq!(json["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(json["response"]["patchType"], "JSONPatch");
    assert!(json.get("request").is_none());
}

mod no_panics {
    use proptest::prelude::*;

    use super::*;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("size".to_owned()),
                        Just("image".to_owned()),
                        Just("command".to_owned()),
                        Just("resources".to_owned()),
                        Just("requests".to_owned()),
                        Just("limits".to_owned()),
                        Just("cpu".to_owned()),
                        "[a-z]{1,6}",
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            for webhook in [Webhook::Mutate, Webhook::Validate] {
                let _ = review(webhook, &bytes, &Policy::default());
            }
        }

        #[test]
        fn arbitrary_specs_never_panic_and_defaults_always_validate(spec in arb_json(), op in prop_oneof![Just("CREATE"), Just("UPDATE")], scale in any::<bool>()) {
            let sub = scale.then_some("scale");
            let object = if scale { json!({"spec": {"replicas": spec.clone()}}) } else { shell(spec.clone()) };
            let b = body(op, object.clone(), object.clone(), sub);
            for webhook in [Webhook::Mutate, Webhook::Validate] {
                let _ = review(webhook, &b, &Policy::default());
            }
            // Whatever the mutating webhook returns applies cleanly, and a spec that decoded
            // comes out complete.
            if let Ok(req) = decode(&b) {
                let response = mutate(&req);
                let patched = apply_patch(&object, &response);
                if response.allowed && !scale && req.object.as_ref().unwrap().spec().is_ok() {
                    for field in ["size", "image", "command", "resources"] {
                        prop_assert!(!patched["spec"][field].is_null(), "{} missing after {:?}", field, spec);
                    }
                }
            }
        }

        #[test]
        fn arbitrary_image_strings_never_panic(s in "\\PC{0,80}") {
            let _ = crate::image::parse(&s);
            let _ = myownshell_api::quantity::parse(&s);
        }
    }

    #[test]
    fn the_defaults_themselves_validate() {
        let req = request("CREATE", shell(json!({})), Value::Null);
        let patched = apply_patch(&shell(json!({})), &mutate(&req));
        let response = validate(&request("CREATE", patched, Value::Null), &Policy::default());
        assert!(response.allowed, "{}", response.message());
        assert!(response.warnings.is_empty(), "the default image is pinned");
    }
}

#[test]
fn answers_read_back_as_kubes_admission_review() {
    // kube's own AdmissionReview type is the reference for the wire format.
    type KubeReview = kube::core::admission::AdmissionReview<kube::core::DynamicObject>;
    let read = |response: &Response<'_>| -> kube::core::admission::AdmissionResponse {
        let review: KubeReview = serde_json::from_slice(&response.to_review_json()).unwrap();
        assert_eq!(
            (review.types.api_version.as_str(), review.types.kind.as_str()),
            ("admission.k8s.io/v1", "AdmissionReview")
        );
        review.response.unwrap()
    };

    // kube writes `patch` as base64 but reads it back as a byte array, so the patched answer
    // is checked as JSON.
    let patched = mutate(&request("CREATE", shell(json!({})), Value::Null));
    let wire: Value = serde_json::from_slice(&patched.to_review_json()).unwrap();
    assert_eq!(wire["response"]["allowed"], true);
    assert_eq!(wire["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(wire["response"]["patchType"], "JSONPatch");
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD.decode(wire["response"]["patch"].as_str().unwrap()).unwrap();
    assert_eq!(patch, patched.patch.unwrap().json, "base64 of the JSON Patch");

    let denied = validate(&request("CREATE", shell(json!({"size": 500})), Value::Null), &Policy::default());
    let theirs = read(&denied);
    assert!(!theirs.allowed);
    assert_eq!((theirs.result.code, theirs.result.reason.as_str()), (422, "Invalid"));
    assert_eq!(theirs.result.message, "spec.size: must be between 0 and 50, got 500");
    assert!(theirs.patch.is_none());

    // (kube's type wants a `status` in every answer; the apiserver does not, so allowed answers
    // leave it out and are checked as JSON.)
    let warned = validate(&request("CREATE", shell(json!({"image": "busybox"})), Value::Null), &Policy::default());
    let wire: Value = serde_json::from_slice(&warned.to_review_json()).unwrap();
    assert_eq!(wire["response"]["warnings"], json!(warned.warnings));
    assert!(!warned.warnings.is_empty());

    // A uid with characters JSON must escape survives the trip.
    let odd = Response::deny("a\"b\\c\u{1}".into(), 400, "BadRequest", "x".into());
    assert_eq!(read(&odd).uid, "a\"b\\c\u{1}");
}

#[test]
fn every_field_of_the_crd_is_defaulted_read_and_explained() {
    let crd = myownshell_api::crd::definition();
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let properties = schema["openAPIV3Schema"]["properties"]["spec"]["properties"].as_object().unwrap();
    let mut in_crd: Vec<&str> = properties.keys().map(String::as_str).collect();
    in_crd.sort_unstable();

    // Mutating an empty spec fills exactly the fields of the CRD.
    let patched = apply_patch(&shell(json!({})), &mutate(&request("CREATE", shell(json!({})), Value::Null)));
    let mut defaulted: Vec<&str> = patched["spec"].as_object().unwrap().keys().map(String::as_str).collect();
    defaulted.sort_unstable();
    assert_eq!(defaulted, in_crd, "a field added to MyOwnShellSpec must get a default from admission too");

    // A value of the wrong type in any of them is named, with what the field must be.
    for field in &in_crd {
        let response = validate(&request("CREATE", shell(json!({*field: true})), Value::Null), &Policy::default());
        let want = format!("spec does not decode: spec.{field}: must be ");
        assert!(response.message().starts_with(&want), "{field}: {}", response.message());
    }

    // And a full spec of the api crate is read with every value.
    let full = myownshell_api::MyOwnShellSpec {
        size: Some(3),
        image: Some("busybox:1".into()),
        command: Some(vec!["sh".into()]),
        resources: Some(defaults::resources()),
    };
    let read = request("CREATE", shell(serde_json::to_value(&full).unwrap()), Value::Null);
    assert_eq!(read.object.unwrap().spec().unwrap(), Some(full));
}

#[test]
fn a_spec_that_does_not_decode_is_denied_naming_the_field_and_let_through_by_mutation() {
    let cases = [
        (
            json!({"size": "three"}),
            r#"spec.size: must be a 32-bit integer (invalid type: string "three", expected i32)"#,
        ),
        (
            json!({"size": 3_000_000_000u64}),
            "spec.size: must be a 32-bit integer (invalid value: integer `3000000000`, expected i32)",
        ),
        (json!({"image": 1}), "spec.image: must be a string (invalid type: integer `1`, expected a string)"),
        (
            json!({"command": "sh -c true"}),
            r#"spec.command: must be a list of strings (invalid type: string "sh -c true", expected a sequence)"#,
        ),
        (
            json!({"command": ["sh", 1]}),
            "spec.command[1]: must be a string (invalid type: integer `1`, expected a string)",
        ),
        (
            json!({"resources": "small"}),
            r#"spec.resources: must be an object with requests and limits (invalid type: string "small", expected struct ShellResources)"#,
        ),
        (
            json!({"resources": {"limits": ["cpu"]}}),
            "spec.resources.limits: must be a map of resource names to quantities (invalid type: sequence, expected a map)",
        ),
        (
            json!({"resources": {"requests": {"cpu": true}}}),
            r#"spec.resources.requests[cpu]: must be a quantity such as "250m" or 1 (invalid type: boolean `true`, expected Quantity)"#,
        ),
    ];
    for (spec, want) in cases {
        let req = request("CREATE", shell(spec.clone()), Value::Null);
        let denied = validate(&req, &Policy::default());
        assert!(!denied.allowed, "{spec}");
        assert_eq!(code(&denied), 400, "{spec}");
        assert_eq!(denied.message(), format!("spec does not decode: {want}"), "{spec}");
        // The mutating webhook reads only which fields are set: the bad value goes on, untouched,
        // to the schema check that names it too.
        let mutated = mutate(&req);
        assert!(mutated.allowed, "{spec}: {}", mutated.message());
        let patched = apply_patch(&shell(spec.clone()), &mutated);
        for (field, value) in spec.as_object().unwrap() {
            assert_eq!(&patched["spec"][field], value, "{spec}");
        }
    }
}

#[test]
fn every_default_patch_is_built_once_and_applies() {
    use defaulting::{FinalizerChange, Needs, operations, patch_for};
    let finalizers = [FinalizerChange::None, FinalizerChange::CreateList, FinalizerChange::Append];
    for bits in 0u8..16 {
        for spec_missing in [false, true] {
            for finalizer in finalizers {
                let bit = |n: u8| spec_missing || bits & (1 << n) != 0;
                let needs = Needs {
                    spec: spec_missing,
                    size: bit(0),
                    image: bit(1),
                    command: bit(2),
                    resources: bit(3),
                    finalizer,
                };
                let Some(patch) = patch_for(&needs) else {
                    assert!(needs.nothing(), "{needs:?}");
                    continue;
                };
                assert!(std::ptr::eq(patch, patch_for(&needs).unwrap()), "cached, not rebuilt: {needs:?}");
                let ops: json_patch::Patch = serde_json::from_slice(&patch.json).unwrap();
                assert_eq!(ops.0, operations(&needs), "{needs:?}");
                use base64::Engine;
                let base64: String = serde_json::from_str(patch.base64_json.get()).unwrap();
                assert_eq!(base64::engine::general_purpose::STANDARD.decode(base64).unwrap(), patch.json);
                // It applies to an object lacking exactly that.
                let mut object = json!({"metadata": {}});
                if !spec_missing {
                    let mut spec = full_spec();
                    for (n, field) in ["size", "image", "command", "resources"].into_iter().enumerate() {
                        if bits & (1 << n) != 0 {
                            spec.as_object_mut().unwrap().remove(field);
                        }
                    }
                    object["spec"] = spec;
                }
                match finalizer {
                    FinalizerChange::None | FinalizerChange::CreateList => {}
                    FinalizerChange::Append => object["metadata"]["finalizers"] = json!(["other.io/x"]),
                }
                json_patch::patch(&mut object, &ops).unwrap_or_else(|e| panic!("{needs:?}: {e}"));
            }
        }
    }
}

#[test]
fn what_an_object_needs() {
    use defaulting::{FinalizerChange, Needs};
    let needs = |object: Value| {
        let object = request("CREATE", object, Value::Null).object.unwrap();
        let spec = object.spec_fields().unwrap();
        Needs::of(&object, spec.as_ref())
    };
    let all = Needs {
        spec: true,
        size: true,
        image: true,
        command: true,
        resources: true,
        finalizer: FinalizerChange::CreateList,
    };
    let complete = Needs { spec: false, size: false, image: false, command: false, resources: false, ..all };
    let cases = [
        ("no spec", json!({"metadata": {}}), all),
        ("null spec", json!({"metadata": {}, "spec": null}), all),
        ("null metadata", json!({"metadata": null, "spec": null}), all),
        ("empty spec", shell(json!({})), Needs { spec: false, ..all }),
        (
            "image and null size",
            shell(json!({"image": "x:1", "size": null})),
            Needs { spec: false, image: false, ..all },
        ),
        (
            "full spec, other finalizer",
            json!({"metadata": {"finalizers": ["a/b"]}, "spec": full_spec()}),
            Needs { finalizer: FinalizerChange::Append, ..complete },
        ),
        (
            "being deleted",
            json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}, "spec": full_spec()}),
            Needs { finalizer: FinalizerChange::None, ..complete },
        ),
    ];
    for (what, object, want) in cases {
        assert_eq!(needs(object), want, "{what}");
    }
}

#[test]
fn quantities_may_be_numbers_as_the_schema_allows() {
    let policy = Policy::default();
    let ok = validate(
        &request(
            "CREATE",
            shell(json!({"resources": {"requests": {"cpu": 0.5}, "limits": {"cpu": 1, "memory": "64Mi"}}})),
            Value::Null,
        ),
        &policy,
    );
    assert!(ok.allowed, "{}", ok.message());
    let bad = validate(
        &request("CREATE", shell(json!({"resources": {"requests": {"cpu": 2}, "limits": {"cpu": 1}}})), Value::Null),
        &policy,
    );
    assert_eq!(bad.message(), "spec.resources.requests[cpu]: must be less than or equal to the limit \"1\", got \"2\"");
    // Not a quantity at all: named with its type.
    let wrong =
        validate(&request("CREATE", shell(json!({"resources": {"limits": {"cpu": true}}})), Value::Null), &policy);
    assert_eq!(code(&wrong), 400);
    assert!(
        wrong.message().contains("spec does not decode") && wrong.message().contains("quantity"),
        "{}",
        wrong.message()
    );
}

#[test]
fn a_spec_that_is_not_an_object_is_refused_by_both_webhooks() {
    for (spec, kind) in
        [(json!([]), "an array"), (json!("x"), "a string"), (json!(3), "a number"), (json!(true), "a boolean")]
    {
        let req = request("CREATE", shell(spec.clone()), Value::Null);
        for response in [mutate(&req), validate(&req, &Policy::default())] {
            assert!(!response.allowed, "{spec}");
            assert_eq!(code(&response), 400);
            assert_eq!(response.message(), format!("spec does not decode: expected an object, got {kind}"));
        }
    }
}

#[test]
fn strings_with_escapes_decode_like_plain_ones() {
    // serde borrows plain strings from the body and copies escaped ones; both must behave.
    let escaped = br#"{"apiVersion":"admission.k8s.io\/v1","kind":"AdmissionReview","request":{"uid":"u\u0031","kind":{"group":"myownshell.io","version":"v1alpha1","kind":"MyOwnShell"},"operation":"CREATE","object":{"metadata":{"finalizers":["myownshell.io\/finalizer"]},"spec":{"size":60,"image":"busybox:1\u002e2","resources":{"limits":{"cpu":"1\u0030"}}}}}}"#;
    let req = decode(escaped).unwrap();
    assert_eq!(req.uid, "u1");
    let response = validate(&req, &Policy::default());
    assert_eq!(response.message(), "spec.size: must be between 0 and 50, got 60");
    let spec = req.object.as_ref().unwrap().spec().unwrap().unwrap();
    assert_eq!(spec.image.as_deref(), Some("busybox:1.2"));
    assert_eq!(spec.resources.unwrap().limits.unwrap().get("cpu").unwrap().0, "10");
    // The finalizer is recognised through its escape: only the missing command is added.
    let patched = mutate(&req);
    let ops: Value = serde_json::from_slice(&patched.patch.unwrap().json).unwrap();
    let paths: Vec<&str> = ops.as_array().unwrap().iter().map(|op| op["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/spec/command"]);
}

#[test]
fn resource_lists_are_sorted_and_a_repeated_name_keeps_its_last_value() {
    let read = |text: &str| spec::shell_spec(&format!(r#"{{"resources": {{"limits": {text}}}}}"#));
    let spec = read(r#"{"memory": "1Mi", "cpu": "1", "ephemeral-storage": 5, "cpu": "3"}"#).unwrap();
    let list = spec.resources.unwrap().limits.unwrap();
    let entries: Vec<(&str, &str)> = list.iter().map(|(n, q)| (n.as_str(), q.0.as_str())).collect();
    assert_eq!(entries, [("cpu", "3"), ("ephemeral-storage", "5"), ("memory", "1Mi")]);
    // Equal lists in another order compare equal (update ratcheting compares them).
    let other = read(r#"{"ephemeral-storage": "5", "cpu": "3", "memory": "1Mi"}"#).unwrap();
    assert_eq!(other.resources.unwrap().limits.unwrap(), list);
    assert!(read(r#"["cpu"]"#).is_err());
}
