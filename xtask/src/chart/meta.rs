//! The chart's files besides its object templates: `Chart.yaml`, `.helmignore`, the notes Helm
//! prints after an install or upgrade, and the chart's README.

use super::values::Defaults;

/// The oldest Kubernetes the chart installs on: ValidatingAdmissionPolicy v1 is 1.30's.
pub const KUBE_VERSION: &str = ">=1.30.0-0";

/// `Chart.yaml`: named after the project, versioned as the workspace.
pub fn chart_yaml(d: &Defaults, header: &str) -> String {
    format!(
        "{header}
apiVersion: v2
name: myownshell
description: \"On-demand shell pods for Kubernetes users: the MyOwnShell CRD, admission webhook and controller\"
type: application
version: {version}
appVersion: \"{version}\"
kubeVersion: \"{KUBE_VERSION}\"
",
        version = d.version
    )
}

pub fn helmignore(header: &str) -> String {
    format!("{header}\n.DS_Store\n.git/\n.gitignore\n*.swp\n*.bak\n*.tmp\n*.orig\n*~\n.idea/\n.vscode/\n")
}

/// The labels `config/` gives the namespace for Pod Security, as `kubectl label` arguments.
fn namespace_labels(d: &Defaults) -> String {
    d.namespace_labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// `templates/NOTES.txt`, printed after `helm install` and `helm upgrade`.
pub fn notes(d: &Defaults, header: &str) -> Result<String, String> {
    fill(include_str!("NOTES.txt.in"), &[("HEADER", header), ("NAMESPACE_LABELS", &namespace_labels(d))])
}

/// The chart's README: how to install it, what each value does and why the chart is as it is.
pub fn readme(d: &Defaults, header: &str) -> Result<String, String> {
    let tag = if d.tag.is_empty() { format!("`\"\"` (appVersion, {})", d.version) } else { format!("`{}`", d.tag) };
    let rule = if d.prometheus_rule {
        "the PrometheusRule of `config/prometheus` (alerts)"
    } else {
        "no effect yet: `config/prometheus` has no PrometheusRule"
    };
    fill(
        include_str!("README.md.in"),
        &[
            ("HEADER", header),
            ("NAMESPACE", &d.namespace),
            ("NAMESPACE_LABELS", &namespace_labels(d)),
            ("KUBE_VERSION", KUBE_VERSION),
            ("REPOSITORY", &d.repository),
            ("TAG", &tag),
            ("CONTROLLER_REPLICAS", &d.replicas[0].to_string()),
            ("WEBHOOK_REPLICAS", &d.replicas[1].to_string()),
            ("GATEWAY_REPLICAS", &d.replicas[2].to_string()),
            ("PROMETHEUS_RULE", rule),
        ],
    )
}

/// `template` with every `@NAME@` replaced by its value; a placeholder left over (a name
/// without a value) is an error.
pub fn fill(template: &str, values: &[(&str, &str)]) -> Result<String, String> {
    let mut out = template.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("@{name}@"), value);
    }
    let left = out
        .split('@')
        .skip(1)
        .step_by(2)
        .find(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
    match left {
        Some(name) => Err(format!("no value for @{name}@")),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_or_refused() {
        assert_eq!(fill("a @X@ b @X@", &[("X", "1")]).unwrap(), "a 1 b 1");
        assert!(fill("a @Y@", &[("X", "1")]).is_err());
        assert_eq!(fill("mail a@b.c", &[]).unwrap(), "mail a@b.c");
    }
}
