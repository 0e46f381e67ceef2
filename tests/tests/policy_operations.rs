//! Every admission policy of `config/policy` is tried against every operation it can see
//! (create, update, server-side apply, delete, a collection delete, each as a dry run and for
//! real, and the `status` and `scale` subresources), on objects that look like a shell's and on
//! plain ones, as a namespace editor, as the namespace controller and as the makers the policies
//! let through: no answer may be a rule that errored (a rule that errors fails closed, and the
//! last one that did, reading `request.name` on a DELETECOLLECTION, kept every namespace with a
//! claim from being deleted). And the namespace controller's collection deletes go through.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use myownshell_api::names;
use myownshell_envtest::kubectl::KubectlOutput;
use myownshell_envtest::{create_shell_namespace, shared};
use myownshell_tests::access::{install_policies, kubectl_as, namespace_editors};
use serde_json::{Value, json};

const EDITOR: &str = "carol";
const AUTH: &[&str] = &["system:authenticated"];
const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";
const OPERATOR: &str = "system:serviceaccount:myownshell-system:myownshell-controller";
const RS_CONTROLLER: &str = "system:serviceaccount:kube-system:replicaset-controller";
const DEPLOYMENT_CONTROLLER: &str = "system:serviceaccount:kube-system:deployment-controller";

/// What a rule that errored says, in any of the apiserver's words for it.
const ERRORED: &[&str] = &[
    "resulted in error",
    "evaluation error",
    "no such key",
    "no matching overload",
    "compilation failed",
    "failed to evaluate",
];

/// One object to try every operation on: its resource (as RBAC names it), whether it has the
/// `scale` subresource, who may make it, and the object.
struct Fixture {
    resource: &'static str,
    scale: bool,
    maker: &'static str,
    object: Value,
}

fn shell_labels() -> Value {
    json!({names::LABEL_NAME: names::LABEL_NAME_VALUE, names::LABEL_INSTANCE: "web"})
}

fn template(labels: Value, home: bool) -> Value {
    let mut spec = json!({"containers": [{"name": "shell", "image": "busybox:1.37.0"}], "restartPolicy": "Always"});
    if home {
        spec["volumes"] = json!([{"name": "home", "persistentVolumeClaim": {"claimName": "myownshell-home-web"}}]);
    }
    json!({"metadata": {"labels": labels}, "spec": spec})
}

fn object(api_version: &str, kind: &str, name: &str, labels: Value, rest: Value) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "labels": labels}});
    o.as_object_mut().unwrap().extend(rest.as_object().unwrap().clone());
    o
}

