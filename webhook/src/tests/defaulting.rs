//! The mutating webhook ([`crate::admission::defaulting`]): defaults, the finalizer and the owner as
//! a JSON Patch.

use myownshell_api::{defaults, names};
use serde_json::{Value, json};

use super::*;

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
        let response = mutate(&request("CREATE", object.clone(), Value::Null), &Policy::default());
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
        assert_eq!(spec["owner"], json!("admin"), "{what}: the requester owns it");
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
    let response =
        mutate(&request("CREATE", shell(json!({"size": 2, "image": "busybox:1"})), Value::Null), &Policy::default());
    let ops: Value = serde_json::from_slice(&response.patch.unwrap().json).unwrap();
    let paths: Vec<&str> = ops.as_array().unwrap().iter().map(|o| o["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/spec/command", "/spec/resources", "/metadata/finalizers", "/spec/owner"]);
    assert!(ops.as_array().unwrap().iter().all(|o| o["op"] == "add"));

    // No spec: the parent is created first.
    let response = mutate(&request("CREATE", json!({"metadata": {"name": "x"}}), Value::Null), &Policy::default());
    let ops: Value = serde_json::from_slice(&response.patch.unwrap().json).unwrap();
    assert_eq!(ops[0], json!({"op": "add", "path": "/spec", "value": {}}));
}

/// An AdmissionReview body of `operation` by `user` (with `uid`, if any).
fn by(user: &str, uid: Option<&str>, operation: &str, object: Value, old: Value) -> Request<'static> {
    let mut review: Value = serde_json::from_slice(&body(operation, object, old, None)).unwrap();
    review["request"]["userInfo"] = json!({"username": user, "groups": ["system:authenticated"]});
    if let Some(uid) = uid {
        review["request"]["userInfo"]["uid"] = json!(uid);
    }
    decode(Box::leak(serde_json::to_vec(&review).unwrap().into_boxed_slice())).unwrap()
}

#[test]
fn the_owner_is_the_requester() {
    let spec_with = |extra: Value| {
        let mut spec = full_spec();
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        shell(spec)
    };
    let owned = |owner: &str, uid: Option<&str>| match uid {
        Some(uid) => spec_with(json!({"owner": owner, "ownerUID": uid})),
        None => spec_with(json!({"owner": owner})),
    };
    // (what, the request, spec.owner and spec.ownerUID after mutation)
    type Case = (&'static str, Request<'static>, Option<&'static str>, Option<&'static str>);
    let cases: Vec<Case> = vec![
        ("create", by("alice", None, "CREATE", shell(full_spec()), Value::Null), Some("alice"), None),
        (
            "create with a uid",
            by("alice", Some("u-1"), "CREATE", shell(full_spec()), Value::Null),
            Some("alice"),
            Some("u-1"),
        ),
        ("a spoofed create", by("bob", None, "CREATE", owned("alice", Some("u-1")), Value::Null), Some("bob"), None),
        (
            "a name that JSON escapes",
            by("o'brien \"ob\" \\ \u{e9}\u{1}", Some("u\"1"), "CREATE", shell(full_spec()), Value::Null),
            Some("o'brien \"ob\" \\ \u{e9}\u{1}"),
            Some("u\"1"),
        ),
        (
            "a spoofed create with a uid",
            by("bob", Some("u-2"), "CREATE", owned("alice", Some("u-1")), Value::Null),
            Some("bob"),
            Some("u-2"),
        ),
        (
            "no spec at all",
            by("alice", None, "CREATE", json!({"metadata": {"name": "x"}}), Value::Null),
            Some("alice"),
            None,
        ),
        (
            "an update keeps the owner",
            by("bob", None, "UPDATE", owned("alice", Some("u-1")), owned("alice", Some("u-1"))),
            Some("alice"),
            Some("u-1"),
        ),
        (
            "an update that dropped it gets it back",
            by("bob", None, "UPDATE", shell(full_spec()), owned("alice", Some("u-1"))),
            Some("alice"),
            Some("u-1"),
        ),
        (
            "an update that changes it is the validating webhook's",
            by("bob", None, "UPDATE", owned("bob", None), owned("alice", None)),
            Some("bob"),
            None,
        ),
        (
            "an old shell stays unowned",
            by("bob", Some("u-2"), "UPDATE", shell(full_spec()), shell(full_spec())),
            None,
            None,
        ),
    ];
    for (what, request, owner, uid) in cases {
        let object =
            request.object.as_ref().map(|o| serde_json::from_str::<Value>(o.raw_spec().unwrap_or("{}")).unwrap());
        let response = mutate(&request, &Policy::default());
        assert!(response.allowed, "{what}");
        let mut doc = json!({"metadata": {}, "spec": object.unwrap_or(Value::Null)});
        if doc["spec"].is_null() {
            doc.as_object_mut().unwrap().remove("spec");
        }
        let patched = apply_patch(&doc, &response);
        assert_eq!(patched["spec"]["owner"].as_str(), owner, "{what}");
        assert_eq!(patched["spec"]["ownerUID"].as_str(), uid, "{what}");
    }
}

