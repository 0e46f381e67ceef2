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
