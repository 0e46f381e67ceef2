//! The Helm chart `dist/chart` against `config/`: it is what `cargo xtask chart` generates from
//! `config/` now (the drift check), `helm lint` passes, `helm template` of the values that
//! select a kustomize tree gives exactly that tree's objects, the other values land where they
//! should, and the apiserver accepts every combination (server-side dry run, as deploy.rs does
//! for the overlays).
//!
//! "Exactly" means: the same set of objects, each identified by apiVersion, kind, namespace and
//! name, equal field for field as JSON (key order aside, list order included), after these
//! changes on both sides and nothing else: the Namespace object is dropped (Helm keeps the
//! release in its namespace before it creates anything, so the chart cannot make it), the
//! labels `app.kubernetes.io/managed-by` (kustomize's `kustomize`, Helm's `Helm`, checked) and
//! `helm.sh/chart` (Helm's, checked) are dropped, as is the CRD's `helm.sh/resource-policy: keep`
//! (checked), and a labels or annotations map left empty by that is dropped too.
//!
//! Needs `helm`: `MYOWNSHELL_HELM` (set by `cargo xtask test`), else the one `cargo xtask chart
//! --helm` builds. Without it every helm test fails, saying so.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The generator itself, in process (the tests crate cannot depend on xtask, a binary).
#[allow(dead_code)]
#[path = "../../xtask/src/chart/mod.rs"]
mod chart;

use std::collections::BTreeMap;
use std::process::Command;

use myownshell_envtest::kustomize::render;
use myownshell_envtest::shared;
use serde_json::{Value, json};

const RELEASE: &str = "myownshell";
const NAMESPACE: &str = "myownshell-system";
const POLICY_KINDS: [&str; 2] = ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"];

