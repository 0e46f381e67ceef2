//! The chart's templates: one file per object of the renders, grouped by what it is for.
//!
//! An object of `config/default` is there always (or under its toggle: NetworkPolicies,
//! admission policies); where `config/overlays/cert-manager` changes it, `certificates.mode`
//! picks (see merge.rs); an object only the overlay has is there in cert-manager mode; those of
//! `config/prometheus` are there under their `metrics.*` value. Then, in every object, the
//! values go where `config/default` has their defaults (image, pull policy, replicas), the
//! release's namespace where it has its namespace, Helm's labels are added, and the CRD is kept
//! on uninstall.

use serde_json::Value;

use super::merge::{Switch, merge};
use super::tree::{Entry, Node, Piece, sort};
use super::values::{self, Defaults};
use super::{emit, inputs::Inputs};

/// The annotation that makes `helm uninstall` (and an upgrade without it) leave an object.
pub const KEEP: (&str, &str) = ("helm.sh/resource-policy", "keep");
/// Said in the CRD's template, where someone would think of changing it.
const KEEP_WHY: &str = "# Kept on uninstall (helm.sh/resource-policy: keep): deleting the CRD deletes every user's
# shells. A template, not crds/, so that upgrades update it (README.md).
";
/// The labels the chart sets on every object: `managed-by` (kustomize's says `kustomize`) and
/// the chart's name and version.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const CHART_LABEL: &str = "helm.sh/chart";

/// A template: its path under `templates/` and its text.
pub struct Template {
    pub path: String,
    pub text: String,
}

/// One object of the chart, before it is written.
struct Object {
    json: Value,
    node: Node,
    gates: Vec<&'static str>,
    group: &'static str,
}

/// Every template, each starting with `header`.
pub fn templates(inputs: &Inputs, defaults: &Defaults, header: &str) -> Result<Vec<Template>, String> {
    let mut objects = from_default_and_cert_manager(inputs)?;
    objects.extend(from_prometheus(inputs)?);
    objects
        .into_iter()
        .map(|mut object| {
            shape(&mut object, defaults)?;
            let mut text = format!("{header}\n");
            if object.json["kind"] == "CustomResourceDefinition" {
                text.push_str(KEEP_WHY);
            }
            for gate in &object.gates {
                text.push_str(&format!("{{{{- if {gate} }}}}\n"));
            }
            text.push_str(&emit::document(&object.node));
            text.push_str(&"{{- end }}\n".repeat(object.gates.len()));
            Ok(Template { path: format!("{}/{}.yaml", object.group, file_name(&object.json)), text })
        })
        .collect()
}

/// The identity of an object in a render.
fn id(object: &Value) -> (&Value, &Value, &Value, &Value) {
    let meta = &object["metadata"];
    (&object["apiVersion"], &object["kind"], &meta["namespace"], &meta["name"])
}

/// The release's namespace is not the chart's to make: Helm stores the release in it before it
/// creates any object (`helm install --create-namespace`, or make it first).
fn chart_objects(render: &[Value]) -> impl Iterator<Item = &Value> {
    render.iter().filter(|o| o["kind"] != "Namespace")
}

fn from_default_and_cert_manager(inputs: &Inputs) -> Result<Vec<Object>, String> {
    let switch = Switch { alt: values::CERT_MANAGER, base: values::SELF_MANAGED };
    let find = |render: &'_ [Value], object: &Value| chart_objects(render).find(|o| id(o) == id(object)).cloned();
    let mut objects = Vec::new();
    let constrained = Switch { alt: values::CONSTRAINED, base: values::LEGACY };
    for base in chart_objects(&inputs.default) {
        let cert_manager = find(&inputs.cert_manager, base);
        let impersonation = find(&inputs.constrained_impersonation, base).filter(|o| o != base);
        let (node, mut gates) = match (cert_manager, impersonation) {
            (Some(alt), Some(_)) if alt != *base => {
                return Err(format!(
                    "both config/overlays/cert-manager and config/overlays/constrained-impersonation change {} {}: \
                     the chart has one switch per object",
                    base["kind"], base["metadata"]["name"]
                ));
            }
            (_, Some(alt)) => (merge(base, &alt, &constrained), vec![]),
            (Some(alt), None) => (merge(base, &alt, &switch), vec![]),
            (None, None) => (Node::from_json(base), vec![values::SELF_MANAGED]),
        };
        gates.extend(toggle(base));
        objects.push(Object { json: base.clone(), node, gates, group: group(base) });
    }
    for alt in chart_objects(&inputs.cert_manager).filter(|o| find(&inputs.default, o).is_none()) {
        let gates = vec![values::CERT_MANAGER];
        objects.push(Object { json: alt.clone(), node: Node::from_json(alt), gates, group: "cert-manager" });
    }
    if let Some(extra) = chart_objects(&inputs.constrained_impersonation).find(|o| find(&inputs.default, o).is_none()) {
        return Err(format!(
            "config/overlays/constrained-impersonation adds {} {}: the chart can only switch config/default's objects",
            extra["kind"], extra["metadata"]["name"]
        ));
    }
    Ok(objects)
}

