//! Whole reviews ([`crate::dispatch::review`], [`crate::review::request`], [`crate::review::response`]): bad input, the answer's shape, no panics on any JSON.

use myownshell_api::defaults;
use serde_json::{Value, json};

use super::*;

#[test]
fn bad_input_gets_a_plain_reason() {
    let bad_request = |b: &[u8]| match review(Webhook::Validate, b, &Policy::default(), no_shells()) {
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
    match review(Webhook::Validate, &undecodable, &Policy::default(), no_shells()) {
        Answer::Review { response, outcome, .. } => {
            assert!(!response.allowed);
            assert_eq!(outcome, Outcome::Invalid);
            assert_eq!(response.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
            assert!(response.message().contains("spec does not decode"), "{}", response.message());
        }
        other => panic!("{other:?}"),
    }
    match review(Webhook::Mutate, &undecodable, &Policy::default(), no_shells()) {
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
        match review(webhook, &serde_json::to_vec(&v).unwrap(), &Policy::default(), no_shells()) {
            Answer::Review { response, .. } => assert!(!response.allowed),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn review_answers_carry_uid_type_and_outcome() {
    let b = body("CREATE", shell(json!({})), Value::Null, None);
    let answer = review(Webhook::Mutate, &b, &Policy::default(), no_shells());
    let Answer::Review { response, operation, outcome, .. } = answer else { panic!() };
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
                let _ = review(webhook, &bytes, &Policy::default(), no_shells());
            }
        }

        #[test]
        fn arbitrary_specs_never_panic_and_defaults_always_validate(spec in arb_json(), op in prop_oneof![Just("CREATE"), Just("UPDATE")], scale in any::<bool>()) {
            let sub = scale.then_some("scale");
            let object = if scale { json!({"spec": {"replicas": spec.clone()}}) } else { shell(spec.clone()) };
            let b = body(op, object.clone(), object.clone(), sub);
            for webhook in [Webhook::Mutate, Webhook::Validate] {
                let _ = review(webhook, &b, &Policy::default(), no_shells());
            }
            // Whatever the mutating webhook returns applies cleanly, and a spec that decoded
            // comes out complete.
            if let Ok(req) = decode(&b) {
                let response = mutate(&req, &Policy::default());
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
            let _ = crate::admission::image::parse(&s);
            let _ = myownshell_api::quantity::parse(&s);
        }
    }

    #[test]
    fn the_defaults_themselves_validate() {
        let req = request("CREATE", shell(json!({})), Value::Null);
        let patched = apply_patch(&shell(json!({})), &mutate(&req, &Policy::default()));
        let response = validate(&request("CREATE", patched, Value::Null), &Policy::default(), no_shells());
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
    let patched = mutate(&request("CREATE", shell(json!({})), Value::Null), &Policy::default());
    let wire: Value = serde_json::from_slice(&patched.to_review_json()).unwrap();
    assert_eq!(wire["response"]["allowed"], true);
    assert_eq!(wire["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(wire["response"]["patchType"], "JSONPatch");
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD.decode(wire["response"]["patch"].as_str().unwrap()).unwrap();
    assert_eq!(patch, patched.patch.unwrap().json, "base64 of the JSON Patch");

    let denied =
        validate(&request("CREATE", shell(json!({"size": 500})), Value::Null), &Policy::default(), no_shells());
    let theirs = read(&denied);
    assert!(!theirs.allowed);
    assert_eq!((theirs.result.code, theirs.result.reason.as_str()), (422, "Invalid"));
    assert_eq!(theirs.result.message, "spec.size: must be between 0 and 50, got 500");
    assert!(theirs.patch.is_none());

    // (kube's type wants a `status` in every answer; the apiserver does not, so allowed answers
    // leave it out and are checked as JSON.)
    let warned =
        validate(&request("CREATE", shell(json!({"image": "busybox"})), Value::Null), &Policy::default(), no_shells());
    let wire: Value = serde_json::from_slice(&warned.to_review_json()).unwrap();
    assert_eq!(wire["response"]["warnings"], json!(warned.warnings));
    assert!(!warned.warnings.is_empty());

    // A uid with characters JSON must escape survives the trip.
    let odd = Response::deny("a\"b\\c\u{1}".into(), 400, "BadRequest", "x".into());
    assert_eq!(read(&odd).uid, "a\"b\\c\u{1}");
}

#[test]
fn lists_of_strings_are_borrowed_from_the_body_unless_escaped() {
    use std::borrow::Cow;
    let mut object = shell(json!({}));
    object["metadata"]["finalizers"] = json!(["myownshell.io/finalizer", "a\"quoted\""]);
    let mut v: Value = serde_json::from_slice(&body("CREATE", object, Value::Null, None)).unwrap();
    v["request"]["userInfo"]["groups"] = json!(["system:masters", "team \"a\""]);
    let bytes = serde_json::to_vec(&v).unwrap();
    let request = decode(&bytes).unwrap();
    let groups = &request.user_info.groups;
    assert_eq!(groups, &["system:masters", "team \"a\""]);
    assert!(matches!(groups[0], Cow::Borrowed(_)) && matches!(groups[1], Cow::Owned(_)));
    let finalizers = request.object.as_ref().and_then(|o| o.finalizers()).unwrap();
    assert_eq!(finalizers, &["myownshell.io/finalizer", "a\"quoted\""]);
    assert!(matches!(finalizers[0], Cow::Borrowed(_)) && matches!(finalizers[1], Cow::Owned(_)));
    // Absent and null lists are none; a list of something else does not decode.
    for finalizers in [None, Some(Value::Null)] {
        let mut object = shell(json!({}));
        if let Some(f) = finalizers {
            object["metadata"]["finalizers"] = f;
        }
        let bytes = body("CREATE", object, Value::Null, None);
        assert_eq!(decode(&bytes).unwrap().object.unwrap().finalizers(), None);
    }
    let mut object = shell(json!({}));
    object["metadata"]["finalizers"] = json!([1]);
    assert!(decode(&body("CREATE", object, Value::Null, None)).is_err());
}