/// An object of every resource the policies name, shaped as a shell's where a policy looks for
/// that, and plain.
fn fixtures() -> Vec<Fixture> {
    let (shell, plain) = (shell_labels(), json!({"app": "plain"}));
    let workload = |kind: &str, name: &str, labels: &Value, home: bool| {
        let (api, extra) = match kind {
            "Deployment" | "ReplicaSet" | "DaemonSet" => ("apps/v1", json!({})),
            "StatefulSet" => ("apps/v1", json!({"serviceName": name})),
            _ => ("v1", json!({})),
        };
        let mut spec =
            json!({"selector": {"matchLabels": labels}, "template": template(labels.clone(), home), "replicas": 0});
        if kind == "DaemonSet" {
            spec.as_object_mut().unwrap().remove("replicas");
        }
        if kind == "ReplicationController" {
            spec["selector"] = labels.clone();
        }
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        object(api, kind, name, labels.clone(), json!({"spec": spec}))
    };
    let claim = |name: &str, labels: &Value, source: Value| {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
        object("v1", "PersistentVolumeClaim", name, labels.clone(), json!({"spec": spec}))
    };
    let mut job_template = template(plain.clone(), false);
    job_template["spec"]["restartPolicy"] = json!("Never");
    vec![
        Fixture {
            resource: "pods",
            scale: false,
            maker: RS_CONTROLLER,
            object: object(
                "v1",
                "Pod",
                "web-7d9f8c6b4-x2x4z",
                shell.clone(),
                json!({"spec": template(json!({}), true)["spec"]}),
            ),
        },
        Fixture {
            resource: "pods",
            scale: false,
            maker: "admin",
            object: object("v1", "Pod", "plain", plain.clone(), json!({"spec": template(json!({}), false)["spec"]})),
        },
        Fixture {
            resource: "deployments",
            scale: true,
            maker: OPERATOR,
            object: workload("Deployment", "web", &shell, true),
        },
        Fixture {
            resource: "deployments",
            scale: true,
            maker: "admin",
            object: workload("Deployment", "plain", &plain, false),
        },
        Fixture {
            resource: "replicasets",
            scale: true,
            maker: DEPLOYMENT_CONTROLLER,
            object: workload("ReplicaSet", "web-7d9f8c6b4", &shell, false),
        },
        Fixture {
            resource: "replicasets",
            scale: true,
            maker: "admin",
            object: workload("ReplicaSet", "plain", &plain, false),
        },
        Fixture {
            resource: "statefulsets",
            scale: true,
            maker: "admin",
            object: workload("StatefulSet", "plain", &plain, false),
        },
        Fixture {
            resource: "daemonsets",
            scale: false,
            maker: "admin",
            object: workload("DaemonSet", "plain", &plain, false),
        },
        Fixture {
            resource: "replicationcontrollers",
            scale: true,
            maker: "admin",
            object: workload("ReplicationController", "plain", &plain, false),
        },
        Fixture {
            resource: "jobs",
            scale: false,
            maker: "admin",
            object: object(
                "batch/v1",
                "Job",
                "plain",
                plain.clone(),
                json!({"spec": {"template": job_template.clone()}}),
            ),
        },
        Fixture {
            resource: "cronjobs",
            scale: false,
            maker: "admin",
            object: object(
                "batch/v1",
                "CronJob",
                "plain",
                plain.clone(),
                json!({"spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": job_template}}}}),
            ),
        },
        Fixture {
            resource: "podtemplates",
            scale: false,
            maker: "admin",
            object: object(
                "v1",
                "PodTemplate",
                "plain",
                plain.clone(),
                json!({"template": template(plain.clone(), false)}),
            ),
        },
        Fixture {
            resource: "persistentvolumeclaims",
            scale: false,
            maker: OPERATOR,
            object: claim("myownshell-home-web", &shell, json!({})),
        },
        Fixture {
            resource: "persistentvolumeclaims",
            scale: false,
            maker: "admin",
            object: claim("plain", &plain, json!({})),
        },
        Fixture {
            resource: "networkpolicies",
            scale: false,
            maker: OPERATOR,
            object: network_policy(
                "myownshell-shells",
                json!({names::LABEL_NAME: names::LABEL_NAME_VALUE, names::LABEL_MANAGED_BY: names::LABEL_MANAGED_BY_VALUE,
                       "app.kubernetes.io/component": "network-isolation"}),
                json!({"podSelector": {"matchLabels": shell_labels()}, "ingress": [{"from": [{"podSelector": {}}]}]}),
            ),
        },
        Fixture {
            resource: "networkpolicies",
            scale: false,
            maker: "admin",
            object: network_policy("allow-all", json!({}), json!({"podSelector": {}, "ingress": [{}], "egress": [{}]})),
        },
        Fixture {
            resource: "networkpolicies",
            scale: false,
            maker: EDITOR,
            object: network_policy("deny-all", plain.clone(), json!({"podSelector": {}, "policyTypes": ["Ingress"]})),
        },
        Fixture {
            resource: "myownshells",
            scale: true,
            maker: "admin",
            object: object(
                "myownshell.io/v1alpha1",
                "MyOwnShell",
                "web",
                json!({}),
                json!({"spec": {"size": 0, "owner": "alice"}}),
            ),
        },
        Fixture {
            resource: "myownshellclasses",
            scale: false,
            maker: "admin",
            object: object("myownshell.io/v1alpha1", "MyOwnShellClass", "ops-plain", json!({}), json!({"spec": {}})),
        },
    ]
}

fn network_policy(name: &str, labels: Value, spec: Value) -> Value {
    object("networking.k8s.io/v1", "NetworkPolicy", name, labels, json!({"spec": spec}))
}

/// Every resource (without subresource) the policies match on.
fn resources_the_policies_see() -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for policy in myownshell_envtest::kustomize::render("policy").unwrap() {
        for rule in policy["spec"]["matchConstraints"]["resourceRules"].as_array().into_iter().flatten() {
            for resource in rule["resources"].as_array().into_iter().flatten() {
                let resource = resource.as_str().unwrap();
                seen.insert(resource.split('/').next().unwrap().to_owned());
            }
        }
    }
    seen
}

fn errored(out: &KubectlOutput) -> bool {
    ERRORED.iter().any(|w| out.stderr.contains(w) || out.stdout.contains(w))
}