/// The objects of `config/prometheus`, each under its `metrics.*` value. One that
/// `config/default` has too must be the same there.
fn from_prometheus(inputs: &Inputs) -> Result<Vec<Object>, String> {
    let mut objects = Vec::new();
    for object in chart_objects(&inputs.prometheus) {
        match chart_objects(&inputs.default).find(|o| id(o) == id(object)) {
            Some(same) if same == object => {}
            Some(_) => {
                return Err(format!(
                    "config/prometheus and config/default differ on {} {}: the chart can only add the former's objects",
                    object["kind"], object["metadata"]["name"]
                ));
            }
            None => {
                let gate =
                    if object["kind"] == "PrometheusRule" { values::PROMETHEUS_RULE } else { values::SERVICE_MONITOR };
                let node = Node::from_json(object);
                objects.push(Object { json: object.clone(), node, gates: vec![gate], group: "prometheus" });
            }
        }
    }
    Ok(objects)
}

/// The value that turns an object of `config/default` off, if any.
fn toggle(object: &Value) -> Option<&'static str> {
    match object["kind"].as_str()? {
        "NetworkPolicy" => Some(values::NETWORK_POLICY),
        "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => Some(values::ADMISSION_POLICIES),
        _ => None,
    }
}

fn group(object: &Value) -> &'static str {
    let component = object["metadata"]["labels"]["app.kubernetes.io/component"].as_str();
    match (object["kind"].as_str().unwrap_or_default(), component) {
        ("CustomResourceDefinition", _) => "crd",
        ("ServiceAccount" | "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding", _) => "rbac",
        ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration", _) => "webhook",
        ("ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding", _) => "policy",
        ("NetworkPolicy", _) => "network-policy",
        (_, Some("controller")) => "controller",
        (_, Some("webhook")) => "webhook",
        _ => "other",
    }
}

/// `kind-name`, the name without the `myownshell-` every name has; a CRD by its name alone.
fn file_name(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
    if kind == "customresourcedefinition" {
        return name.to_owned();
    }
    format!("{kind}-{}", name.strip_prefix("myownshell-").unwrap_or(name))
}

/// Values, namespace, labels and the keep policy into one object.
fn shape(object: &mut Object, defaults: &Defaults) -> Result<(), String> {
    let what = format!("{} {}", object.json["kind"], object.json["metadata"]["name"]);
    if object.json["kind"] == "Deployment" {
        let component = object.json["metadata"]["labels"]["app.kubernetes.io/component"].as_str().unwrap_or_default();
        if !values::COMPONENTS.contains(&component) {
            return Err(format!("{what}: no replicas value for component {component:?}"));
        }
        match object.node.at_mut(&["spec", "replicas"]) {
            Some(replicas @ Node::Number(_)) => *replicas = Node::Expr(values::replicas(component)),
            _ => return Err(format!("{what}: spec.replicas is not one number in every mode")),
        }
    }
    image(&mut object.node, &defaults.image).map_err(|e| format!("{what}: {e}"))?;
    labels(&mut object.node)?;
    if object.json["kind"] == "CustomResourceDefinition" {
        set(&mut object.node, &["metadata", "annotations"], KEEP.0, Node::Str(KEEP.1.to_owned()))?;
    }
    namespace(&mut object.node, &defaults.namespace).map_err(|e| format!("{what}: {e}"))
}

/// Every `image:` of the default image takes the image values, followed by the pull policy
/// when one is set.
fn image(node: &mut Node, default: &str) -> Result<(), String> {
    let mut result = Ok(());
    node.walk_mut(&mut |n| {
        let Node::Map(entries) = n else { return };
        let Some(at) = entries.iter().position(|e| e.key == "image" && e.value == Node::Str(default.to_owned())) else {
            return;
        };
        if entries.iter().any(|e| e.key == "imagePullPolicy") {
            result =
                Err("config/ sets an imagePullPolicy; the chart's image.pullPolicy would need to replace it".into());
        }
        entries[at].value = Node::Text(vec![
            Piece::Action(values::IMAGE_REPOSITORY.into()),
            Piece::Lit(":".into()),
            Piece::Action(values::IMAGE_TAG.into()),
        ]);
        let policy = Node::Text(vec![Piece::Action(values::PULL_POLICY.into())]);
        let when = Some(values::PULL_POLICY.to_owned());
        entries.insert(at + 1, Entry { key: "imagePullPolicy".into(), value: policy, when });
    });
    result
}

