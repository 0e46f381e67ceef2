//! The chart's values: their names and the conditions the templates test, their defaults (read
//! from the renders, so that the defaults render `config/default`), `values.yaml` with what each
//! one does, and `values.schema.json`, which Helm checks every install, upgrade, template and
//! lint against (a mistyped key or an unknown mode fails instead of being ignored).

use serde_json::{Value, json};

use super::emit;
use super::inputs::Inputs;
use super::tree::Node;

/// Cert-manager issues the certificates (`config/overlays/cert-manager`).
pub const CERT_MANAGER: &str = r#"eq .Values.certificates.mode "cert-manager""#;
/// The webhook makes its own (`config/default`).
pub const SELF_MANAGED: &str = r#"ne .Values.certificates.mode "cert-manager""#;
/// The gateway impersonates with constrained impersonation
/// (`config/overlays/constrained-impersonation`).
pub const CONSTRAINED: &str = r#"eq .Values.gateway.impersonation "constrained""#;
/// With the `impersonate` verb (`config/default`).
pub const LEGACY: &str = r#"ne .Values.gateway.impersonation "constrained""#;
pub const SERVICE_MONITOR: &str = ".Values.metrics.serviceMonitor.enabled";
pub const PROMETHEUS_RULE: &str = ".Values.metrics.prometheusRule.enabled";
pub const ADMISSION_POLICIES: &str = ".Values.admissionPolicies.enabled";
pub const NETWORK_POLICY: &str = ".Values.networkPolicy.enabled";
pub const IMAGE_REPOSITORY: &str = ".Values.image.repository";
/// An empty tag is the chart's appVersion, the release it was generated for.
pub const IMAGE_TAG: &str = ".Values.image.tag | default .Chart.AppVersion";
pub const PULL_POLICY: &str = ".Values.image.pullPolicy";
/// The Deployments, by their `app.kubernetes.io/component` label: each has its `replicas`.
pub const COMPONENTS: [&str; 3] = ["controller", "webhook", "gateway"];

/// `.Values.<component>.replicas`.
pub fn replicas(component: &str) -> String {
    format!(".Values.{component}.replicas")
}

/// What the defaults are, and the facts of `config/` the chart's texts mention.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// The workspace version: the chart's version and appVersion.
    pub version: String,
    /// The image every Deployment runs in `config/default`.
    pub image: String,
    pub repository: String,
    /// Empty when the image's tag is [`Defaults::version`].
    pub tag: String,
    /// Replicas of each of [`COMPONENTS`], in order.
    pub replicas: [i64; 3],
    /// The namespace `config/default` installs into (the chart uses the release's).
    pub namespace: String,
    /// The `pod-security.kubernetes.io/*` labels `config/` gives that namespace.
    pub namespace_labels: Vec<(String, String)>,
    /// Whether `config/prometheus` has a PrometheusRule.
    pub prometheus_rule: bool,
}

/// Read the defaults from the renders.
pub fn defaults(inputs: &Inputs, version: &str) -> Result<Defaults, String> {
    let namespaces: Vec<&Value> = inputs.default.iter().filter(|o| o["kind"] == "Namespace").collect();
    let [namespace] = namespaces[..] else {
        return Err(format!("config/default renders {} Namespaces; the chart expects one", namespaces.len()));
    };
    let namespace_labels = namespace["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("pod-security.kubernetes.io/"))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect::<Vec<_>>();
    if namespace_labels.is_empty() {
        return Err("config/default's Namespace has no pod-security.kubernetes.io labels, which the chart's \
                    README and NOTES tell users to set: update xtask/src/chart/*.in"
            .into());
    }
    let image = the_image(&inputs.default)?;
    let (repository, tag) = split_image(&image)?;
    let tag = if tag == version { String::new() } else { tag.to_owned() };
    let [controller, webhook, gateway] = COMPONENTS.map(|c| deployment_replicas(&inputs.default, c));
    let replicas = [controller?, webhook?, gateway?];
    Ok(Defaults {
        version: version.to_owned(),
        repository: repository.to_owned(),
        image,
        tag,
        replicas,
        namespace: namespace["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
        namespace_labels,
        prometheus_rule: inputs.prometheus.iter().any(|o| o["kind"] == "PrometheusRule"),
    })
}

/// The one image every container of every Deployment runs.
fn the_image(objects: &[Value]) -> Result<String, String> {
    let mut images: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .flat_map(|d| d["spec"]["template"]["spec"]["containers"].as_array().into_iter().flatten())
        .filter_map(|c| c["image"].as_str())
        .collect();
    images.sort_unstable();
    images.dedup();
    match images[..] {
        [image] => Ok(image.to_owned()),
        _ => {
            Err(format!("the chart's image value expects one image in config/default's Deployments, found {images:?}"))
        }
    }
}

/// `registry/repo:tag` → (`registry/repo`, `tag`).
pub fn split_image(image: &str) -> Result<(&str, &str), String> {
    match image.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') && !repository.contains('@') => Ok((repository, tag)),
        _ => Err(format!("image {image:?} has no tag (or a digest): the chart's values need repository:tag")),
    }
}

fn deployment_replicas(objects: &[Value], component: &str) -> Result<i64, String> {
    objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["labels"]["app.kubernetes.io/component"] == component)
        .and_then(|d| d["spec"]["replicas"].as_i64())
        .ok_or_else(|| {
            format!("config/default has no Deployment labelled app.kubernetes.io/component={component} with replicas")
        })
}

