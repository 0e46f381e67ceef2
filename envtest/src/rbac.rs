//! RBAC objects the tests, benchmarks and `cargo xtask dev` keep needing: a ClusterRole that may
//! `get` non-resource URLs (like `config/rbac`'s `metrics-reader`) and bindings to it.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::ObjectMeta;

/// A ClusterRole allowing `get` on `urls` (e.g. `["/metrics"]`).
pub fn non_resource_reader_role(name: &str, urls: &[&str]) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(urls.iter().map(|u| (*u).to_owned()).collect()),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }
}

/// A ClusterRoleBinding of `role` to `subject`.
pub fn cluster_role_binding(name: &str, role: &str, subject: Subject) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.to_owned(),
        },
        subjects: Some(vec![subject]),
    }
}

/// The RBAC subject of a ServiceAccount.
pub fn service_account_subject(namespace: &str, name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: name.to_owned(),
        namespace: Some(namespace.to_owned()),
        ..Subject::default()
    }
}
