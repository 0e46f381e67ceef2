//! The `config/` tree: every overlay renders, the apiserver accepts it (server-side dry run),
//! RBAC grants exactly what each binary needs, and the webhook configurations point where the
//! webhook actually listens.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use myownshell_api::names;
use myownshell_envtest::kustomize::{as_list, find, of_kind, render};
use myownshell_envtest::{eventually, shared};
use serde_json::Value;

const SYSTEM_NAMESPACE: &str = "myownshell-system";
const OVERLAYS: [&str; 6] = [
    "default",
    "overlays/dev",
    "overlays/production",
    "overlays/cert-manager",
    "overlays/local",
    "overlays/constrained-impersonation",
];

async fn ensure_system_namespace() {
    let client = shared().client().unwrap();
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(SYSTEM_NAMESPACE.into()), ..ObjectMeta::default() },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client)
        .patch(SYSTEM_NAMESPACE, &PatchParams::apply("deploy-test"), &Patch::Apply(&ns))
        .await
        .unwrap();
}

fn deployment_args(objects: &[Value], name: &str) -> Vec<String> {
    let dep = find(objects, "Deployment", name).unwrap();
    dep["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_tree_renders() {
    let trees = ["crd", "rbac", "manager", "webhook", "prometheus", "network-policy", "samples", "samples/classes"];
    for dir in OVERLAYS.iter().chain(&trees) {
        let objects = render(dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(!objects.is_empty(), "{dir} rendered nothing");
    }
}

#[test]
fn overlays_shape_the_deployments() {
    let replicas =
        |objects: &[Value], name: &str| find(objects, "Deployment", name).unwrap()["spec"]["replicas"].as_i64();
    let default = render("default").unwrap();
    let dev = render("overlays/dev").unwrap();
    let prod = render("overlays/production").unwrap();
    let certm = render("overlays/cert-manager").unwrap();

    assert!(deployment_args(&default, "myownshell-controller-manager").contains(&"--leader-elect".to_owned()));
    assert!(!deployment_args(&dev, "myownshell-controller-manager").contains(&"--leader-elect".to_owned()));
    assert!(deployment_args(&prod, "myownshell-controller-manager").contains(&"--leader-elect".to_owned()));
    for name in ["myownshell-controller-manager", "myownshell-webhook"] {
        assert_eq!(replicas(&dev, name), Some(1), "{name} in dev");
        assert_eq!(replicas(&prod, name), Some(2), "{name} in production");
        let pod = &find(&prod, "Deployment", name).unwrap()["spec"]["template"]["spec"];
        assert!(pod["affinity"]["podAntiAffinity"].is_object(), "{name} needs anti-affinity in production");
        assert!(pod["containers"][0]["resources"]["limits"]["memory"].is_string());
    }
    // The controller's and the webhook's (the production overlay), and the gateway's (config/gateway).
    assert_eq!(of_kind(&prod, "PodDisruptionBudget").len(), 3);
    assert_eq!(of_kind(&default, "NetworkPolicy").len(), 3);
    assert!(of_kind(&dev, "NetworkPolicy").is_empty(), "dev has no network policies");
    // Namespaces with shells get theirs from the controller (controller/src/network/), which may
    // write them.
    let role = find(&default, "ClusterRole", "myownshell-controller-role").unwrap();
    let rules = role["rules"].as_array().unwrap();
    assert!(
        rules.iter().any(|r| r["resources"] == serde_json::json!(["networkpolicies"])
            && ["create", "patch", "delete", "watch"]
                .iter()
                .all(|v| r["verbs"].as_array().unwrap().contains(&serde_json::json!(v)))),
        "{rules:?}"
    );

    // cert-manager: files from the Secret, CA injected by cainjector.
    assert!(deployment_args(&certm, "myownshell-webhook").iter().any(|a| a.starts_with("--cert-dir=")));
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
        let cfg = &of_kind(&certm, kind)[0];
        assert_eq!(
            cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "myownshell-system/myownshell-serving-cert"
        );
    }
    // Both binaries serve metrics with the cert-manager certificate that config/prometheus
    // verifies scrapes against.
    let metrics_cert = find(&certm, "Certificate", "myownshell-metrics-cert").unwrap();
    let monitors = render("prometheus").unwrap();
    for monitor in of_kind(&monitors, "ServiceMonitor") {
        let tls = &monitor["spec"]["endpoints"][0]["tlsConfig"];
        assert_eq!(tls["ca"]["secret"]["name"], metrics_cert["spec"]["secretName"]);
        assert!(tls.get("insecureSkipVerify").is_none());
        let server_name = tls["serverName"].as_str().unwrap();
        assert!(metrics_cert["spec"]["dnsNames"].as_array().unwrap().iter().any(|n| n == server_name), "{server_name}");
    }
    for name in ["myownshell-controller-manager", "myownshell-webhook"] {
        assert!(deployment_args(&certm, name).iter().any(|a| a.starts_with("--metrics-cert-path=")), "{name}");
    }
    let cert = find(&certm, "Certificate", "myownshell-serving-cert").unwrap();
    let volumes = &find(&certm, "Deployment", "myownshell-webhook").unwrap()["spec"]["template"]["spec"]["volumes"];
    assert_eq!(volumes[0]["secret"]["secretName"], cert["spec"]["secretName"]);
}

/// Both Deployments run the one operator image: the release tag in every overlay but `local`,
/// which points at the locally built image and never pulls. (The webhook once kept the
/// unqualified `myownshell:latest`, which a real node would have tried to pull from Docker Hub.)
/// An install whose binaries make their own metrics certificates adds the component
/// `config/prometheus/self-signed`: the ServiceMonitors then skip verification (there is no CA
/// to check a per-pod self-signed certificate against) and name no CA Secret that would not exist.
#[test]
fn the_self_signed_component_lets_scrapes_through_without_a_ca() {
    let dir = myownshell_envtest::assets::target_dir().join("tmp/prometheus-self-signed");
    std::fs::create_dir_all(&dir).unwrap();
    let config = myownshell_envtest::assets::workspace_root().join("config");
    let relative = |p: &str| {
        let depth = dir.strip_prefix(myownshell_envtest::assets::workspace_root()).unwrap().components().count();
        format!("{}config/{p}", "../".repeat(depth))
    };
    assert!(config.join("prometheus/self-signed/kustomization.yaml").exists());
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [{}]\ncomponents: [{}]\n",
        relative("prometheus"),
        relative("prometheus/self-signed")
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    let objects = render(dir.to_str().unwrap()).unwrap();
    let monitors = of_kind(&objects, "ServiceMonitor");
    assert_eq!(monitors.len(), 2);
    for monitor in monitors {
        let tls = &monitor["spec"]["endpoints"][0]["tlsConfig"];
        assert_eq!(tls["insecureSkipVerify"], true, "{tls}");
        assert!(tls.get("ca").is_none(), "{tls}");
        assert!(tls["serverName"].is_string());
    }
}

#[test]
fn every_deployment_runs_the_operator_image() {
    for dir in OVERLAYS {
        let objects = render(dir).unwrap();
        for dep in of_kind(&objects, "Deployment") {
            let name = dep["metadata"]["name"].as_str().unwrap();
            let container = &dep["spec"]["template"]["spec"]["containers"][0];
            let (image, policy) = match dir {
                "overlays/local" => ("localhost/myownshell:local", Some("Never")),
                "overlays/dev" => ("ghcr.io/myownshell/myownshell:dev", None),
                _ => ("ghcr.io/myownshell/myownshell:0.1.0", None),
            };
            assert_eq!(container["image"], image, "{dir}/{name}");
            assert_eq!(container["imagePullPolicy"].as_str(), policy, "{dir}/{name}");
        }
    }
}

#[test]
fn pods_are_locked_down() {
    for dir in OVERLAYS {
        let objects = render(dir).unwrap();
        for dep in of_kind(&objects, "Deployment") {
            let name = dep["metadata"]["name"].as_str().unwrap();
            let pod = &dep["spec"]["template"]["spec"];
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{dir}/{name}");
            assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{dir}/{name}");
            let c = &pod["containers"][0];
            assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{dir}/{name}");
            assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false, "{dir}/{name}");
            assert_eq!(c["securityContext"]["capabilities"]["drop"], serde_json::json!(["ALL"]), "{dir}/{name}");
            assert!(c["livenessProbe"].is_object() && c["readinessProbe"].is_object(), "{dir}/{name} probes");
            assert!(c["resources"]["requests"].is_object() && c["resources"]["limits"].is_object(), "{dir}/{name}");
        }
    }
}

