//! Labels on everything the controller creates for a `MyOwnShell`, and the selector that finds
//! its pods.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use myownshell_api::names;
use sha2::{Digest, Sha256};

/// Kubernetes caps label values at 63 characters.
pub const MAX_LABEL_VALUE: usize = 63;
/// Hex characters of the name's SHA-256 kept in a shortened instance label.
const HASH_CHARS: usize = 10;

/// The `app.kubernetes.io/instance` value for a `MyOwnShell` name.
///
/// Object names may be up to 253 characters but label values only 63. A longer name becomes its
/// first 52 characters, `_`, and 10 hex characters of its SHA-256: stable across restarts (the
/// Deployment selector is immutable, so it must never change), readable, and unique in practice.
/// The `_` makes it collision-free against short names: label values may hold it, object names
/// (DNS subdomains) never do, so no name used as it is can equal a shortened one (with `-`, a
/// 63-character name could be spelled to equal another object's shortened label, and the two
/// Deployments would select each other's pods). Every use of the instance label goes through
/// this function, so they always agree.
pub fn instance_value(name: &str) -> String {
    if name.len() <= MAX_LABEL_VALUE {
        return name.to_owned();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hash: String = digest.iter().map(|b| format!("{b:02x}")).collect::<String>().chars().take(HASH_CHARS).collect();
    // Object names are ASCII (DNS subdomains), so a byte index is a char boundary.
    let prefix = &name[..MAX_LABEL_VALUE - HASH_CHARS - 1];
    format!("{prefix}{SHORTENED_SEPARATOR}{hash}")
}

/// Whether the instance label of `name` could already be another Deployment's: true only for
/// names of 63 characters or more. A longer name's label is shortened to a prefix and a 40-bit
/// hash, which another long name can share (by chance, or by someone searching for one); a name
/// of exactly 63 characters is used as it is, and can equal the shortened label an earlier
/// release gave a longer name (with `-`, before the `_`). Shorter names are their own label and
/// collide with nothing, so only these need the apiserver asked before their Deployment is made.
pub fn may_share_instance(name: &str) -> bool {
    name.len() >= MAX_LABEL_VALUE
}

/// Between the kept prefix and the hash of a shortened instance label: a character that label
/// values allow and object names do not.
const SHORTENED_SEPARATOR: char = '_';

/// The instance value of the `MyOwnShell` `name` whose Deployment is `live`: the one `live`
/// already selects on, if it exists, else [`instance_value`]. A Deployment's selector is
/// immutable, so an existing Deployment keeps the value it was created with: one made before
/// shortened values took the `_` (they had a `-`) stays as it is instead of failing every apply.
pub fn instance_for(name: &str, live: Option<&Deployment>) -> String {
    live.and_then(selected_instance).map_or_else(|| instance_value(name), str::to_owned)
}

/// The instance value `deployment`'s selector matches on, if any.
pub fn selected_instance(deployment: &Deployment) -> Option<&str> {
    deployment.spec.as_ref()?.selector.match_labels.as_ref()?.get(names::LABEL_INSTANCE).map(String::as_str)
}

/// The labels selecting the shell pods of one instance. The name label is included next to
/// the instance label so the selector cannot match another application's pods that happen to
/// use the same instance value (Helm sets `app.kubernetes.io/instance` to its release name).
pub fn selector_labels(instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (names::LABEL_NAME.to_owned(), names::LABEL_NAME_VALUE.to_owned()),
        (names::LABEL_INSTANCE.to_owned(), instance.to_owned()),
    ])
}

/// All labels put on the Deployment and its pod template.
pub fn labels(instance: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels(instance);
    labels.insert(names::LABEL_MANAGED_BY.to_owned(), names::LABEL_MANAGED_BY_VALUE.to_owned());
    labels
}

/// `labels` with the class label ([`names::LABEL_CLASS`]) of the class `class`, if any: on the
/// pod template, so that the operator's NetworkPolicies can select a class's shells. Shortened
/// as the instance label is ([`instance_value`]): class names may be longer than a label value.
pub fn with_class(mut labels: BTreeMap<String, String>, class: Option<&str>) -> BTreeMap<String, String> {
    if let Some(class) = class {
        labels.insert(names::LABEL_CLASS.to_owned(), class_value(class));
    }
    labels
}

/// The class label's value for the class `name`.
pub fn class_value(name: &str) -> String {
    instance_value(name)
}

