//! `kubectl myownshell classes`: the shell classes the user may use in the namespace, each with
//! what it offers. A class is usable when it is the default (no grant needed) or RBAC grants
//! `use` on `myownshellclasses/<name>` in the namespace, asked by SelfSubjectAccessReview as the
//! webhook asks SubjectAccessReview.

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Api;
use kube::api::{ListParams, PostParams};
use myownshell_api::{MyOwnShellClass, names};

/// One line of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The class.
    pub name: String,
    /// `yes` for the default class.
    pub default: String,
    /// Its default image, or `-`.
    pub image: String,
    /// Its most CPU and memory, or `-`.
    pub max: String,
    /// How many one user may run at once, or `-`.
    pub per_user: String,
    /// What it is for.
    pub description: String,
}

/// The line for `class`.
pub fn row(class: &MyOwnShellClass) -> Row {
    let spec = &class.spec;
    let max = spec.resources.as_ref().and_then(|r| r.max.as_ref());
    let max = max.map_or_else(
        || "-".to_owned(),
        |m| m.iter().map(|(k, v)| format!("{k}={}", v.0)).collect::<Vec<_>>().join(","),
    );
    Row {
        name: class.metadata.name.clone().unwrap_or_default(),
        default: if class.is_default() { "yes".into() } else { "-".into() },
        image: spec.images.as_ref().and_then(|i| i.default.clone()).unwrap_or_else(|| "-".into()),
        max,
        per_user: spec.max_running_per_user.map_or_else(|| "-".into(), |n| n.to_string()),
        description: spec.description.clone().unwrap_or_default(),
    }
}

/// The table, padded as kubectl pads.
pub fn render(rows: &[Row]) -> String {
    let mut lines: Vec<Vec<&str>> = vec![vec!["NAME", "DEFAULT", "IMAGE", "MAX", "PER USER", "DESCRIPTION"]];
    for r in rows {
        lines.push(vec![&r.name, &r.default, &r.image, &r.max, &r.per_user, &r.description]);
    }
    crate::table::render(&lines)
}

/// Whether the user may `use` `class` in `namespace`.
async fn may_use(client: &kube::Client, namespace: &str, class: &str) -> kube::Result<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some(names::USE_VERB.to_owned()),
                group: Some(names::GROUP.to_owned()),
                resource: Some(names::CLASS_PLURAL.to_owned()),
                name: Some(class.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let reviewed = Api::<SelfSubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &review).await?;
    Ok(reviewed.status.is_some_and(|s| s.allowed))
}

/// The classes the user may use in `namespace`, by name.
pub async fn usable(client: &kube::Client, namespace: &str) -> kube::Result<Vec<Row>> {
    let mut classes = Api::<MyOwnShellClass>::all(client.clone()).list(&ListParams::default()).await?.items;
    classes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rows = Vec::new();
    for class in &classes {
        let name = class.metadata.name.clone().unwrap_or_default();
        if class.is_default() || may_use(client, namespace, &name).await? {
            rows.push(row(class));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use myownshell_api::{ClassImages, ClassResources, MyOwnShellClassSpec};

    use super::*;

    #[test]
    fn a_class_in_a_line() {
        let mut small = MyOwnShellClass::new(
            "small",
            MyOwnShellClassSpec {
                description: Some("For everyone".into()),
                images: Some(ClassImages { allowed: None, default: Some("busybox:1.37.0".into()) }),
                resources: Some(ClassResources {
                    default: None,
                    max: Some(BTreeMap::from([
                        ("cpu".into(), Quantity("500m".into())),
                        ("memory".into(), Quantity("256Mi".into())),
                    ])),
                }),
                max_running_per_user: Some(2),
                ..MyOwnShellClassSpec::default()
            },
        );
        small.metadata.annotations = Some(BTreeMap::from([(names::DEFAULT_CLASS_ANNOTATION.into(), "true".into())]));
        let bare = MyOwnShellClass::new("bare", MyOwnShellClassSpec::default());
        assert_eq!(
            render(&[row(&small), row(&bare)]),
            "NAME    DEFAULT   IMAGE            MAX                     PER USER   DESCRIPTION\n\
             small   yes       busybox:1.37.0   cpu=500m,memory=256Mi   2          For everyone\n\
             bare    -         -                -                       -\n"
        );
    }
}