#[tokio::test]
async fn no_policy_errors_on_any_operation_and_namespace_deletion_goes_through() {
    let cp = shared();
    let kubectl = cp.kubectl();
    install_policies(&kubectl).await.unwrap();
    let client = cp.client().unwrap();
    let ns = create_shell_namespace(&client, "ops").await.unwrap();
    namespace_editors(&client, &ns, &[EDITOR], &[]).await.unwrap();
    let admin = kubectl
        .run(&[
            "create",
            "clusterrolebinding",
            "ops-makers",
            "--clusterrole=cluster-admin",
            &format!("--user={OPERATOR}"),
            &format!("--user={RS_CONTROLLER}"),
            &format!("--user={DEPLOYMENT_CONTROLLER}"),
            &format!("--user={NAMESPACE_CONTROLLER}"),
        ])
        .await
        .unwrap();
    assert!(admin.success || admin.stderr.contains("AlreadyExists"), "{}", admin.stderr);
    let fixtures = fixtures();
    let covered: BTreeSet<&str> = fixtures.iter().map(|f| f.resource).collect();
    for resource in resources_the_policies_see() {
        assert!(
            covered.contains(resource.as_str()) || ["volumesnapshots", "services"].contains(&resource.as_str()),
            "a policy sees {resource}, which this test has no object for: add one"
        );
    }
    let mut errors = Vec::new();
    let mut tried = 0;
    for fixture in &fixtures {
        for (who, args, stdin) in operations(fixture, &ns) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = match who.as_str() {
                "admin" => kubectl.run_with_stdin(&args, stdin.as_deref()).await.unwrap(),
                user => {
                    let mut all = myownshell_tests::access::as_user(user, AUTH);
                    all.extend(args.iter().map(|a| (*a).to_owned()));
                    let all: Vec<&str> = all.iter().map(String::as_str).collect();
                    kubectl.run_with_stdin(&all, stdin.as_deref()).await.unwrap()
                }
            };
            tried += 1;
            if errored(&out) {
                errors.push(format!("{} {} as {who}: {}", fixture.resource, args.join(" "), out.stderr.trim()));
            }
        }
    }
    // The namespace controller's own collection deletes (namespace deletion), for real.
    for resource in covered.iter().filter(|r| **r != "myownshellclasses") {
        let path = collection(resource, &ns);
        let out = kubectl_as(&kubectl, NAMESPACE_CONTROLLER, AUTH, &["delete", "--raw", &path]).await;
        tried += 1;
        if !out.success {
            errors.push(format!("the namespace controller's DELETECOLLECTION of {resource}: {}", out.stderr.trim()));
        }
    }
    assert!(
        errors.is_empty(),
        "{} of {tried} operations met a rule that errored or refused namespace deletion:\n{}",
        errors.len(),
        errors.join("\n")
    );
    eprintln!("policy operations: {tried} operations on {} objects, no rule errored", fixtures.len());
}

/// The collection of `resource` in `ns`, as an API path.
fn collection(resource: &str, ns: &str) -> String {
    let group = match resource {
        "deployments" | "replicasets" | "statefulsets" | "daemonsets" => "/apis/apps/v1",
        "jobs" | "cronjobs" => "/apis/batch/v1",
        "myownshells" | "myownshellclasses" => "/apis/myownshell.io/v1alpha1",
        "networkpolicies" => "/apis/networking.k8s.io/v1",
        _ => "/api/v1",
    };
    format!("{group}/namespaces/{ns}/{resource}")
}