fn helm(args: &[&str]) -> Result<String, String> {
    let binary = chart::helm_binary::locate().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(&binary).args(args).output().map_err(|e| format!("running {}: {e}", binary.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("helm {}: {}{stdout}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// `helm template` of the committed chart into `namespace` with `--set` values, as text.
fn template_text(namespace: &str, sets: &[&str]) -> Result<String, String> {
    let dir = chart::chart_dir();
    let mut args = vec!["template", RELEASE, dir.to_str().unwrap(), "--namespace", namespace];
    for set in sets.iter().filter(|s| !s.is_empty()) {
        args.extend(["--set", set]);
    }
    helm(&args)
}

/// The same, as objects.
fn template(namespace: &str, sets: &[&str]) -> Vec<Value> {
    let text = template_text(namespace, sets).unwrap_or_else(|e| panic!("{e}"));
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

fn kustomize(dirs: &[&str]) -> Vec<Value> {
    dirs.iter().flat_map(|dir| render(dir).unwrap_or_else(|e| panic!("{e}"))).collect()
}

/// Objects by identity, with what Helm and kustomize each add taken off (see the module doc),
/// after checking that each added what it should.
fn normalized(objects: Vec<Value>, by_helm: bool) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for mut object in objects.into_iter().filter(|o| o["kind"] != "Namespace") {
        let meta = &object["metadata"];
        let id = format!("{} {} {} {}", object["apiVersion"], object["kind"], meta["namespace"], meta["name"]);
        let labels = object.pointer_mut("/metadata/labels").and_then(Value::as_object_mut);
        let (managed_by, chart_label) =
            labels.map_or((None, None), |l| (l.remove("app.kubernetes.io/managed-by"), l.remove("helm.sh/chart")));
        if by_helm {
            assert_eq!(managed_by, Some(json!("Helm")), "{id}: managed-by");
            assert_eq!(
                chart_label,
                Some(json!(format!("myownshell-{}", env!("CARGO_PKG_VERSION")))),
                "{id}: helm.sh/chart"
            );
        } else {
            assert!(managed_by.is_none_or(|m| m == "kustomize") && chart_label.is_none(), "{id}: kustomize labels");
        }
        if object["kind"] == "CustomResourceDefinition" && by_helm {
            let annotations = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut);
            let keep = annotations.and_then(|a| a.remove(chart::objects::KEEP.0));
            assert_eq!(keep, Some(json!(chart::objects::KEEP.1)), "{id}: the CRD must be kept on uninstall");
        }
        let meta = object["metadata"].as_object_mut().unwrap();
        for key in ["labels", "annotations"] {
            if meta.get(key).and_then(Value::as_object).is_some_and(|m| m.is_empty()) {
                meta.remove(key);
            }
        }
        assert!(out.insert(id.clone(), object).is_none(), "{id} twice");
    }
    out
}

/// Fail with the first difference, in full.
fn assert_same(what: &str, helm: BTreeMap<String, Value>, kustomize: BTreeMap<String, Value>) {
    let only_helm: Vec<&String> = helm.keys().filter(|k| !kustomize.contains_key(*k)).collect();
    let only_kustomize: Vec<&String> = kustomize.keys().filter(|k| !helm.contains_key(*k)).collect();
    assert!(
        only_helm.is_empty() && only_kustomize.is_empty(),
        "{what}: only in helm template: {only_helm:?}; only in kustomize: {only_kustomize:?}"
    );
    for (id, object) in &helm {
        assert!(
            object == &kustomize[id],
            "{what}: {id} differs\nhelm template:\n{}\nkustomize:\n{}",
            serde_json::to_string_pretty(object).unwrap(),
            serde_json::to_string_pretty(&kustomize[id]).unwrap()
        );
    }
}

#[test]
fn the_committed_chart_is_what_config_generates() {
    let files = chart::generate().unwrap_or_else(|e| panic!("generating the chart: {e}"));
    let drift = chart::drift(&chart::chart_dir(), &files).unwrap();
    assert!(drift.is_empty(), "{} drifted from config/: run `cargo xtask chart`\n{drift}", chart::CHART_DIR);
    for file in &files {
        // values.schema.json says it in its `$comment`, the first key.
        let top: String = file.contents.lines().take(2).collect();
        assert!(top.contains(chart::HEADER), "{} does not start with the generated-file header: {top}", file.path);
    }
}

#[test]
fn helm_lint_passes_in_every_mode() {
    let dir = chart::chart_dir();
    for sets in [
        "certificates.mode=self-managed",
        "certificates.mode=cert-manager,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true",
        "admissionPolicies.enabled=false,networkPolicy.enabled=false,image.pullPolicy=Never",
        "gateway.impersonation=constrained,certificates.mode=cert-manager",
    ] {
        let out = helm(&["lint", "--strict", dir.to_str().unwrap(), "--namespace", NAMESPACE, "--set", sets])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.contains("0 chart(s) failed"), "{sets}: {out}");
    }
}

#[test]
fn the_defaults_render_config_default() {
    assert_same(
        "defaults vs config/default",
        normalized(template(NAMESPACE, &[]), true),
        normalized(kustomize(&["default"]), false),
    );
}

#[test]
fn cert_manager_mode_renders_the_cert_manager_overlay() {
    assert_same(
        "certificates.mode=cert-manager vs config/overlays/cert-manager",
        normalized(template(NAMESPACE, &["certificates.mode=cert-manager"]), true),
        normalized(kustomize(&["overlays/cert-manager"]), false),
    );
}

#[test]
fn constrained_impersonation_renders_its_overlay() {
    assert_same(
        "gateway.impersonation=constrained vs config/overlays/constrained-impersonation",
        normalized(template(NAMESPACE, &["gateway.impersonation=constrained"]), true),
        normalized(kustomize(&["overlays/constrained-impersonation"]), false),
    );
}

/// The metrics values add `config/prometheus`, its PrometheusRule only with
/// `prometheusRule.enabled` (as its `without-rules` component leaves it out).
#[test]
fn the_metrics_values_add_config_prometheus() {
    let with_rules = kustomize(&["default", "prometheus"]);
    assert!(with_rules.iter().any(|o| o["kind"] == "ServiceMonitor"), "config/prometheus has no ServiceMonitor");
    let without_rules: Vec<Value> = with_rules.iter().filter(|o| o["kind"] != "PrometheusRule").cloned().collect();
    assert_same(
        "metrics.serviceMonitor.enabled vs config/default + config/prometheus without its rules",
        normalized(template(NAMESPACE, &["metrics.serviceMonitor.enabled=true"]), true),
        normalized(without_rules, false),
    );
    assert_same(
        "both metrics values vs config/default + config/prometheus",
        normalized(
            template(NAMESPACE, &["metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true"]),
            true,
        ),
        normalized(with_rules, false),
    );
}

/// Turning the policies or the NetworkPolicies off takes those objects away and changes
/// nothing else.
#[test]
fn the_toggles_take_only_their_objects() {
    let defaults = normalized(template(NAMESPACE, &[]), true);
    let without = |kinds: &[&str]| -> BTreeMap<String, Value> {
        defaults
            .iter()
            .filter(|(_, o)| !kinds.iter().any(|k| o["kind"] == *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_same(
        "admissionPolicies.enabled=false",
        normalized(template(NAMESPACE, &["admissionPolicies.enabled=false"]), true),
        without(&POLICY_KINDS),
    );
    assert_same(
        "networkPolicy.enabled=false",
        normalized(template(NAMESPACE, &["networkPolicy.enabled=false"]), true),
        without(&["NetworkPolicy"]),
    );
}

/// Image, pull policy and replicas go into the three Deployments; another namespace replaces
/// `myownshell-system` everywhere, inside strings too.
#[test]
fn values_land_where_config_has_their_defaults() {
    let objects = template(
        "elsewhere",
        &[
            "image.repository=localhost/myownshell,image.tag=local,image.pullPolicy=Never,controller.replicas=3,webhook.replicas=2,gateway.replicas=0",
        ],
    );
    let deployments: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Deployment").collect();
    assert_eq!(deployments.len(), 3);
    for deployment in deployments {
        let component = deployment["metadata"]["labels"]["app.kubernetes.io/component"].as_str().unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "localhost/myownshell:local", "{component}");
        assert_eq!(container["imagePullPolicy"], "Never", "{component}");
        let replicas = match component {
            "controller" => 3,
            "webhook" => 2,
            _ => 0,
        };
        assert_eq!(deployment["spec"]["replicas"], replicas, "{component}");
        assert_eq!(deployment["metadata"]["namespace"], "elsewhere");
    }
    let text =
        template_text("elsewhere", &["certificates.mode=cert-manager,metrics.serviceMonitor.enabled=true"]).unwrap();
    assert!(!text.contains(NAMESPACE), "{NAMESPACE} left in a chart installed elsewhere:\n{text}");
    assert!(text.contains("\"elsewhere/myownshell-serving-cert\""), "the CA is injected from elsewhere: {text}");
    assert!(text.contains("myownshell-webhook-service.elsewhere.svc"), "{text}");
}

#[test]
fn the_schema_refuses_what_the_chart_does_not_know() {
    for (set, says) in [
        ("certificates.mode=vault", "value must be one of 'self-managed', 'cert-manager'"),
        ("webhook.replica=2", "additional properties 'replica' not allowed"),
        ("image.pullPolicy=Sometimes", "value must be one of"),
        ("controller.replicas=-1", "minimum"),
        ("gateway.impersonation=none", "value must be one of 'legacy', 'constrained'"),
    ] {
        let err = template_text(NAMESPACE, &[set]).unwrap_err();
        assert!(err.contains(says), "{set}: {err}");
    }
}

/// Stand-ins for the Prometheus Operator's CRDs: the real group, kinds and version, with
/// schemas that accept anything (as tests/fixtures/cert-manager-crds.yaml does for cert-manager).
const MONITORING_CRDS: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
 "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
  "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors", "singular": "servicemonitor"},
  "versions": [{"name": "v1", "served": true, "storage": true,
   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}},
{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
 "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
  "names": {"kind": "PrometheusRule", "listKind": "PrometheusRuleList", "plural": "prometheusrules", "singular": "prometheusrule"},
  "versions": [{"name": "v1", "served": true, "storage": true,
   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}]}"#;

/// The CRDs the chart's objects need besides its own, established.
async fn foreign_crds() {
    let kubectl = shared().kubectl();
    let cert_manager = myownshell_envtest::assets::workspace_root().join("tests/fixtures/cert-manager-crds.yaml");
    kubectl.run(&["apply", "-f", cert_manager.to_str().unwrap()]).await.unwrap().ok().unwrap();
    kubectl.run_with_stdin(&["apply", "-f", "-"], Some(MONITORING_CRDS)).await.unwrap().ok().unwrap();
    let names = "crd/issuers.cert-manager.io crd/certificates.cert-manager.io crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com";
    let mut args = vec!["wait", "--for=condition=Established", "--timeout=30s"];
    args.extend(names.split(' '));
    kubectl.run(&args).await.unwrap().ok().unwrap();
}

#[tokio::test]
async fn the_apiserver_accepts_every_combination() {
    foreign_crds().await;
    let kubectl = shared().kubectl();
    for namespace in [NAMESPACE, "chart-elsewhere"] {
        let manifest = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n");
        kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&manifest)).await.unwrap().ok().unwrap();
    }
    for (namespace, sets) in [
        (NAMESPACE, ""),
        (
            NAMESPACE,
            "certificates.mode=cert-manager,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true",
        ),
        (NAMESPACE, "metrics.serviceMonitor.enabled=true,admissionPolicies.enabled=false,networkPolicy.enabled=false"),
        (
            "chart-elsewhere",
            "certificates.mode=cert-manager,image.pullPolicy=Never,webhook.replicas=2,controller.replicas=0,gateway.impersonation=constrained",
        ),
    ] {
        let manifest = template_text(namespace, &[sets]).unwrap();
        let out = kubectl.run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&manifest)).await.unwrap();
        assert!(out.success, "{namespace} {sets}: {}", out.stderr);
    }
}

