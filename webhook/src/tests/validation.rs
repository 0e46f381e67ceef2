//! The validating webhook ([`crate::admission::validation`]): every rule, ratcheting on update, deletion, scale.

use myownshell_api::names;
use serde_json::{Value, json};

use super::*;

#[test]
fn validation_table() {
    let policy = Policy { max_size: 50, allowed_registries: vec![], ..Policy::default() };
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
        json!({"command": ["sh", "-c", "x".repeat(131_071)]}),
        json!({"image": "a".repeat(237)}),
        json!({"lifetime": {"idleTimeout": "40s", "warnBefore": "20s"}}),
    ];
    for spec in ok {
        let response = validate(&request("CREATE", shell(spec.clone()), Value::Null), &policy, no_shells());
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
            json!({"command": ["sh", "-c", "x".repeat(131_072)]}),
            "spec.command[2]: must be at most 131071 bytes (the kernel's limit for one argument), got 131072 bytes",
        ),
        (
            json!({"command": vec!["x".repeat(100_000); 11]}),
            "spec.command: must take at most 1048576 bytes in all (each argument with its NUL and pointer; the kernel refuses more with \"argument list too long\"), got 1100099 bytes in 11 arguments",
        ),
        (
            json!({"image": "a".repeat(238)}),
            "spec.image: must be a valid image reference (the repository name is 256 characters as the kubelet reads it",
        ),
        (
            json!({"lifetime": {"idleTimeout": "40s", "warnBefore": "1m"}}),
            "spec.lifetime.warnBefore: must be shorter than spec.lifetime.idleTimeout (40s), got \"1m\"",
        ),
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
        let response = validate(&request("CREATE", shell(spec.clone()), Value::Null), &policy, no_shells());
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
        let response =
            validate(&request("CREATE", shell(json!({"resources": resources})), Value::Null), &policy, no_shells());
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
        let response =
            validate(&request("CREATE", shell(json!({"resources": resources})), Value::Null), &policy, no_shells());
        assert!(!response.allowed, "{resources} was allowed");
        assert!(response.message().contains(want), "{resources}:\n got {}\nwant {want}", response.message());
        assert_eq!(code(&response), 422);
    }
}