/// `values.yaml`: every value with its default and what it does.
pub fn values_yaml(d: &Defaults, header: &str) -> Result<String, String> {
    let rule = if d.prometheus_rule {
        "The alerts: the PrometheusRule of config/prometheus, for the Prometheus Operator."
    } else {
        "No effect yet: config/prometheus has no PrometheusRule."
    };
    let scalar = |s: &str| emit::inline(&Node::Str(s.to_owned())).unwrap_or_default();
    super::meta::fill(
        include_str!("values.yaml.in"),
        &[
            ("HEADER", header),
            ("REPOSITORY", &scalar(&d.repository)),
            ("TAG", &scalar(&d.tag)),
            ("VERSION", &d.version),
            ("CONTROLLER_REPLICAS", &d.replicas[0].to_string()),
            ("WEBHOOK_REPLICAS", &d.replicas[1].to_string()),
            ("GATEWAY_REPLICAS", &d.replicas[2].to_string()),
            ("PROMETHEUS_RULE", rule),
        ],
    )
}

/// `values.schema.json`.
pub fn schema_json(header: &str) -> String {
    let object = |properties: Value| json!({"type": "object", "additionalProperties": false, "properties": properties});
    let enabled = || object(json!({"enabled": {"type": "boolean"}}));
    let replicas = || object(json!({"replicas": {"type": "integer", "minimum": 0}}));
    let mut schema = object(json!({
        "image": object(json!({
            "repository": {"type": "string", "minLength": 1},
            "tag": {"type": "string"},
            "pullPolicy": {"type": "string", "enum": ["", "Always", "IfNotPresent", "Never"]},
        })),
        "controller": replicas(),
        "webhook": replicas(),
        "gateway": object(json!({
            "replicas": {"type": "integer", "minimum": 0},
            "impersonation": {"type": "string", "enum": ["legacy", "constrained"]},
        })),
        "certificates": object(json!({"mode": {"type": "string", "enum": ["self-managed", "cert-manager"]}})),
        "metrics": object(json!({"serviceMonitor": enabled(), "prometheusRule": enabled()})),
        "admissionPolicies": enabled(),
        "classes": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "default": {"type": "boolean"},
                    "spec": {"type": "object"},
                },
            },
        },
        "networkPolicy": enabled(),
        // Helm's own, set for every chart.
        "global": {"type": "object"},
    }));
    schema["$comment"] = json!(header);
    let mut text = serde_json::to_string_pretty(&sorted(schema)).unwrap_or_default();
    text.push('\n');
    text
}

/// Keys in byte order at every level, whether serde_json keeps insertion order (its
/// `preserve_order` feature) or sorts: the same text from every build.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_split_at_the_tag() {
        assert_eq!(split_image("ghcr.io/a/b:0.1.0").unwrap(), ("ghcr.io/a/b", "0.1.0"));
        assert_eq!(split_image("localhost:5000/b:dev").unwrap(), ("localhost:5000/b", "dev"));
        assert!(split_image("localhost:5000/b").is_err());
        assert!(split_image("b@sha256:abc").is_err());
    }
}
