//! Reading a review's spec ([`crate::review::spec`]): every CRD field, and specs that do not decode.

use myownshell_api::defaults;
use serde_json::{Value, json};

use super::*;

#[test]
fn every_field_of_the_crd_is_defaulted_read_and_explained() {
    let crd = myownshell_api::crd::definition();
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let properties = schema["openAPIV3Schema"]["properties"]["spec"]["properties"].as_object().unwrap();
    let mut in_crd: Vec<&str> = properties.keys().map(String::as_str).collect();
    in_crd.sort_unstable();
    // The mutating webhook tells which of them a spec sets.
    assert_eq!(crate::review::spec::FIELDS, in_crd.as_slice(), "review::spec::FIELDS are the CRD's spec fields");

    // Mutating an empty spec fills exactly the fields of the CRD, but those left unset on purpose:
    // a shell is shared with nobody, the uid comes only from an authenticator that gives one, a
    // shell has no lifetime unless the operator's flags give one, runs unless asked to stop, and
    // has no home unless it asks for one (the home's own fields are defaulted then), and its
    // gateway sessions are not recorded unless it asks, and it has no class where the cluster has
    // no default class.
    let patched =
        apply_patch(&shell(json!({})), &mutate(&request("CREATE", shell(json!({})), Value::Null), &Policy::default()));
    let mut defaulted: Vec<&str> = patched["spec"].as_object().unwrap().keys().map(String::as_str).collect();
    defaulted.extend([
        "ownerUID",
        "sharedWith",
        "lifetime",
        "stopped",
        "updateRequestedAt",
        "home",
        "recordSessions",
        "className",
        "approvals",
    ]);
    defaulted.sort_unstable();
    assert_eq!(defaulted, in_crd, "a field added to MyOwnShellSpec must get a default from admission too");

    // A value of the wrong type in any of them is named, with what the field must be.
    for field in &in_crd {
        // A boolean is the wrong type for every field but the booleans.
        let wrong = if ["stopped", "recordSessions"].contains(field) { json!("yes") } else { json!(true) };
        let response =
            validate(&request("CREATE", shell(json!({*field: wrong})), Value::Null), &Policy::default(), no_shells());
        let want = format!("spec does not decode: spec.{field}: must be ");
        assert!(response.message().starts_with(&want), "{field}: {}", response.message());
    }

    // And a full spec of the api crate is read with every value.
    let full = myownshell_api::MyOwnShellSpec {
        class_name: Some("small".into()),
        size: Some(3),
        image: Some("busybox:1".into()),
        command: Some(vec!["sh".into()]),
        resources: Some(defaults::resources()),
        owner: Some("alice".into()),
        owner_uid: Some("u-1".into()),
        shared_with: Some(myownshell_api::SharedWith {
            users: Some(vec!["bob".into()]),
            groups: Some(vec!["devs".into()]),
        }),
        lifetime: Some(myownshell_api::Lifetime {
            idle_timeout: Some("30m".into()),
            max_run_time: Some("8h".into()),
            warn_before: Some("5m".into()),
            delete_paused_after: Some("168h".into()),
            extended_until: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
            )),
            restarted_at: None,
        }),
        stopped: Some(false),
        update_requested_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        )),
        home: Some(myownshell_api::Home {
            size: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2Gi".into())),
            storage_class_name: Some("local-path".into()),
            on_delete: Some(myownshell_api::HomeOnDelete::Retain),
        }),
        record_sessions: Some(true),
        approvals: Some(vec![myownshell_api::Approval {
            by: Some("bob".into()),
            via: Some("user".into()),
            at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap(),
            )),
            decision: myownshell_api::Decision::Approve,
            reason: Some("on call".into()),
        }]),
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
        let denied = validate(&req, &Policy::default(), no_shells());
        assert!(!denied.allowed, "{spec}");
        assert_eq!(code(&denied), 400, "{spec}");
        assert_eq!(denied.message(), format!("spec does not decode: {want}"), "{spec}");
        // The mutating webhook reads only which fields are set: the bad value goes on, untouched,
        // to the schema check that names it too.
        let mutated = mutate(&req, &Policy::default());
        assert!(mutated.allowed, "{spec}: {}", mutated.message());
        let patched = apply_patch(&shell(spec.clone()), &mutated);
        for (field, value) in spec.as_object().unwrap() {
            assert_eq!(&patched["spec"][field], value, "{spec}");
        }
    }
}

#[test]
fn a_spec_that_is_not_an_object_is_refused_by_both_webhooks() {
    for (spec, kind) in
        [(json!([]), "an array"), (json!("x"), "a string"), (json!(3), "a number"), (json!(true), "a boolean")]
    {
        let req = request("CREATE", shell(spec.clone()), Value::Null);
        for response in [mutate(&req, &Policy::default()), validate(&req, &Policy::default(), no_shells())] {
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
    let response = validate(&req, &Policy::default(), no_shells());
    assert_eq!(response.message(), "spec.size: must be between 0 and 50, got 60");
    let spec = req.object.as_ref().unwrap().spec().unwrap().unwrap();
    assert_eq!(spec.image.as_deref(), Some("busybox:1.2"));
    assert_eq!(spec.resources.unwrap().limits.unwrap().get("cpu").unwrap().0, "10");
    // The finalizer is recognised through its escape: only the missing command is added.
    let patched = mutate(&req, &Policy::default());
    let ops: Value = serde_json::from_slice(&patched.patch.unwrap().json).unwrap();
    let paths: Vec<&str> = ops.as_array().unwrap().iter().map(|op| op["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/spec/command"]);
}

#[test]
fn which_fields_a_spec_sets() {
    let set = |spec: Value| {
        let object = request("CREATE", shell(spec), Value::Null).object.unwrap();
        let fields = object.spec_fields().unwrap().unwrap();
        crate::review::spec::FIELDS.iter().copied().filter(|f| fields.contains(f)).collect::<Vec<_>>()
    };
    assert_eq!(set(json!({})), Vec::<&str>::new());
    assert_eq!(
        set(json!({"size": 1, "image": null, "resources": {"limits": {"cpu": [1, {"a": 2}]}}})),
        ["resources", "size"]
    );
    // The last of a repeated key wins.
    let object = |spec: &str| {
        let text = String::from_utf8(body("CREATE", shell(json!("SPEC")), Value::Null, None)).unwrap();
        Box::leak(text.replace("\"SPEC\"", spec).into_boxed_str()).as_bytes()
    };
    let fields = |spec: &str| decode(object(spec)).unwrap().object.unwrap().spec_fields().unwrap().unwrap();
    assert!(!fields(r#"{"size": 1, "size": null}"#).contains("size"));
    assert!(fields(r#"{"size": null, "size": 1}"#).contains("size"));
    assert!(!fields(r#"{"unknown": 1}"#).contains("unknown"), "only the spec's own fields are told");
    // Names with escapes are read as the apiserver reads them.
    let escaped = fields(r#"{"\u0069mage": "x", "owner\u0055ID": "u"}"#);
    assert!(escaped.contains("image") && escaped.contains("ownerUID") && !escaped.contains("size"));
    // A spec that is not an object is no set of fields.
    assert!(decode(object("[1]")).unwrap().object.unwrap().spec_fields().is_err());
}