#[test]
fn several_problems_are_reported_together() {
    let policy = Policy::default();
    let spec = json!({"size": 99, "image": "UPPER", "command": [""], "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}});
    let response = validate(&request("CREATE", shell(spec), Value::Null), &policy, no_shells());
    let fields: Vec<&str> = response.message().split("; ").map(|p| p.split(':').next().unwrap()).collect();
    assert_eq!(fields, ["spec.size", "spec.image", "spec.command[0]", "spec.resources.requests[cpu]"]);
}

#[test]
fn allowed_registries() {
    let policy = Policy {
        max_size: 50,
        allowed_registries: vec!["docker.io".into(), "ghcr.io/my-org".into()],
        ..Policy::default()
    };
    for (image, allowed) in [
        ("busybox:1.37.0", true),
        ("docker.io/library/busybox:1", true),
        ("ghcr.io/my-org/shell:1", true),
        ("ghcr.io/other/shell:1", false),
        ("quay.io/shell:1", false),
    ] {
        let response = validate(&request("CREATE", shell(json!({"image": image})), Value::Null), &policy, no_shells());
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
        let response =
            validate(&request("CREATE", shell(json!({"image": image})), Value::Null), &Policy::default(), no_shells());
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
    assert!(validate(&request("UPDATE", relabelled, old.clone()), &strict, no_shells()).allowed);
    // Changing the image to a valid one passes too; changing size to another bad one does not.
    assert!(
        validate(
            &request("UPDATE", shell(json!({"size": 10, "image": "busybox:2"})), old.clone()),
            &strict,
            no_shells()
        )
        .allowed
    );
    let bigger =
        validate(&request("UPDATE", shell(json!({"size": 11, "image": "busybox:1"})), old), &strict, no_shells());
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
    assert!(validate(&request("UPDATE", new.clone(), old.clone()), &strict, no_shells()).allowed);
    new["metadata"]["finalizers"] = json!([]);
    assert!(validate(&request("UPDATE", new, old), &strict, no_shells()).allowed);
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
            let response = validate(&request("UPDATE", with_metadata(&old, change), old.clone()), &policy, no_shells());
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
        let response = validate(&request("UPDATE", deleting(spec.clone()), old.clone()), &policy, no_shells());
        assert!(!response.allowed && response.message().starts_with(want), "{spec}: {}", response.message());
    }
    let fine =
        validate(&request("UPDATE", deleting(json!({"size": 2, "image": "busybox:1"})), old), &policy, no_shells());
    assert!(fine.allowed, "{}", fine.message());
}

#[test]
fn scale_subresource_is_checked_as_size() {
    let scale = |n: i64| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x", "namespace": "ns"}, "spec": {"replicas": n}, "status": {"replicas": 1}});
    // Shell ns/x belongs to the requester of `body` ("admin").
    let shells = ShellIndex::of([(
        "ns".to_owned(),
        crate::connect::access::ShellAccess { name: "x".into(), owner: Some("admin".into()), ..Default::default() },
    )]);
    let run = |n: i64| {
        let b = body("UPDATE", scale(n), scale(1), Some("scale"));
        let req = decode(&b).unwrap();
        let response = validate(&req, &Policy::default(), &shells);
        (response.allowed, response.message().to_owned())
    };
    assert!(run(50).0);
    assert!(run(0).0);
    assert_eq!(run(500), (false, "spec.size: must be between 0 and 50, got 500".to_owned()));
    let (allowed, message) = run(i64::from(i32::MAX) + 1);
    assert!(!allowed && message.contains("spec.replicas must be a 32-bit integer, got 2147483648"), "{message}");
    // Only the owner scales: someone else's shell, or one the webhook does not know yet.
    let someone_elses = ShellIndex::of([(
        "ns".to_owned(),
        crate::connect::access::ShellAccess { name: "x".into(), owner: Some("alice".into()), ..Default::default() },
    )]);
    let b = body("UPDATE", scale(2), scale(1), Some("scale"));
    let response =
        validate(&decode(&b).unwrap(), &Policy { admin_groups: vec![], ..Policy::default() }, &someone_elses);
    assert_eq!(response.message(), "spec: only the shell's owner alice may change it, not admin");
    let response = validate(&decode(&b).unwrap(), &Policy::default(), no_shells());
    assert!(response.message().contains("try again"), "{}", response.message());
    // Not a number at all: named too.
    let b = body("UPDATE", json!({"spec": {"replicas": "x"}}), scale(1), Some("scale"));
    let response = validate(&decode(&b).unwrap(), &Policy::default(), &shells);
    assert_eq!(
        response.message(),
        r#"spec does not decode: spec.replicas: must be a 32-bit integer (invalid type: string "x", expected a JSON number)"#
    );
    // The mutating webhook is not registered for scale; if called, it leaves it alone.
    let b = body("UPDATE", scale(500), scale(1), Some("scale"));
    assert_eq!(mutate(&decode(&b).unwrap(), &Policy::default()).patch, None);
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
        no_shells(),
    );
    assert!(ok.allowed, "{}", ok.message());
    let bad = validate(
        &request("CREATE", shell(json!({"resources": {"requests": {"cpu": 2}, "limits": {"cpu": 1}}})), Value::Null),
        &policy,
        no_shells(),
    );
    assert_eq!(bad.message(), "spec.resources.requests[cpu]: must be less than or equal to the limit \"1\", got \"2\"");
    // Not a quantity at all: named with its type.
    let wrong = validate(
        &request("CREATE", shell(json!({"resources": {"limits": {"cpu": true}}})), Value::Null),
        &policy,
        no_shells(),
    );
    assert_eq!(code(&wrong), 400);
    assert!(
        wrong.message().contains("spec does not decode") && wrong.message().contains("quantity"),
        "{}",
        wrong.message()
    );
}

#[test]
fn resource_lists_are_sorted_and_a_repeated_name_keeps_its_last_value() {
    let read = |text: &str| crate::review::spec::shell_spec(&format!(r#"{{"resources": {{"limits": {text}}}}}"#));
    let spec = read(r#"{"memory": "1Mi", "cpu": "1", "ephemeral-storage": 5, "cpu": "3"}"#).unwrap();
    let list = spec.resources.unwrap().limits.unwrap();
    let entries: Vec<(&str, &str)> = list.iter().map(|(n, q)| (n.as_str(), q.0.as_str())).collect();
    assert_eq!(entries, [("cpu", "3"), ("ephemeral-storage", "5"), ("memory", "1Mi")]);
    // Equal lists in another order compare equal (update ratcheting compares them).
    let other = read(r#"{"ephemeral-storage": "5", "cpu": "3", "memory": "1Mi"}"#).unwrap();
    assert_eq!(other.resources.unwrap().limits.unwrap(), list);
    assert!(read(r#"["cpu"]"#).is_err());
}

/// A class's rules hold through `kubectl scale` as through any change of `spec.size`: its
/// `maxSize` always, and at a start (from no pods) everything it says, its `use` included; and a
/// start of a shell whose class is gone is refused, whatever path it takes.
#[test]
fn a_class_holds_through_scale_and_every_start() {
    use myownshell_api::{ClassImages, MyOwnShellClass, MyOwnShellClassSpec, MyOwnShellSpec};

    use crate::admission::validation::validate_with_classes;
    use crate::classes::ClassIndex;
    use crate::connect::access::{ClassedSpec, ShellAccess};

    let team = MyOwnShellClass::new(
        "team",
        MyOwnShellClassSpec {
            max_size: Some(2),
            images: Some(ClassImages { allowed: Some(vec!["busybox:*".into()]), default: None }),
            ..MyOwnShellClassSpec::default()
        },
    );
    let classes = ClassIndex::of([team]);
    let spec = |image: &str| MyOwnShellSpec {
        owner: Some("admin".into()),
        class_name: Some("team".into()),
        image: Some(image.into()),
        size: Some(1),
        ..MyOwnShellSpec::default()
    };
    let index = |spec: MyOwnShellSpec| {
        let access = ShellAccess {
            name: "x".into(),
            owner: Some("admin".into()),
            classed: Some(ClassedSpec(std::sync::Arc::new(spec))),
            ..ShellAccess::default()
        };
        ShellIndex::of([("ns".to_owned(), access)])
    };
    let scale = |n: i64| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x", "namespace": "ns"}, "spec": {"replicas": n}});
    let run = |shells: &ShellIndex, from: i64, to: i64| {
        let b = body("UPDATE", scale(to), scale(from), Some("scale"));
        let req = decode(&b).unwrap();
        let (response, use_check) = validate_with_classes(&req, &Policy::default(), shells, &classes);
        (response.allowed, response.message().to_owned(), use_check.map(|c| c.class.into_owned()))
    };
    let fits = index(spec("busybox:1.37.0"));
    assert_eq!(run(&fits, 1, 2), (true, String::new(), None), "within maxSize, running: no use asked");
    let (allowed, message, _) = run(&fits, 1, 5);
    assert!(!allowed && message.contains("spec.size") && message.contains("team"), "beyond maxSize: {message}");
    assert_eq!(run(&fits, 0, 1), (true, String::new(), Some("team".into())), "a start asks the class's use");
    let no_longer = index(spec("alpine:3"));
    assert!(run(&no_longer, 1, 2).0, "running on with an image the class no longer allows is not a start");
    let (allowed, message, _) = run(&no_longer, 0, 1);
    assert!(!allowed && message.contains("spec.image"), "a start takes the class up whole: {message}");
    // The class deleted: a start by scale, or by `kubectl myownshell start`, is refused.
    let gone = ClassIndex::of([]);
    let b = body("UPDATE", scale(1), scale(0), Some("scale"));
    let (response, _) = validate_with_classes(&decode(&b).unwrap(), &Policy::default(), &fits, &gone);
    assert!(response.message().contains("no MyOwnShellClass is named \"team\""), "{}", response.message());
    let stopped = json!({"owner": "admin", "className": "team", "image": "busybox:1", "stopped": true});
    let started = json!({"owner": "admin", "className": "team", "image": "busybox:1", "stopped": false,
                         "lifetime": {"restartedAt": "2026-11-29T07:00:00Z"}});
    let req = request("UPDATE", shell(started), shell(stopped.clone()));
    let (response, _) = validate_with_classes(&req, &Policy::default(), no_shells(), &gone);
    assert!(response.message().contains("no MyOwnShellClass is named \"team\""), "{}", response.message());
    // Not a start: a change that leaves it stopped passes (the shell keeps what it has).
    let mut still = stopped.clone();
    still["size"] = json!(2);
    let (response, _) =
        validate_with_classes(&request("UPDATE", shell(still), shell(stopped)), &Policy::default(), no_shells(), &gone);
    assert!(response.allowed, "{}", response.message());
}