#[test]
fn no_patch_when_nothing_changes() {
    let mut object = shell(full_spec());
    object["metadata"]["finalizers"] = json!(["other.io/keep", names::FINALIZER]);
    let response = mutate(&request("UPDATE", object.clone(), object), &Policy::default());
    assert!(response.allowed);
    assert_eq!(response.patch, None);
}

#[test]
fn finalizer_is_appended_to_others_and_never_added_while_deleting() {
    let mut object = shell(full_spec());
    object["metadata"]["finalizers"] = json!(["other.io/keep"]);
    let patched = apply_patch(&object, &mutate(&request("UPDATE", object.clone(), object.clone()), &Policy::default()));
    assert_eq!(patched["metadata"]["finalizers"], json!(["other.io/keep", names::FINALIZER]));

    object["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    object["metadata"]["finalizers"] = json!([]);
    let response = mutate(&request("UPDATE", object.clone(), object), &Policy::default());
    assert_eq!(response.patch, None, "a deleting object gets no finalizer back");
}

#[test]
fn every_default_patch_is_built_once_and_applies() {
    use crate::admission::defaulting::{FinalizerChange, Needs, operations, patch_for};
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
                let base64: String = serde_json::from_str(patch.base64_json.as_ref().unwrap().get()).unwrap();
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
    use crate::admission::defaulting::{FinalizerChange, Needs};
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

/// The paths a response's patch adds, in order, and the value it gives `/spec/className`.
fn added(response: &Response<'_>) -> (Vec<String>, Option<Value>) {
    let Some(patch) = &response.patch else { return (Vec::new(), None) };
    let ops: Value = serde_json::from_slice(&patch.json).unwrap();
    let ops = ops.as_array().unwrap();
    let paths = ops.iter().map(|o| o["path"].as_str().unwrap().to_owned()).collect();
    let class = ops.iter().find(|o| o["path"] == "/spec/className").map(|o| o["value"].clone());
    (paths, class)
}

#[test]
fn a_new_shell_gets_its_class_and_what_the_class_fills() {
    use std::collections::BTreeMap;

    use myownshell_api::{ClassLifetime, MyOwnShellClass, MyOwnShellClassSpec};

    use crate::classes::ClassIndex;

    let class = |name: &str, default: bool, spec: MyOwnShellClassSpec| {
        let mut c = MyOwnShellClass::new(name, spec);
        if default {
            c.metadata.annotations = Some(BTreeMap::from([(names::DEFAULT_CLASS_ANNOTATION.into(), "true".into())]));
        }
        c
    };
    let timed = || MyOwnShellClassSpec {
        lifetime: Some(ClassLifetime { idle_timeout: Some("1h".into()), ..ClassLifetime::default() }),
        ..MyOwnShellClassSpec::default()
    };
    // A class that fills nothing (found by `className` alone) and one that fills a lifetime (the
    // spec read in full), each as the default in turn.
    let plain_default =
        ClassIndex::of([class("plain", true, MyOwnShellClassSpec::default()), class("timed", false, timed())]);
    let timed_default =
        ClassIndex::of([class("plain", false, MyOwnShellClassSpec::default()), class("timed", true, timed())]);
    let two_defaults = ClassIndex::of([
        class("plain", true, MyOwnShellClassSpec::default()),
        class("other", true, MyOwnShellClassSpec::default()),
    ]);
    let no_default = ClassIndex::of([class("plain", false, MyOwnShellClassSpec::default())]);
    let shell_paths = ["/metadata/finalizers", "/spec/owner"];
    let timed_paths = ["/spec/lifetime", "/spec/lifetime/idleTimeout"];
    let unclassed = ["/spec/image", "/spec/command", "/spec/resources", "/metadata/finalizers", "/spec/owner"];
    let no_spec = json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "x"}});
    // (what, classes, object, the paths added, the class given, a warning)
    type Case<'c> = (&'c str, &'c ClassIndex, Value, Vec<&'c str>, Option<&'c str>, bool);
    let cases: Vec<Case<'_>> = vec![
        (
            "names a class that fills nothing",
            &plain_default,
            shell(json!({"className": "plain", "size": 1})),
            shell_paths.to_vec(),
            None,
            false,
        ),
        (
            "names a class that fills a lifetime",
            &plain_default,
            shell(json!({"className": "timed", "size": 1})),
            [&shell_paths[..], &timed_paths].concat(),
            None,
            false,
        ),
        (
            "names a class that does not exist",
            &plain_default,
            shell(json!({"className": "gone", "size": 1})),
            shell_paths.to_vec(),
            None,
            false,
        ),
        (
            "names none: the default, which fills nothing",
            &plain_default,
            shell(json!({"size": 1})),
            [&shell_paths[..], &["/spec/className"]].concat(),
            Some("plain"),
            false,
        ),
        (
            "a null class: the default",
            &plain_default,
            shell(json!({"className": null, "size": 1})),
            [&shell_paths[..], &["/spec/className"]].concat(),
            Some("plain"),
            false,
        ),
        (
            "names none: the default, which fills a lifetime",
            &timed_default,
            shell(json!({"size": 1})),
            [&shell_paths[..], &["/spec/className"], &timed_paths].concat(),
            Some("timed"),
            false,
        ),
        (
            "no spec at all: the default",
            &plain_default,
            no_spec.clone(),
            [&["/spec", "/spec/size"][..], &shell_paths, &["/spec/className"]].concat(),
            Some("plain"),
            false,
        ),
        (
            "no spec, a default that fills a lifetime",
            &timed_default,
            no_spec,
            [&["/spec", "/spec/size"][..], &shell_paths, &["/spec/className"], &timed_paths].concat(),
            Some("timed"),
            false,
        ),
        (
            "two defaults: the first by name, and a warning",
            &two_defaults,
            shell(json!({"size": 1})),
            [&shell_paths[..], &["/spec/className"]].concat(),
            Some("other"),
            true,
        ),
        (
            "no default: the operator's own defaults",
            &no_default,
            shell(json!({"size": 1})),
            unclassed.to_vec(),
            None,
            false,
        ),
        (
            "a home: the spec read in full",
            &plain_default,
            shell(json!({"className": "plain", "size": 1, "home": {}})),
            [&shell_paths[..], &["/spec/home/size", "/spec/home/onDelete"]].concat(),
            None,
            false,
        ),
    ];
    for (what, classes, object, paths, class, warned) in cases {
        let response = crate::admission::defaulting::mutate_with_classes(
            &request("CREATE", object.clone(), Value::Null),
            &Policy::default(),
            classes,
        );
        assert!(response.allowed, "{what}");
        let (got, given) = added(&response);
        assert_eq!(got, paths, "{what}");
        assert_eq!(given, class.map(|c| json!(c)), "{what}");
        assert_eq!(!response.warnings.is_empty(), warned, "{what}: {:?}", response.warnings);
        // And the patch applies.
        let _ = apply_patch(&object, &response);
    }
}
