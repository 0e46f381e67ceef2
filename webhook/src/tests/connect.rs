//! The connect webhook ([`crate::connect::gate`]): whose pod, who may, what is recorded.

use serde_json::{Value, json};

use super::*;
use crate::connect::access::{Grant, ShellAccess};
use crate::connect::gate::{ConnectKind, connect};
use crate::connect::shell_index::ShellIndex;

/// A CONNECT (or, for `debug`, an UPDATE of `pods/ephemeralcontainers`) review by `user`.
fn connection_body(sub_resource: &str, pod: &str, user: &str, groups: &[&str], dry_run: bool) -> Vec<u8> {
    let (operation, kind, object) = match sub_resource {
        "exec" => (
            "CONNECT",
            "PodExecOptions",
            json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdin": true, "tty": true, "container": "shell", "command": ["sh"]}),
        ),
        "attach" => {
            ("CONNECT", "PodAttachOptions", json!({"kind": "PodAttachOptions", "apiVersion": "v1", "stdin": true}))
        }
        "portforward" => {
            ("CONNECT", "PodPortForwardOptions", json!({"kind": "PodPortForwardOptions", "apiVersion": "v1"}))
        }
        "proxy" => ("CONNECT", "PodProxyOptions", json!({"kind": "PodProxyOptions", "apiVersion": "v1", "path": "/"})),
        _ => (
            "UPDATE",
            "Pod",
            json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": pod, "namespace": "team"}, "spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}}),
        ),
    };
    let old = if operation == "UPDATE" {
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": pod}})
    } else {
        Value::Null
    };
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "c0ffee00-0000-0000-0000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": sub_resource,
            "name": pod, "namespace": "team", "operation": operation,
            "userInfo": {"username": user, "groups": groups},
            "object": object, "oldObject": old, "dryRun": dry_run,
        }
    });
    serde_json::to_vec(&review).unwrap()
}

fn index() -> ShellIndex {
    let shell = |name: &str, owner: Option<&str>, users: &[&str], groups: &[&str]| {
        (
            "team".to_owned(),
            ShellAccess {
                name: name.into(),
                uid: Some(format!("uid-{name}")),
                owner: owner.map(Into::into),
                users: users.iter().map(|u| (*u).to_owned()).collect(),
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
                ..ShellAccess::default()
            },
        )
    };
    ShellIndex::of([shell("web", Some("alice"), &["bob"], &["devs"]), shell("old", None, &[], &[])])
}

#[test]
fn who_gets_into_which_pod() {
    let shells = index();
    let auth = ["system:authenticated"];
    let admins = ["system:masters", "system:authenticated"];
    // (sub-resource, pod, user, groups, allowed, recorded as)
    type Case<'a> = (&'a str, &'a str, &'a str, &'a [&'a str], bool, Option<Option<Grant>>);
    let cases: Vec<Case> = vec![
        ("exec", "web-7d9f8c6b4-x2x4z", "alice", &auth, true, Some(Some(Grant::Owner))),
        ("exec", "web-7d9f8c6b4-x2x4z", "bob", &auth, true, Some(Some(Grant::SharedUser))),
        ("exec", "web-7d9f8c6b4-x2x4z", "carol", &["devs"], true, Some(Some(Grant::SharedGroup))),
        ("exec", "web-7d9f8c6b4-x2x4z", "mallory", &auth, false, Some(None)),
        ("attach", "web-7d9f8c6b4-x2x4z", "mallory", &auth, false, Some(None)),
        ("portforward", "web-7d9f8c6b4-x2x4z", "mallory", &auth, false, Some(None)),
        ("proxy", "web-7d9f8c6b4-x2x4z", "mallory", &auth, false, Some(None)),
        ("ephemeralcontainers", "web-7d9f8c6b4-x2x4z", "mallory", &auth, false, Some(None)),
        ("ephemeralcontainers", "web-7d9f8c6b4-x2x4z", "alice", &auth, true, Some(Some(Grant::Owner))),
        ("exec", "old-7d9f8c6b4-x2x4z", "mallory", &auth, true, Some(Some(Grant::NoOwner))),
        ("exec", "api-7d9f8c6b4-x2x4z", "mallory", &auth, true, None),
        ("exec", "web-0", "mallory", &auth, true, None),
        ("exec", "web-7d9f8c6b4-x2x4z", "root", &admins, true, Some(Some(Grant::Admin))),
        ("exec", "web-7d9f8c6b4-x2x4z", "root", &auth, false, Some(None)),
    ];
    for (sub, pod, user, groups, allowed, recorded) in cases {
        let body = connection_body(sub, pod, user, groups, false);
        let request = decode(&body).unwrap();
        let (response, connections) = connect(&request, &shells, &["system:masters".to_owned()]);
        let what = format!("{user} {sub} {pod}");
        assert_eq!(response.allowed, allowed, "{what}: {}", response.message());
        assert_eq!(connections.first().map(|c| c.grant), recorded, "{what}");
        if let Some(c) = connections.first() {
            assert_eq!((c.pod.as_str(), c.user.as_str(), c.shell.name.as_str()), (pod, user, &pod[..3]), "{what}");
        }
    }
}

#[test]
fn a_refusal_names_the_shell_and_who_may_connect() {
    let body = connection_body("exec", "web-7d9f8c6b4-x2x4z", "mallory", &["system:authenticated"], false);
    let (response, connections) = connect(&decode(&body).unwrap(), &index(), &[]);
    assert_eq!(code(&response), 403);
    assert_eq!(
        response.message(),
        "mallory may not exec (or cp) into pod web-7d9f8c6b4-x2x4z: it runs shell team/web (a MyOwnShell), which only its owner alice, the users bob, members of devs may connect to; its owner can add you to spec.sharedWith"
    );
    assert_eq!(connections[0].kind, ConnectKind::Exec);
    assert!(!connections[0].dry_run);
    let body = connection_body("ephemeralcontainers", "web-7d9f8c6b4-x2x4z", "mallory", &[], true);
    let (response, connections) = connect(&decode(&body).unwrap(), &index(), &[]);
    assert!(response.message().starts_with("mallory may not add a debug container to pod"), "{}", response.message());
    assert!(connections[0].dry_run, "a dry run is decided alike, and marked so that nothing is recorded");
}

#[test]
fn before_the_first_list_nobody_gets_into_a_pod_named_as_a_deployments() {
    let body = connection_body("exec", "web-7d9f8c6b4-x2x4z", "alice", &["system:authenticated"], false);
    let (response, connections) = connect(&decode(&body).unwrap(), &ShellIndex::default(), &[]);
    assert_eq!(code(&response), 503);
    assert!(!response.allowed);
    assert!(response.message().contains("has not listed the shells yet"), "{}", response.message());
    assert!(connections.is_empty(), "nothing was decided for a shell, so nothing is recorded");
}

#[test]
fn the_connect_webhook_reads_only_connections_to_pods() {
    let shells = index();
    let other = body("CREATE", shell(full_spec()), Value::Null, None);
    match review(Webhook::Connect, &other, &Policy::default(), &shells) {
        Answer::Review { response, connections, .. } => {
            assert_eq!(code(&response), 400);
            assert!(response.message().contains("connections to pods"), "{}", response.message());
            assert!(connections.is_empty());
        }
        Answer::BadRequest(reason) => panic!("{reason}"),
    }
}