#[test]
fn rbac_has_no_wildcards() {
    for dir in OVERLAYS.iter().chain(&["prometheus"]) {
        for object in render(dir).unwrap() {
            let Some(rules) = object["rules"].as_array() else { continue };
            for rule in rules {
                for key in ["apiGroups", "resources", "verbs", "nonResourceURLs", "resourceNames"] {
                    for value in rule[key].as_array().into_iter().flatten() {
                        assert!(
                            !value.as_str().unwrap_or_default().contains('*'),
                            "{dir}: wildcard in {}: {rule}",
                            object["metadata"]["name"]
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn webhook_configurations_point_at_what_the_webhook_serves() {
    let objects = render("default").unwrap();
    let service = find(&objects, "Service", "myownshell-webhook-service").unwrap();
    let deployment = find(&objects, "Deployment", "myownshell-webhook").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args = deployment_args(&objects, "myownshell-webhook");
    let port_flag: i64 = args.iter().find_map(|a| a.strip_prefix("--webhook-port=")).unwrap().parse().unwrap();

    // Service port → targetPort (a named container port) → containerPort == --webhook-port.
    let service_port = &service["spec"]["ports"][0];
    let target = service_port["targetPort"].as_str().unwrap();
    let container_port = container["ports"].as_array().unwrap().iter().find(|p| p["name"] == target).unwrap();
    assert_eq!(container_port["containerPort"].as_i64(), Some(port_flag));
    // The Service selects the webhook pods.
    let selector = service["spec"]["selector"].as_object().unwrap();
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in selector {
        assert_eq!(&pod_labels[k], v, "service selector {k}");
    }

    // The MyOwnShell webhooks: fail closed, never for DELETE.
    for (kind, name, path) in [
        ("MutatingWebhookConfiguration", "myownshell-mutating-webhook-configuration", names::MUTATE_PATH),
        ("ValidatingWebhookConfiguration", "myownshell-validating-webhook-configuration", names::VALIDATE_PATH),
    ] {
        let cfg = find(&objects, kind, name).unwrap();
        let hooks = cfg["webhooks"].as_array().unwrap();
        let connect_gate = |h: &&serde_json::Value| h["clientConfig"]["service"]["path"] == names::CONNECT_PATH;
        for hook in hooks.iter().filter(|h| !connect_gate(h)) {
            let svc = &hook["clientConfig"]["service"];
            assert_eq!(svc["name"], service["metadata"]["name"], "{name}");
            assert_eq!(svc["namespace"], SYSTEM_NAMESPACE, "{name}");
            assert_eq!(svc["port"], service_port["port"], "{name}");
            assert_eq!(svc["path"], path, "{name}");
            assert_eq!(hook["sideEffects"], "None");
            assert_eq!(hook["failurePolicy"], "Fail");
            assert_eq!(hook["matchPolicy"], "Equivalent");
            assert_eq!(hook["admissionReviewVersions"], serde_json::json!(["v1"]));
            assert!(hook["timeoutSeconds"].as_i64().unwrap() <= 5);
            assert!(hook["clientConfig"].get("caBundle").is_none(), "caBundle is left for the webhook to inject");
            for rule in hook["rules"].as_array().unwrap() {
                let ops: BTreeSet<&str> =
                    rule["operations"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
                assert_eq!(ops, BTreeSet::from(["CREATE", "UPDATE"]), "{name}: DELETE must never reach the webhook");
            }
        }
    }
    // The connect gate: its own path, `Fail` in namespaces opened to shells (and `Ignore` where
    // shells may not be), side effects skipped on dry runs, no DELETE either.
    let mutating = find(&objects, "MutatingWebhookConfiguration", "myownshell-mutating-webhook-configuration").unwrap();
    let connect =
        mutating["webhooks"].as_array().unwrap().iter().find(|h| h["name"] == "connect.myownshell.io").unwrap();
    assert_eq!(connect["clientConfig"]["service"]["path"], names::CONNECT_PATH);
    assert_eq!(connect["clientConfig"]["service"]["name"], service["metadata"]["name"]);
    // The gate fails closed, only where shells may be.
    assert_eq!(connect["failurePolicy"], "Fail");
    assert_eq!(connect["namespaceSelector"], serde_json::json!({"matchLabels": {"myownshell.io/shells": "enabled"}}));
    assert_eq!(connect["sideEffects"], "NoneOnDryRun");
    assert!(connect.get("objectSelector").is_none(), "a CONNECT's object is the options: no selector can match it");
    // Where shells may not be, the same gate never holds anything up; together the two cover
    // every namespace but the system ones, each exactly once.
    let unopened = mutating["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "connect-unopened.myownshell.io")
        .unwrap();
    assert_eq!(unopened["failurePolicy"], "Ignore");
    assert_eq!(unopened["clientConfig"]["service"]["path"], names::CONNECT_PATH);
    assert_eq!((&unopened["rules"], &unopened["matchConditions"]), (&connect["rules"], &connect["matchConditions"]));
    let expressions = unopened["namespaceSelector"]["matchExpressions"].as_array().unwrap();
    assert_eq!(
        expressions[0],
        serde_json::json!({"key": "myownshell.io/shells", "operator": "NotIn", "values": ["enabled"]})
    );
    let ops: BTreeSet<&str> = connect["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["operations"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()))
        .collect();
    assert_eq!(ops, BTreeSet::from(["CONNECT", "UPDATE"]));
    // Its policies: cluster-wide and bound to what they are called after the prefix.
    for (policy, binding) in [
        ("myownshell-services-proxy", "myownshell-services-proxy"),
        ("myownshell-shell-workloads", "myownshell-shell-workloads"),
    ] {
        find(&objects, "ValidatingAdmissionPolicy", policy).unwrap();
        let bound = find(&objects, "ValidatingAdmissionPolicyBinding", binding).unwrap();
        assert_eq!(bound["spec"]["policyName"], policy);
        assert_eq!(bound["spec"]["validationActions"], serde_json::json!(["Deny"]));
    }
}

#[tokio::test]
async fn the_apiserver_accepts_every_overlay() {
    ensure_system_namespace().await;
    let cp = shared();
    // cert-manager's CRDs, minimal, from our own fixtures.
    let fixtures = myownshell_envtest::assets::workspace_root().join("tests/fixtures/cert-manager-crds.yaml");
    cp.kubectl().run(&["apply", "-f", fixtures.to_str().unwrap()]).await.unwrap().ok().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cp.client().unwrap());
    for name in ["issuers.cert-manager.io", "certificates.cert-manager.io"] {
        eventually(&format!("{name} established"), std::time::Duration::from_secs(30), || {
            let crds = crds.clone();
            async move {
                let crd = crds.get(name).await.map_err(|e| e.to_string())?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established { Ok(()) } else { Err("not established".into()) }
            }
        })
        .await
        .unwrap();
    }
    for dir in OVERLAYS {
        let path = myownshell_envtest::assets::workspace_root().join("config").join(dir);
        let out = cp.kubectl().run(&["apply", "--dry-run=server", "-k", path.to_str().unwrap()]).await.unwrap();
        assert!(out.success, "{dir}: {}", out.stderr);
    }
}

/// One `kubectl auth can-i` question and the answer RBAC must give.
struct CanI {
    service_account: &'static str,
    args: &'static [&'static str],
    allowed: bool,
}

const CAN_I: &[CanI] = &[
    // controller: its resources, cluster-wide, and nothing else
    CanI {
        service_account: "myownshell-controller",
        args: &["list", "myownshells.myownshell.io", "-A"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["watch", "myownshells.myownshell.io", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["patch", "myownshells.myownshell.io", "--subresource=status", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["update", "myownshells.myownshell.io", "--subresource=finalizers", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["create", "deployments.apps", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["delete", "deployments.apps", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["create", "events.events.k8s.io", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["update", "leases.coordination.k8s.io", "-n", SYSTEM_NAMESPACE],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["create", "tokenreviews.authentication.k8s.io"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["create", "subjectaccessreviews.authorization.k8s.io"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["get", "secrets", "-n", SYSTEM_NAMESPACE],
        allowed: false,
    },
    CanI { service_account: "myownshell-controller", args: &["get", "secrets", "-n", "team-a"], allowed: false },
    CanI {
        service_account: "myownshell-controller",
        args: &["create", "myownshells.myownshell.io", "-n", "team-a"],
        allowed: false,
    },
    // controller: deletes a shell stopped longer than its lifetime.deletePausedAfter.
    CanI {
        service_account: "myownshell-controller",
        args: &["delete", "myownshells.myownshell.io", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-controller",
        args: &["update", "leases.coordination.k8s.io", "-n", "team-a"],
        allowed: false,
    },
    CanI { service_account: "myownshell-controller", args: &["create", "pods", "-n", "team-a"], allowed: false },
    CanI {
        service_account: "myownshell-controller",
        args: &["patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io"],
        allowed: false,
    },
    // controller: watches nodes (a shell on a node that is down says so) and namespaces (none
    // is written into one being deleted), and changes neither.
    CanI { service_account: "myownshell-controller", args: &["watch", "nodes"], allowed: true },
    CanI { service_account: "myownshell-controller", args: &["patch", "nodes"], allowed: false },
    CanI { service_account: "myownshell-controller", args: &["watch", "namespaces"], allowed: true },
    CanI { service_account: "myownshell-controller", args: &["delete", "namespaces"], allowed: false },
    // webhook: its Secret and its two configurations, by name
    CanI { service_account: "myownshell-webhook", args: &["create", "secrets", "-n", SYSTEM_NAMESPACE], allowed: true },
    CanI {
        service_account: "myownshell-webhook",
        args: &["get", "secrets/myownshell-webhook-server-cert", "-n", SYSTEM_NAMESPACE],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &["update", "secrets/myownshell-webhook-server-cert", "-n", SYSTEM_NAMESPACE],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &[
            "patch",
            "mutatingwebhookconfigurations.admissionregistration.k8s.io/myownshell-mutating-webhook-configuration",
        ],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &[
            "patch",
            "validatingwebhookconfigurations.admissionregistration.k8s.io/myownshell-validating-webhook-configuration",
        ],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &["create", "subjectaccessreviews.authorization.k8s.io"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &["get", "secrets/other", "-n", SYSTEM_NAMESPACE],
        allowed: false,
    },
    CanI { service_account: "myownshell-webhook", args: &["list", "secrets", "-n", SYSTEM_NAMESPACE], allowed: false },
    CanI {
        service_account: "myownshell-webhook",
        args: &["get", "secrets/myownshell-webhook-server-cert", "-n", "team-a"],
        allowed: false,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &["patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/someone-elses"],
        allowed: false,
    },
    CanI { service_account: "myownshell-webhook", args: &["list", "deployments.apps", "-A"], allowed: false },
    CanI {
        service_account: "myownshell-webhook",
        args: &["create", "deployments.apps", "-n", "team-a"],
        allowed: false,
    },
    // webhook: who may connect to a shell (every MyOwnShell), and the record of connections
    // (lastConnection, Events); nothing else of the shells or their pods.
    CanI { service_account: "myownshell-webhook", args: &["watch", "myownshells.myownshell.io", "-A"], allowed: true },
    CanI {
        service_account: "myownshell-webhook",
        args: &["patch", "myownshells.myownshell.io", "--subresource=status", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &["create", "events.events.k8s.io", "-n", "team-a"],
        allowed: true,
    },
    CanI {
        service_account: "myownshell-webhook",
        args: &["update", "myownshells.myownshell.io", "-n", "team-a"],
        allowed: false,
    },
    CanI { service_account: "myownshell-webhook", args: &["get", "pods", "-n", "team-a"], allowed: false },
    // controller: watches the shells' pods, cleanup waits for a deleted shell's pods (and
    // deletes an orphan).
    CanI { service_account: "myownshell-controller", args: &["watch", "pods", "-n", "team-a"], allowed: true },
    CanI { service_account: "myownshell-controller", args: &["list", "pods", "-n", "team-a"], allowed: true },
    CanI { service_account: "myownshell-controller", args: &["delete", "pods", "-n", "team-a"], allowed: true },
    CanI { service_account: "myownshell-controller", args: &["create", "pods/exec", "-n", "team-a"], allowed: false },
    CanI {
        service_account: "myownshell-webhook",
        args: &["get", "leases.coordination.k8s.io", "-n", SYSTEM_NAMESPACE],
        allowed: false,
    },
];

/// Apply the RBAC objects of the default tree for real, once per test binary (two tests
/// creating the same objects at once would race each other into AlreadyExists).
async fn apply_rbac() {
    static APPLIED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    APPLIED.get_or_init(apply_rbac_once).await;
}

async fn apply_rbac_once() {
    ensure_system_namespace().await;
    let objects = render("default").unwrap();
    let rbac: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                .contains(&o["kind"].as_str().unwrap_or_default())
        })
        .collect();
    let out = shared().kubectl().run_with_stdin(&["apply", "-f", "-"], Some(&as_list(&rbac))).await.unwrap();
    assert!(out.success, "{}", out.stderr);
}

#[tokio::test]
async fn rbac_answers_match_the_expected_table() {
    apply_rbac().await;
    let kubectl = shared().kubectl();
    let mut wrong = Vec::new();
    for case in CAN_I {
        let who = format!("--as=system:serviceaccount:{SYSTEM_NAMESPACE}:{}", case.service_account);
        let mut args = vec!["auth", "can-i", who.as_str()];
        args.extend_from_slice(case.args);
        let out = kubectl.run(&args).await.unwrap();
        let answer = out.stdout.trim();
        let want = if case.allowed { "yes" } else { "no" };
        if answer != want {
            wrong.push(format!(
                "{} {}: got {answer:?} ({}), want {want}",
                case.service_account,
                case.args.join(" "),
                out.stderr.trim()
            ));
        }
    }
    assert!(wrong.is_empty(), "RBAC answers differ from the table:\n{}", wrong.join("\n"));
}

#[tokio::test]
async fn aggregated_user_roles_reach_edit_and_view() {
    apply_rbac().await;
    let objects = render("default").unwrap();
    let editor = find(&objects, "ClusterRole", "myownshell-editor").unwrap();
    assert_eq!(editor["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
    let viewer = find(&objects, "ClusterRole", "myownshell-viewer").unwrap();
    assert_eq!(viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true");
    let reader = find(&objects, "ClusterRole", "myownshell-metrics-reader").unwrap();
    assert_eq!(reader["rules"], serde_json::json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]));
}

/// The controller's proof of ownership (`status.deploymentUID`) holds only while users cannot
/// write the status: the shipped user role lets them manage their shells, not the status (nor
/// Deployments).
#[tokio::test]
async fn the_user_role_cannot_write_status() {
    apply_rbac().await;
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = myownshell_envtest::create_namespace(&client, "user-role").await.unwrap();
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "alice-edits-shells", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "myownshell-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    });
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(client, &ns);
    bindings.create(&Default::default(), &serde_json::from_value(binding).unwrap()).await.unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["create", "myownshells.myownshell.io"], "yes"),
        (&["patch", "myownshells.myownshell.io", "--subresource=scale"], "yes"),
        (&["patch", "myownshells.myownshell.io", "--subresource=status"], "no"),
        (&["update", "myownshells.myownshell.io", "--subresource=status"], "no"),
        (&["create", "deployments.apps"], "no"),
    ];
    for (args, want) in cases {
        let mut full = vec!["auth", "can-i", "--as=alice", "-n", &ns];
        full.extend_from_slice(args);
        let out = cp.kubectl().run(&full).await.unwrap();
        assert_eq!(out.stdout.trim(), want, "alice {}: {}", args.join(" "), out.stderr);
    }
}
