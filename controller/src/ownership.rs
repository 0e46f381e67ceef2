//! Whether a Deployment is this controller's to write and delete.
//!
//! The rule: the Deployment named like a `MyOwnShell` is ours if
//! 1. it has a controller ownerReference to that `MyOwnShell`'s kind and uid, or
//! 2. it has no controller ownerReference at all and its uid is the one the `MyOwnShell`'s
//!    `status.deploymentUID` records (the controller writes it after creating the Deployment).
//!
//! Anything else (no reference and no recorded uid, another controller's reference, a
//! reference to an earlier object of the same name) is foreign: never written, never deleted.
//!
//! Why this cannot be spoofed by a user who may only create Deployments (and `MyOwnShell`s):
//! putting a reference on an *existing* Deployment needs `update` on it, which already lets that
//! user rewrite it, so (1) only ever matches Deployments the user could write anyway. (2) rests
//! on two things no such user controls: a Deployment's uid is assigned by the apiserver, and
//! `status` is written only through the status subresource, which the shipped RBAC grants to
//! the controller alone. Labels and `managedFields` are deliberately not part of the rule: both
//! can be set by anyone who creates a Deployment.

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use myownshell_api::{MyOwnShell, names};

/// How a Deployment relates to the `MyOwnShell` it is named after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Controlled by this `MyOwnShell` through its ownerReference.
    Owned,
    /// Ours by the uid recorded in the status, but its ownerReference was removed: the next
    /// apply restores it.
    LostReference,
    /// Not ours: leave it alone.
    Foreign,
}

impl Ownership {
    /// Whether the controller may write and delete the Deployment.
    pub fn is_ours(self) -> bool {
        self != Ownership::Foreign
    }
}

/// Classify `deployment` against `shell` by the rule in this module's documentation.
pub fn of(deployment: &Deployment, shell: &MyOwnShell) -> Ownership {
    let controller = deployment.owner_references().iter().find(|o| o.controller == Some(true));
    match controller {
        Some(o) if o.kind == names::KIND && Some(o.uid.as_str()) == shell.metadata.uid.as_deref() => Ownership::Owned,
        Some(_) => Ownership::Foreign,
        None => {
            let recorded = shell.status.as_ref().and_then(|s| s.deployment_uid.as_deref());
            if recorded.is_some() && recorded == deployment.metadata.uid.as_deref() {
                Ownership::LostReference
            } else {
                Ownership::Foreign
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use myownshell_api::{MyOwnShellSpec, MyOwnShellStatus};

    use super::*;

    fn reference(kind: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "myownshell.io/v1alpha1".into(),
            kind: kind.into(),
            name: "web".into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn ownership_cases() {
        let shell = |recorded: Option<&str>| {
            let mut s = MyOwnShell::new("web", MyOwnShellSpec::default());
            s.metadata.uid = Some("shell-uid".into());
            s.status = Some(MyOwnShellStatus { deployment_uid: recorded.map(Into::into), ..Default::default() });
            s
        };
        let deployment = |refs: Vec<OwnerReference>| {
            let mut d = Deployment::default();
            d.metadata.name = Some("web".into());
            d.metadata.uid = Some("deploy-uid".into());
            d.metadata.owner_references = (!refs.is_empty()).then_some(refs);
            d
        };
        let cases = [
            (
                "our controller reference",
                deployment(vec![reference("MyOwnShell", "shell-uid", Some(true))]),
                None,
                Ownership::Owned,
            ),
            (
                "our reference and the recorded uid",
                deployment(vec![reference("MyOwnShell", "shell-uid", Some(true))]),
                Some("deploy-uid"),
                Ownership::Owned,
            ),
            ("no reference, uid recorded", deployment(vec![]), Some("deploy-uid"), Ownership::LostReference),
            ("no reference, nothing recorded", deployment(vec![]), None, Ownership::Foreign),
            ("no reference, another uid recorded", deployment(vec![]), Some("older-deploy"), Ownership::Foreign),
            (
                "a reference to an earlier object of the same name",
                deployment(vec![reference("MyOwnShell", "earlier-uid", Some(true))]),
                Some("deploy-uid"),
                Ownership::Foreign,
            ),
            (
                "another controller's reference, even with the recorded uid",
                deployment(vec![reference("ReplicaSet", "shell-uid", Some(true))]),
                Some("deploy-uid"),
                Ownership::Foreign,
            ),
            (
                "our uid, but not as controller",
                deployment(vec![reference("MyOwnShell", "shell-uid", None)]),
                None,
                Ownership::Foreign,
            ),
            (
                "a non-controller reference beside the recorded uid",
                deployment(vec![reference("ConfigMap", "cm-uid", Some(false))]),
                Some("deploy-uid"),
                Ownership::LostReference,
            ),
        ];
        for (what, d, recorded, want) in cases {
            assert_eq!(of(&d, &shell(recorded)), want, "{what}");
        }
        assert!(Ownership::Owned.is_ours() && Ownership::LostReference.is_ours() && !Ownership::Foreign.is_ours());
    }
}