/// Every operation on `fixture`: (who, kubectl arguments, stdin).
fn operations(fixture: &Fixture, ns: &str) -> Vec<(String, Vec<String>, Option<String>)> {
    let name = fixture.object["metadata"]["name"].as_str().unwrap().to_owned();
    let kind = fixture.object["kind"].as_str().unwrap().to_lowercase();
    let text = fixture.object.to_string();
    let cluster_scoped = fixture.resource == "myownshellclasses";
    let at = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        if !cluster_scoped {
            all.extend(["-n".to_owned(), ns.to_owned()]);
        }
        all
    };
    let label = r#"{"metadata":{"labels":{"tried":"yes"}}}"#;
    let mut ops: Vec<(String, Vec<String>, Option<String>)> = Vec::new();
    for who in [EDITOR, fixture.maker, NAMESPACE_CONTROLLER] {
        ops.push((who.into(), at(&["create", "--dry-run=server", "-f", "-"]), Some(text.clone())));
    }
    ops.push((fixture.maker.into(), at(&["create", "-f", "-"]), Some(text.clone())));
    for who in [EDITOR, fixture.maker, "admin"] {
        ops.push((who.into(), at(&["patch", &kind, &name, "--type=merge", "-p", label, "--dry-run=server"]), None));
        ops.push((
            who.into(),
            at(&["apply", "--server-side", "--field-manager", who, "--dry-run=server", "-f", "-"]),
            Some(text.clone()),
        ));
        ops.push((
            who.into(),
            at(&[
                "patch",
                &kind,
                &name,
                "--subresource=status",
                "--type=merge",
                "-p",
                "{\"status\":{}}",
                "--dry-run=server",
            ]),
            None,
        ));
        if fixture.scale {
            ops.push((who.into(), at(&["scale", &kind, &name, "--replicas=0", "--dry-run=server"]), None));
        }
        ops.push((who.into(), at(&["delete", &kind, &name, "--dry-run=server"]), None));
    }
    ops.push((fixture.maker.into(), at(&["patch", &kind, &name, "--type=merge", "-p", label]), None));
    if !cluster_scoped {
        let collection = format!("{}?dryRun=All", collection(fixture.resource, ns));
        for who in [EDITOR, NAMESPACE_CONTROLLER] {
            ops.push((who.into(), vec!["delete".into(), "--raw".into(), collection.clone()], None));
        }
    }
    ops
}