/// Helm's labels: `managed-by` says Helm, and `helm.sh/chart` names the chart and its version.
/// No `app.kubernetes.io/instance`: the admission policy reads that label, with
/// `app.kubernetes.io/name: myownshell`, as "a shell's", and the operator's Deployments would
/// then be guarded as shells are.
fn labels(node: &mut Node) -> Result<(), String> {
    set(node, &["metadata", "labels"], MANAGED_BY, Node::Text(vec![Piece::Action(".Release.Service".into())]))?;
    let chart = Node::Text(vec![
        Piece::Action(".Chart.Name".into()),
        Piece::Lit("-".into()),
        Piece::Action(".Chart.Version".into()),
    ]);
    set(node, &["metadata", "labels"], CHART_LABEL, chart)
}

/// Set `key` in the mapping at `path`, making the mapping if it is missing.
fn set(node: &mut Node, path: &[&str], key: &str, value: Node) -> Result<(), String> {
    let (last, parents) = path.split_last().ok_or("empty path")?;
    let parent = node.at_mut(parents).ok_or_else(|| format!("no {}", parents.join(".")))?;
    if parent.get_mut(last).is_none() {
        let Node::Map(entries) = parent else { return Err(format!("{} is not a mapping", parents.join("."))) };
        if entries.iter().any(|e| e.key == *last) {
            return Err(format!(
                "{} is there in one certificates mode only; the chart adds to it in both",
                path.join(".")
            ));
        }
        entries.push(Entry { key: (*last).to_owned(), value: Node::Map(vec![]), when: None });
        sort(entries);
    }
    let Some(Node::Map(entries)) = parent.get_mut(last) else {
        return Err(format!("{} is not a mapping", path.join(".")));
    };
    match entries.iter_mut().find(|e| e.key == key) {
        Some(entry) => entry.value = value,
        None => {
            entries.push(Entry { key: key.to_owned(), value, when: None });
            sort(entries);
        }
    }
    Ok(())
}

/// The namespace of `config/default`, wherever it is written, becomes the release's.
fn namespace(node: &mut Node, namespace: &str) -> Result<(), String> {
    let mut result = Ok(());
    node.walk_mut(&mut |n| match n {
        Node::Str(s) if s.contains(namespace) => {
            let mut pieces = Vec::new();
            for (i, part) in s.split(namespace).enumerate() {
                if i > 0 {
                    pieces.push(Piece::Action(".Release.Namespace".into()));
                }
                if !part.is_empty() {
                    pieces.push(Piece::Lit(part.to_owned()));
                }
            }
            *n = Node::Text(pieces);
        }
        Node::Map(entries) if entries.iter().any(|e| e.key.contains(namespace)) => {
            result = Err(format!("a key names the namespace {namespace}; only values can be templated"));
        }
        _ => {}
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_namespace_is_the_releases_wherever_it_is_written() {
        let mut node = Node::from_json(&json!({"a": "ns", "b": "x.ns.svc", "c": "other"}));
        namespace(&mut node, "ns").unwrap();
        assert_eq!(
            emit::document(&node),
            "a: \"{{ .Release.Namespace }}\"\nb: \"x.{{ .Release.Namespace }}.svc\"\nc: other\n"
        );
        assert!(namespace(&mut Node::from_json(&json!({"ns": 1})), "ns").is_err());
    }

    #[test]
    fn the_image_takes_the_values_and_the_pull_policy_follows_it() {
        let mut node = Node::from_json(&json!({"containers": [{"name": "c", "image": "r/i:1", "args": []}]}));
        image(&mut node, "r/i:1").unwrap();
        assert_eq!(
            emit::document(&node),
            "containers:\n  - args: []\n    image: \"{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}\"\n    {{- if .Values.image.pullPolicy }}\n    imagePullPolicy: \"{{ .Values.image.pullPolicy }}\"\n    {{- end }}\n    name: c\n"
        );
        let mut with_policy = Node::from_json(&json!({"image": "r/i:1", "imagePullPolicy": "Always"}));
        assert!(image(&mut with_policy, "r/i:1").is_err());
    }

    #[test]
    fn labels_are_added_where_there_were_none() {
        let mut node = Node::from_json(&json!({"metadata": {"name": "x"}}));
        labels(&mut node).unwrap();
        assert!(emit::document(&node).contains(
            "  labels:\n    app.kubernetes.io/managed-by: \"{{ .Release.Service }}\"\n    helm.sh/chart: \"{{ .Chart.Name }}-{{ .Chart.Version }}\"\n"
        ));
    }
}
