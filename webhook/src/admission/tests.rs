//! Table tests of the admission functions, on AdmissionReview JSON shaped like the apiserver's.

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

fn request(operation: &str, object: Value, old: Value) -> Request {
    decode(&body(operation, object, old, None)).unwrap()
}

fn apply_patch(object: &Value, response: &AdmissionResponse) -> Value {
    let mut doc = object.clone();
    if let Some(patch) = &response.patch {
        let patch: Patch = serde_json::from_slice(patch).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
    }
    doc
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
    let ops: Value = serde_json::from_slice(response.patch.as_ref().unwrap()).unwrap();
    let paths: Vec<&str> = ops.as_array().unwrap().iter().map(|o| o["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/spec/command", "/spec/resources", "/metadata/finalizers"]);
    assert!(ops.as_array().unwrap().iter().all(|o| o["op"] == "add"));

    // No spec: the parent is created first.
    let response = mutate(&request("CREATE", json!({"metadata": {"name": "x"}}), Value::Null));
    let ops: Value = serde_json::from_slice(response.patch.as_ref().unwrap()).unwrap();
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
        json!({"resources": {"limits": {"example.com/dongle": "1", "hugepages-2Mi": "4Mi"}}}),
    ];
    for spec in ok {
        let response = validate(&request("CREATE", shell(spec.clone()), Value::Null), &policy);
        assert!(response.allowed, "{spec}: {}", response.result.message);
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
            "spec.resources.requests.cpu: must be less than or equal to the limit \"1\", got \"2\"",
        ),
        (
            json!({"resources": {"requests": {"memory": "65Mi"}, "limits": {"memory": "64Mi"}}}),
            "spec.resources.requests.memory: must be less than or equal to the limit \"64Mi\", got \"65Mi\"",
        ),
        (
            json!({"resources": {"limits": {"cpu": "lots"}}}),
            "spec.resources.limits.cpu: must be a valid quantity such as 250m or 64Mi (not a number), got \"lots\"",
        ),
        (
            json!({"resources": {"limits": {"memory": "-1"}}}),
            "spec.resources.limits.memory: must not be negative, got \"-1\"",
        ),
        (json!({"resources": {"limits": {"cpus": "1"}}}), "spec.resources.limits.cpus: must be cpu, memory"),
    ];
    for (spec, want) in bad {
        let response = validate(&request("CREATE", shell(spec.clone()), Value::Null), &policy);
        assert!(!response.allowed, "{spec} was allowed");
        assert!(response.result.message.starts_with(want), "{spec}: {}", response.result.message);
        assert_eq!(response.result.code, 422);
    }
}

#[test]
fn several_problems_are_reported_together() {
    let policy = Policy::default();
    let spec = json!({"size": 99, "image": "UPPER", "command": [""], "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}});
    let response = validate(&request("CREATE", shell(spec), Value::Null), &policy);
    let fields: Vec<&str> = response.result.message.split("; ").map(|p| p.split(':').next().unwrap()).collect();
    assert_eq!(fields, ["spec.size", "spec.image", "spec.command[0]", "spec.resources.requests.cpu"]);
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
        assert_eq!(response.allowed, allowed, "{image}: {}", response.result.message);
        if !allowed {
            assert!(response.result.message.contains("must come from an allowed registry (docker.io, ghcr.io/my-org)"));
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
        let w = response.warnings.unwrap_or_default();
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
    assert!(bigger.result.message.contains("must be between 0 and 5, got 11"));
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
fn scale_subresource_is_checked_as_size() {
    let scale = |n: i64| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x", "namespace": "ns"}, "spec": {"replicas": n}, "status": {"replicas": 1}});
    let run = |n: i64| {
        let req = decode(&body("UPDATE", scale(n), scale(1), Some("scale"))).unwrap();
        validate(&req, &Policy::default())
    };
    assert!(run(50).allowed);
    assert!(run(0).allowed);
    let denied = run(500);
    assert!(!denied.allowed);
    assert_eq!(denied.result.message, "spec.size: must be between 0 and 50, got 500");
    assert!(!run(i64::from(i32::MAX) + 1).allowed);
    // The mutating webhook is not registered for scale; if called, it leaves it alone.
    let req = decode(&body("UPDATE", scale(500), scale(1), Some("scale"))).unwrap();
    assert_eq!(mutate(&req).patch, None);
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

    // The review is fine but the object is not a MyOwnShell: a denial, not a 400.
    for webhook in [Webhook::Mutate, Webhook::Validate] {
        let undecodable = body("CREATE", shell(json!({"size": "three"})), Value::Null, None);
        match review(webhook, &undecodable, &Policy::default()) {
            Answer::Review { review, outcome, .. } => {
                let response = review.response.unwrap();
                assert!(!response.allowed);
                assert_eq!(outcome, Outcome::Invalid);
                assert_eq!(response.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
                assert!(response.result.message.contains("spec does not decode"), "{}", response.result.message);
            }
            other => panic!("{other:?}"),
        }
        // Broken request fields (operation unknown) with a uid: denied too.
        let mut v: Value = serde_json::from_slice(&body("CREATE", shell(json!({})), Value::Null, None)).unwrap();
        v["request"]["operation"] = json!("EXPLODE");
        match review(webhook, &serde_json::to_vec(&v).unwrap(), &Policy::default()) {
            Answer::Review { review, .. } => assert!(!review.response.unwrap().allowed),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn review_answers_carry_uid_type_and_outcome() {
    let answer = review(Webhook::Mutate, &body("CREATE", shell(json!({})), Value::Null, None), &Policy::default());
    let Answer::Review { review, operation, outcome } = answer else { panic!() };
    assert_eq!((operation, outcome), ("CREATE", Outcome::Patched));
    let json = serde_json::to_value(&*review).unwrap();
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
                if response.allowed && !scale && spec_of(req.object.as_ref().unwrap()).is_ok() {
                    for field in ["size", "image", "command", "resources"] {
                        prop_assert!(!patched["spec"][field].is_null(), "{} missing after {:?}", field, spec);
                    }
                }
            }
        }

        #[test]
        fn arbitrary_image_strings_never_panic(s in "\\PC{0,80}") {
            let _ = crate::image::parse(&s);
            let _ = crate::quantity::parse(&s);
        }
    }

    #[test]
    fn the_defaults_themselves_validate() {
        let req = request("CREATE", shell(json!({})), Value::Null);
        let patched = apply_patch(&shell(json!({})), &mutate(&req));
        let response = validate(&request("CREATE", patched, Value::Null), &Policy::default());
        assert!(response.allowed, "{}", response.result.message);
        assert_eq!(response.warnings, None, "the default image is pinned");
    }
}
