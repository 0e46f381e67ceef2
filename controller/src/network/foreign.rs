//! Policies of others that open shells ([`opens_shells`]): the rule of
//! `config/policy/shell_network.yaml`, as a pure function, for the policies admission never saw
//! (made before their namespace was opened to shells, or by an administrator). NetworkPolicies
//! add up, so such a policy opens the shells it selects whatever the operator's says, and the
//! operator never changes a policy it does not own: it tells (a Warning Event on the policy,
//! reason `NetworkPolicyOpensShells`, and its log) for an administrator to act on.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use myownshell_api::names;

/// The labels every shell pod carries, and nothing else does for it: a selector that requires
/// any other label cannot select a shell pod (nobody but Kubernetes' controllers changes a shell
/// pod's labels, `config/policy/shell_workloads.yaml`).
const SHELL_KEYS: [&str; 5] =
    [names::LABEL_NAME, names::LABEL_INSTANCE, names::LABEL_MANAGED_BY, "pod-template-hash", names::LABEL_CLASS];

/// The value a shell pod has for `key`, where the rule looks at it.
fn shell_value(key: &str) -> Option<&'static str> {
    match key {
        names::LABEL_NAME => Some(names::LABEL_NAME_VALUE),
        names::LABEL_MANAGED_BY => Some(names::LABEL_MANAGED_BY_VALUE),
        _ => None,
    }
}

/// Whether `policy` allows traffic (a rule in `ingress` or `egress`) and its podSelector can
/// select shell pods: what the admission rule refuses.
pub fn opens_shells(policy: &NetworkPolicy) -> bool {
    let Some(spec) = &policy.spec else { return false };
    let allows =
        spec.ingress.as_ref().is_some_and(|r| !r.is_empty()) || spec.egress.as_ref().is_some_and(|r| !r.is_empty());
    allows && !excludes_shells(spec.pod_selector.as_ref())
}

fn excludes_shells(selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>) -> bool {
    let Some(selector) = selector else { return false };
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .any(|(k, v)| !SHELL_KEYS.contains(&k.as_str()) || shell_value(k).is_some_and(|shell| shell != v));
    by_labels || selector.match_expressions.iter().flatten().any(excludes)
}

/// Whether one requirement rules shell pods out.
fn excludes(e: &LabelSelectorRequirement) -> bool {
    let values = e.values.as_deref().unwrap_or_default();
    if !SHELL_KEYS.contains(&e.key.as_str()) {
        return e.operator == "In" || e.operator == "Exists";
    }
    let Some(shell) = shell_value(&e.key) else { return false };
    let holds = values.iter().any(|v| v == shell);
    match e.operator.as_str() {
        "DoesNotExist" => true,
        "NotIn" => holds,
        "In" => !holds,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// The table of `tests/tests/policy_operations.rs`'s shell-network test: (what, spec, opens).
    #[test]
    fn the_admission_rule_as_a_function() {
        let (name, managed) = (names::LABEL_NAME, names::LABEL_MANAGED_BY);
        let allow = json!([{}]);
        let cases: Vec<(&str, Value, bool)> = vec![
            ("allow-all ingress, every pod", json!({"podSelector": {}, "ingress": allow}), true),
            ("allow-all egress, every pod", json!({"podSelector": {}, "egress": allow}), true),
            ("deny-all both ways", json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}), false),
            (
                "a label shell pods never carry",
                json!({"podSelector": {"matchLabels": {"app": "web"}}, "ingress": allow}),
                false,
            ),
            (
                "the shells' name label",
                json!({"podSelector": {"matchLabels": {name: "myownshell"}}, "ingress": allow}),
                true,
            ),
            ("another name", json!({"podSelector": {"matchLabels": {name: "web"}}, "ingress": allow}), false),
            (
                "managed-by NotIn the operator",
                json!({"podSelector": {"matchExpressions": [{"key": managed, "operator": "NotIn", "values": ["myownshell-operator"]}]}, "ingress": allow}),
                false,
            ),
            (
                "name DoesNotExist",
                json!({"podSelector": {"matchExpressions": [{"key": name, "operator": "DoesNotExist"}]}, "egress": allow}),
                false,
            ),
            (
                "name In, with the shells' among them",
                json!({"podSelector": {"matchExpressions": [{"key": name, "operator": "In", "values": ["web", "myownshell"]}]}, "ingress": allow}),
                true,
            ),
            (
                "name In, without the shells'",
                json!({"podSelector": {"matchExpressions": [{"key": name, "operator": "In", "values": ["web"]}]}, "ingress": allow}),
                false,
            ),
            (
                "managed-by NotIn something else",
                json!({"podSelector": {"matchExpressions": [{"key": managed, "operator": "NotIn", "values": ["helm"]}]}, "ingress": allow}),
                true,
            ),
            (
                "another label Exists",
                json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "ingress": allow}),
                false,
            ),
            (
                "another label DoesNotExist (shells have none)",
                json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, "ingress": allow}),
                true,
            ),
            (
                "a class's shells by their class label",
                json!({"podSelector": {"matchLabels": {"myownshell.io/class": "lab"}}, "ingress": allow}),
                true,
            ),
            ("no spec", Value::Null, false),
        ];
        for (what, spec, want) in cases {
            let policy: NetworkPolicy =
                serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap();
            assert_eq!(opens_shells(&policy), want, "{what}");
        }
    }
}