/// The selector in the string form `status.selector` (and so the scale subresource) uses.
pub fn selector_string(instance: &str) -> String {
    selector_labels(instance).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// Everything the operator labels as a shell's (Deployments, ReplicaSets, pods): the name label
/// and the managed-by label, whatever the instance. The standing sweep lists these.
pub fn shell_objects_selector() -> String {
    format!("{}={},{}", names::LABEL_NAME, names::LABEL_NAME_VALUE, managed_by_selector())
}

/// The label selector the controller's Deployment watch uses.
pub fn managed_by_selector() -> String {
    format!("{}={}", names::LABEL_MANAGED_BY, names::LABEL_MANAGED_BY_VALUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_valid_label_value(v: &str) -> bool {
        v.len() <= MAX_LABEL_VALUE
            && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && v.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
            && v.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
    }

    #[test]
    fn instance_values() {
        let long_a = "a".repeat(64);
        let long_b = format!("{}b", "a".repeat(63));
        let dotted = format!("team.{}", "x".repeat(80));
        let cases: [(&str, Option<&str>); 5] =
            [("shell", Some("shell")), ("a", Some("a")), (&"s".repeat(63), None), (&long_a, None), (&dotted, None)];
        for (name, want) in cases {
            let got = instance_value(name);
            assert!(is_valid_label_value(&got), "{name:?} -> {got:?} is not a label value");
            if let Some(want) = want {
                assert_eq!(got, want);
            }
            if name.len() <= MAX_LABEL_VALUE {
                assert_eq!(got, name, "short names are used as they are");
            } else {
                assert_eq!(got.len(), MAX_LABEL_VALUE);
                assert!(got.starts_with(&name[..52]), "{got}");
            }
            assert_eq!(got, instance_value(name), "stable");
        }
        assert_ne!(instance_value(&long_a), instance_value(&long_b), "names sharing a prefix stay distinct");
    }

    #[test]
    fn no_name_used_as_it_is_equals_a_shortened_one() {
        // A 63-character name spelled as another object's shortened label (the old `-` layout).
        let long = format!("team-{}", "x".repeat(80));
        let shortened = instance_value(&long);
        let hash = &shortened[MAX_LABEL_VALUE - HASH_CHARS..];
        let lookalike = format!("{}-{hash}", &long[..52]);
        assert_eq!(lookalike.len(), MAX_LABEL_VALUE);
        assert_ne!(instance_value(&lookalike), shortened, "a 63-character name cannot take a long name's label");
        assert!(shortened.contains('_') && !lookalike.contains('_'), "{shortened} vs {lookalike}");
    }

    #[test]
    fn only_names_of_63_characters_or_more_may_share_an_instance_label() {
        let cases = [(1, false), (62, false), (63, true), (64, true), (253, true)];
        for (len, want) in cases {
            let name = "a".repeat(len);
            assert_eq!(may_share_instance(&name), want, "{len} characters");
            // The rule follows from the label: a shorter name is its own label.
            assert_eq!(instance_value(&name) == name && len < MAX_LABEL_VALUE, !want, "{len} characters");
        }
    }

    #[test]
    fn selector_and_labels() {
        assert_eq!(selector_string("web"), "app.kubernetes.io/instance=web,app.kubernetes.io/name=myownshell");
        let labels = labels("web");
        assert_eq!(labels.get("app.kubernetes.io/managed-by").map(String::as_str), Some("myownshell-operator"));
        assert_eq!(labels.len(), 3);
        assert!(selector_labels("web").iter().all(|(k, v)| labels.get(k) == Some(v)), "pods match the selector");
        assert_eq!(managed_by_selector(), "app.kubernetes.io/managed-by=myownshell-operator");
        let classed = with_class(labels.clone(), Some("lab"));
        assert_eq!(classed.get("myownshell.io/class").map(String::as_str), Some("lab"));
        assert_eq!(with_class(labels.clone(), None), labels, "no class, no label");
        let long = "c".repeat(100);
        assert_eq!(with_class(labels, Some(&long)).get("myownshell.io/class"), Some(&instance_value(&long)));
    }

    #[test]
    fn an_existing_deployment_keeps_the_instance_it_selects_on() {
        let long = format!("team-{}", "x".repeat(80));
        let with_selector = |instance: &str| Deployment {
            spec: Some(k8s_openapi::api::apps::v1::DeploymentSpec {
                selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some(selector_labels(instance)),
                    match_expressions: None,
                },
                ..Default::default()
            }),
            ..Deployment::default()
        };
        let legacy = format!("{}-{}", &long[..52], "0123456789");
        let cases = [
            ("no Deployment yet: the current form", None, instance_value(&long)),
            ("created before '_': kept", Some(with_selector(&legacy)), legacy.clone()),
            ("created with the current form", Some(with_selector(&instance_value(&long))), instance_value(&long)),
            ("no selector at all: the current form", Some(Deployment::default()), instance_value(&long)),
        ];
        for (what, live, want) in cases {
            assert_eq!(instance_for(&long, live.as_ref()), want, "{what}");
        }
    }
}