/// The shell-network rule (`config/policy/shell_network.yaml`) as a table: what a namespace
/// editor may make in a namespace opened to shells. A policy that allows traffic and can select
/// shell pods is refused; one that rules them out (by a label they never carry, or by their
/// name or managed-by label), and any deny-only one, is let through; the operator's policies are
/// nobody else's to make, change or delete; and every answer is the same through create, a
/// merge patch and server-side apply.
#[tokio::test]
async fn an_editor_cannot_make_a_network_policy_that_opens_shells() {
    let cp = shared();
    let kubectl = cp.kubectl();
    install_policies(&kubectl).await.unwrap();
    let client = cp.client().unwrap();
    let ns = create_shell_namespace(&client, "netpol-rule").await.unwrap();
    namespace_editors(&client, &ns, &[EDITOR], &[]).await.unwrap();
    let plain_ns = myownshell_envtest::create_namespace(&client, "netpol-plain").await.unwrap();
    namespace_editors(&client, &plain_ns, &[EDITOR], &[]).await.unwrap();
    let name_key = names::LABEL_NAME;
    let managed_key = names::LABEL_MANAGED_BY;
    let allow = json!([{}]);
    // (what, name, labels, spec, admitted)
    let cases: Vec<(&str, &str, Value, Value, bool)> = vec![
        ("allow-all ingress, every pod", "p1", json!({}), json!({"podSelector": {}, "ingress": allow}), false),
        ("allow-all egress, every pod", "p2", json!({}), json!({"podSelector": {}, "egress": allow}), false),
        ("deny-all both ways", "p3", json!({}), json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}), true),
        (
            "a label shell pods never carry",
            "p4",
            json!({}),
            json!({"podSelector": {"matchLabels": {"app": "web"}}, "ingress": allow}),
            true,
        ),
        (
            "the shells' name label",
            "p5",
            json!({}),
            json!({"podSelector": {"matchLabels": {name_key: "myownshell"}}, "ingress": allow}),
            false,
        ),
        (
            "another name",
            "p6",
            json!({}),
            json!({"podSelector": {"matchLabels": {name_key: "web"}}, "ingress": allow}),
            true,
        ),
        (
            "managed-by NotIn the operator",
            "p7",
            json!({}),
            json!({"podSelector": {"matchExpressions": [{"key": managed_key, "operator": "NotIn", "values": ["myownshell-operator"]}]}, "ingress": allow}),
            true,
        ),
        (
            "name DoesNotExist",
            "p8",
            json!({}),
            json!({"podSelector": {"matchExpressions": [{"key": name_key, "operator": "DoesNotExist"}]}, "egress": allow}),
            true,
        ),
        (
            "name In, with the shells' among them",
            "p9",
            json!({}),
            json!({"podSelector": {"matchExpressions": [{"key": name_key, "operator": "In", "values": ["web", "myownshell"]}]}, "ingress": allow}),
            false,
        ),
        (
            "name In, without the shells'",
            "p10",
            json!({}),
            json!({"podSelector": {"matchExpressions": [{"key": name_key, "operator": "In", "values": ["web"]}]}, "ingress": allow}),
            true,
        ),
        (
            "managed-by NotIn something else",
            "p11",
            json!({}),
            json!({"podSelector": {"matchExpressions": [{"key": managed_key, "operator": "NotIn", "values": ["helm"]}]}, "ingress": allow}),
            false,
        ),
        (
            "another label Exists",
            "p12",
            json!({}),
            json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "ingress": allow}),
            true,
        ),
        (
            "another label DoesNotExist (shells have none)",
            "p13",
            json!({}),
            json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, "ingress": allow}),
            false,
        ),
        (
            "a class's shells by their class label",
            "p15",
            json!({}),
            json!({"podSelector": {"matchLabels": {"myownshell.io/class": "lab"}}, "ingress": allow}),
            false,
        ),
        (
            "named as the operator's, deny-only",
            "myownshell-shells",
            json!({}),
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            false,
        ),
        (
            "labelled as the operator's, deny-only",
            "p14",
            json!({managed_key: "myownshell-operator"}),
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            false,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, name, labels, spec, admitted) in &cases {
        let text = network_policy(name, labels.clone(), spec.clone()).to_string();
        for (how, args) in [
            ("create", vec!["create", "--dry-run=server", "-n", &ns, "-f", "-"]),
            ("apply", vec!["apply", "--server-side", "--dry-run=server", "-n", &ns, "-f", "-"]),
        ] {
            let out = run_as(&kubectl, EDITOR, &args, &text).await;
            let refused = out.stderr.contains("shell-network");
            if errored(&out) || out.success == refused || refused == *admitted {
                wrong.push(format!("{what} ({how}): want admitted={admitted}, got {}{}", out.stdout, out.stderr));
            }
        }
        // Outside namespaces opened to shells, everything goes.
        let args = ["create", "--dry-run=server", "-n", &plain_ns, "-f", "-"];
        let out = run_as(&kubectl, EDITOR, &args, &text).await;
        if !out.success {
            wrong.push(format!("{what}, outside shells' namespaces: {}", out.stderr));
        }
    }
    // A deny-only policy of the editor's, then opened by a merge patch: refused; deleted: fine.
    let deny = network_policy("mine", json!({}), json!({"podSelector": {}, "policyTypes": ["Ingress"]})).to_string();
    let out = run_as(&kubectl, EDITOR, &["create", "-n", &ns, "-f", "-"], &deny).await;
    assert!(out.success, "{}", out.stderr);
    let open = r#"{"spec":{"ingress":[{}]}}"#;
    let out =
        kubectl_as(&kubectl, EDITOR, AUTH, &["patch", "networkpolicy", "mine", "-n", &ns, "--type=merge", "-p", open])
            .await;
    assert!(!out.success && out.stderr.contains("would open shells past the operator's isolation"), "{}", out.stderr);
    let out = kubectl_as(&kubectl, EDITOR, AUTH, &["delete", "networkpolicy", "mine", "-n", &ns]).await;
    assert!(out.success, "{}", out.stderr);
    // The operator's own (made here by the admin): the editor neither changes nor deletes it.
    let ours = network_policy(
        "myownshell-shells",
        json!({managed_key: "myownshell-operator"}),
        json!({"podSelector": {"matchLabels": shell_labels()}, "policyTypes": ["Ingress"]}),
    )
    .to_string();
    let out = kubectl.run_with_stdin(&["create", "-n", &ns, "-f", "-"], Some(&ours)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    for args in [
        vec!["delete", "networkpolicy", "myownshell-shells", "-n", &ns],
        vec!["label", "networkpolicy", "myownshell-shells", "-n", &ns, &format!("{managed_key}-")],
    ] {
        let out = kubectl_as(&kubectl, EDITOR, AUTH, &args).await;
        assert!(!out.success && out.stderr.contains("are the MyOwnShell operator's"), "{args:?}: {}", out.stderr);
    }
    assert!(wrong.is_empty(), "{} of {} answers wrong:\n{}", wrong.len(), cases.len() * 3, wrong.join("\n"));
    eprintln!("policy operations: shell-network: {} policies each through create, apply and outside", cases.len());
}

/// kubectl `args` as `user`, with `stdin`.
async fn run_as(kubectl: &myownshell_envtest::Kubectl, user: &str, args: &[&str], stdin: &str) -> KubectlOutput {
    let mut all = myownshell_tests::access::as_user(user, AUTH);
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    kubectl.run_with_stdin(&all, Some(stdin)).await.unwrap()
}
