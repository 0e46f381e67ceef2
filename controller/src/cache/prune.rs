//! What the controller's caches keep of an object: only what reconcile reads. managedFields
//! (often half of an object) and annotations (but the controller's own) are dropped before objects reach the watch stores,
//! the read-your-writes overlays and the packed Deployment cache, which all call these.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Resource;

use crate::deployment::{CLASS_TEMPLATE_ANNOTATION, OWN_SPEC_ANNOTATION, SPEC_HASH_ANNOTATION};
use crate::life::rollout::{TEMPLATE_APPLIED_ANNOTATION, TEMPLATE_HASH_ANNOTATION};

/// Drop what reconcile never reads from a cached `MyOwnShell`, in the JSON the watch delivered
/// (which is what the cache packs: the typed shell's own serialization would cut the sub-second
/// times a user writes into the spec, as `updateRequestedAt`, to seconds).
pub fn prune_shell(shell: &mut serde_json::Value) {
    if let Some(meta) = shell.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
        for field in ["managedFields", "annotations", "labels"] {
            meta.remove(field);
        }
    }
}

/// Drop what reconcile never reads from a cached Deployment. The spec stays, less the fields the
/// apiserver fills with its defaults and the desired Deployment never sets (a fifth of the
/// text): it is compared with the desired one to skip applies that would change nothing, and
/// that comparison looks only at the fields the desired one has (`deployment::needs_apply`).
pub fn prune_deployment(deployment: &mut Deployment) {
    let meta = deployment.meta_mut();
    meta.managed_fields = None;
    // The creation time stays: it is when the template of a Deployment made before
    // `TEMPLATE_APPLIED_ANNOTATION` existed was applied (`rollout::applied_at`).
    if let Some(annotations) = meta.annotations.as_mut() {
        let kept = [
            SPEC_HASH_ANNOTATION,
            TEMPLATE_HASH_ANNOTATION,
            TEMPLATE_APPLIED_ANNOTATION,
            OWN_SPEC_ANNOTATION,
            CLASS_TEMPLATE_ANNOTATION,
        ];
        annotations.retain(|k, _| kept.contains(&k.as_str()));
    }
    let Some(spec) = deployment.spec.as_mut() else { return };
    spec.progress_deadline_seconds = None;
    spec.revision_history_limit = None;
    // The apiserver's default (RollingUpdate and its parameters) goes; a shell with a home sets
    // `Recreate` (`home::mount::recreate`), and its desired Deployment is compared with this one:
    // pruned, every reconcile of a shell with a home applied its Deployment again and told an
    // `Updated` Event (`cargo xtask bench controller --homes`: 8 applies per shell converging,
    // 2 writes per shell after a restart that must write nothing).
    if spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) != Some("Recreate") {
        spec.strategy = None;
    }
    let Some(pod) = spec.template.spec.as_mut() else { return };
    pod.dns_policy = None;
    pod.restart_policy = None;
    pod.scheduler_name = None;
    for container in &mut pod.containers {
        container.image_pull_policy = None;
        container.termination_message_path = None;
        container.termination_message_policy = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use myownshell_api::{MyOwnShell, MyOwnShellSpec};

    use super::*;

    #[test]
    fn pruning_keeps_what_reconcile_reads() {
        let mut shell = MyOwnShell::new("web", MyOwnShellSpec { size: Some(2), ..MyOwnShellSpec::default() });
        shell.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        shell.metadata.annotations =
            Some(BTreeMap::from([("kubectl.kubernetes.io/last-applied-configuration".into(), "{…}".into())]));
        shell.metadata.labels = Some(BTreeMap::from([("team".into(), "a".into())]));
        shell.metadata.finalizers = Some(vec!["myownshell.io/finalizer".into()]);
        shell.metadata.generation = Some(4);
        let mut json = serde_json::to_value(&shell).unwrap();
        prune_shell(&mut json);
        let shell: MyOwnShell = serde_json::from_value(json).unwrap();
        assert_eq!(shell.metadata.managed_fields, None);
        assert_eq!(shell.metadata.annotations, None);
        assert_eq!(shell.metadata.labels, None);
        assert_eq!(
            shell.metadata.finalizers,
            Some(vec!["myownshell.io/finalizer".into()]),
            "the finalizer helper reads them"
        );
        assert_eq!(shell.metadata.generation, Some(4));
        assert_eq!(shell.spec.size, Some(2));

        let mut d = Deployment::default();
        d.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        d.metadata.annotations = Some(BTreeMap::from([
            (SPEC_HASH_ANNOTATION.into(), "abc".into()),
            ("deployment.kubernetes.io/revision".into(), "3".into()),
        ]));
        prune_deployment(&mut d);
        assert_eq!(d.metadata.managed_fields, None);
        assert_eq!(d.metadata.annotations, Some(BTreeMap::from([(SPEC_HASH_ANNOTATION.into(), "abc".into())])));
    }

    #[test]
    fn pruning_never_drops_a_field_the_desired_deployment_sets() {
        let full = MyOwnShellSpec {
            size: Some(3),
            image: Some("registry.example.com/tools:1".into()),
            command: Some(vec!["sleep".into(), "infinity".into()]),
            resources: Some(myownshell_api::defaults::resources()),
            ..MyOwnShellSpec::default()
        };
        // With a home: `Recreate`, which the apiserver's default is not (pruned once, and every
        // reconcile of such a shell applied its Deployment again).
        let home = MyOwnShellSpec { home: Some(myownshell_api::Home::default()), ..MyOwnShellSpec::default() };
        for spec in [MyOwnShellSpec::default(), full, home] {
            let mut shell = MyOwnShell::new("web", spec);
            shell.metadata.namespace = Some("ns".into());
            shell.metadata.uid = Some("u1".into());
            let want = crate::deployment::desired(&shell, None).unwrap();
            let mut pruned = want.clone();
            prune_deployment(&mut pruned);
            assert_eq!(pruned, want, "needs_apply would see a difference that is not there");
        }
    }

    #[test]
    fn the_apiservers_default_strategy_is_pruned_and_recreate_kept() {
        use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy};
        let with = |type_: &str| Deployment {
            spec: Some(DeploymentSpec {
                strategy: Some(DeploymentStrategy { type_: Some(type_.into()), rolling_update: None }),
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        };
        // (strategy, kept after pruning)
        for (type_, kept) in [("RollingUpdate", false), ("Recreate", true)] {
            let mut d = with(type_);
            prune_deployment(&mut d);
            assert_eq!(d.spec.and_then(|s| s.strategy).is_some(), kept, "{type_}");
        }
    }
}