/// `classes` in the values: one MyOwnShellClass each, the default one annotated, accepted by the
/// apiserver against the class CRD; the samples of `config/samples/classes` as well.
#[tokio::test]
async fn classes_come_from_the_values() {
    let classes = r#"classes=[{"name":"chart-small","default":true,"spec":{"description":"small","images":{"allowed":["busybox:1.37.0"],"default":"busybox:1.37.0"},"resources":{"max":{"cpu":"500m"}},"maxRunningPerUser":2}},{"name":"chart-bare"}]"#;
    let dir = chart::chart_dir();
    let args = ["template", RELEASE, dir.to_str().unwrap(), "--namespace", NAMESPACE, "--set-json", classes];
    let text = helm(&args).unwrap_or_else(|e| panic!("{e}"));
    let objects: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let made: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "MyOwnShellClass").collect();
    assert_eq!(made.len(), 2, "{text}");
    assert_eq!(made[0]["metadata"]["annotations"]["myownshell.io/is-default-class"], "true");
    assert_eq!(made[0]["spec"]["maxRunningPerUser"], 2);
    assert!(made[1]["metadata"]["annotations"].is_null());
    let manifest: Vec<String> = made.iter().map(|o| serde_json::to_string(o).unwrap()).collect();
    let kubectl = shared().kubectl();
    let out =
        kubectl.run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&manifest.join("\n"))).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    let samples = myownshell_envtest::assets::workspace_root().join("config/samples/classes");
    for sample in ["small.yaml", "team.yaml"] {
        let path = samples.join(sample);
        let out = kubectl.run(&["apply", "--dry-run=server", "-f", path.to_str().unwrap()]).await.unwrap();
        assert!(out.success, "{sample}: {}", out.stderr);
    }
    let err = helm(&[&args[..5], &["--set-json", r#"classes=[{"nom":"x"}]"#]].concat()).unwrap_err();
    assert!(
        err.contains("additional properties 'nom' not allowed") || err.contains("missing property 'name'"),
        "{err}"
    );
}
