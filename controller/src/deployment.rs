//! The Deployment a `MyOwnShell` asks for, as a pure function of the object, and the check that
//! tells whether the live Deployment already matches it (so an unchanged object costs no write).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::{Resource, ResourceExt};
use myownshell_api::class::effective;
use myownshell_api::{MyOwnShell, MyOwnShellClass, MyOwnShellClassSpec, defaults};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::labels;

/// Name of the one container in each shell pod.
pub const SHELL_CONTAINER: &str = "shell";
/// Annotation holding a hash of the whole desired Deployment. A field dropped from the desired
/// object changes the hash, so [`needs_apply`] notices removals, not only changed values.
pub const SPEC_HASH_ANNOTATION: &str = "myownshell.io/spec-hash";
/// On the Deployment: the hash of the pod template the controller built for it.
pub const TEMPLATE_HASH_ANNOTATION: &str = "myownshell.io/template-hash";
/// On the Deployment: when its pod template was last applied (RFC 3339, to the second).
pub const TEMPLATE_APPLIED_ANNOTATION: &str = "myownshell.io/template-applied-at";
/// On the Deployment of a shell with a class: the hash of what the shell's own spec says of its
/// container (image, command, resources, as written, unset included). Unchanged while the pod
/// template changes, the change is the class's or the operator's, and waits for a quiet moment.
pub const OWN_SPEC_ANNOTATION: &str = "myownshell.io/own-spec-hash";
/// On the Deployment of a shell with a class: `<class>/<hash>` of what the class put in its
/// container (the defaults the spec left to it): a change names the class in `UpToDate`.
pub const CLASS_TEMPLATE_ANNOTATION: &str = "myownshell.io/class-template";

/// How long a shell pod being deleted gets before it is killed.
pub const TERMINATION_GRACE_SECONDS: i64 = 5;
/// `nobody`: busybox runs as root unless told otherwise, and `runAsNonRoot` alone would then
/// keep the pod from ever starting.
pub const NON_ROOT_ID: i64 = 65534;
/// The shell's writable directory (an emptyDir), also its `HOME`: the root filesystem is
/// read-only, and a shell with nowhere to write is not much of a shell.
pub const SCRATCH_DIR: &str = "/tmp";
const SCRATCH_VOLUME: &str = "tmp";

/// Why a Deployment cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The named metadata field (`name`, `namespace` or `uid`) is unset: the Deployment needs
    /// them for its own name and namespace and for its ownerReference.
    #[error("metadata.{0} is missing")]
    MissingMetadata(&'static str),
}

/// The desired Deployment for `shell`, whose Deployment is `live` (if it exists yet): spec
/// fields that are unset take `myownshell_api::defaults`; the selector is the one `live` already
/// has, since a selector cannot change (see `labels::instance_for`).
pub fn desired(shell: &MyOwnShell, live: Option<&Deployment>) -> Result<Deployment, BuildError> {
    desired_with(shell, live, shell.spec.size.unwrap_or(defaults::SIZE))
}

/// [`desired`] running `replicas` pods (0 while the shell's lifetime has it stopped: its
/// `spec.size` stays, and nothing but the count changes, so the pod template, and with it every
/// running pod, is left as it is).
pub fn desired_with(shell: &MyOwnShell, live: Option<&Deployment>, replicas: i32) -> Result<Deployment, BuildError> {
    desired_for(shell, live, replicas, &TemplateSettings::default())
}

/// What the operator adds to every shell pod (`--pod-annotations`, the session holder): a change
/// of it changes the pod template as an upgrade does, and rolls out as one (`crate::life::rollout`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateSettings {
    /// Annotations on every shell pod (for a service mesh, log shipping, a cost centre).
    pub pod_annotations: BTreeMap<String, String>,
    /// The session holder (`crate::holder`), unless the operator runs without one.
    pub session: Option<crate::holder::SessionSettings>,
}

/// [`desired_with`] with the operator's `settings`; the Deployment carries the hash of its pod
/// template (`TEMPLATE_HASH_ANNOTATION`), by which a later reconcile tells whether the
/// pods run the template it builds.
pub fn desired_for(
    shell: &MyOwnShell,
    live: Option<&Deployment>,
    replicas: i32,
    settings: &TemplateSettings,
) -> Result<Deployment, BuildError> {
    desired_mounting(shell, live, replicas, settings, shell.spec.home.is_some(), None)
}

/// [`desired_for`], with the shell's home claim mounted as `$HOME` if `mount_home` (the
/// reconcile says no while the claim of the shell's name is not its own: a shell pod never
/// mounts a claim someone else prepared). A shell with `spec.home` rolls by `Recreate` either
/// way (`crate::home::mount`).
pub fn desired_mounting(
    shell: &MyOwnShell,
    live: Option<&Deployment>,
    replicas: i32,
    settings: &TemplateSettings,
    mount_home: bool,
    class: Option<&MyOwnShellClass>,
) -> Result<Deployment, BuildError> {
    let name = shell.metadata.name.clone().ok_or(BuildError::MissingMetadata("name"))?;
    let namespace = shell.metadata.namespace.clone().ok_or(BuildError::MissingMetadata("namespace"))?;
    let mut owner = shell.controller_owner_ref(&()).ok_or(BuildError::MissingMetadata("uid"))?;
    // As controller-runtime's SetControllerReference: a foreground deletion of the MyOwnShell
    // waits for the Deployment (needs `update` on `myownshells/finalizers` in RBAC).
    owner.block_owner_deletion = Some(true);
    let spec = &shell.spec;
    let instance = labels::instance_for(&name, live);
    let labels = labels::labels(&instance);
    let mut deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector { match_labels: Some(labels::selector_labels(&instance)), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels::with_class(labels, class.and_then(|c| c.metadata.name.as_deref()))),
                    annotations: (!settings.pod_annotations.is_empty()).then(|| settings.pod_annotations.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(shell_container(spec, class.map(|c| &c.spec)))),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    if let (Some(spec), true) = (deployment.spec.as_mut(), shell.spec.home.is_some()) {
        if mount_home {
            crate::home::mount::mount(spec, &myownshell_api::names::home_claim(&name));
        } else {
            spec.strategy = crate::home::mount::recreate();
        }
    }
    if let (Some(session), Some(pod)) =
        (&settings.session, deployment.spec.as_mut().and_then(|s| s.template.spec.as_mut()))
    {
        crate::holder::add(pod, session, class.map(|c| &c.spec));
    }
    let template = deployment.spec.as_ref().map(|s| template_hash(&s.template)).unwrap_or_default();
    deployment.annotations_mut().insert(TEMPLATE_HASH_ANNOTATION.to_owned(), template);
    if let (Some(name), Some(class)) = (spec.class_name.as_deref(), class) {
        let own = json_hash(&(&spec.image, &spec.command, &spec.resources));
        let given = class_given(spec, &class.spec);
        deployment.annotations_mut().insert(OWN_SPEC_ANNOTATION.to_owned(), own);
        deployment
            .annotations_mut()
            .insert(CLASS_TEMPLATE_ANNOTATION.to_owned(), format!("{name}/{}", json_hash(&given)));
    }
    rehash(&mut deployment);
    Ok(deployment)
}

/// What `class` puts in the container of a shell whose `spec` leaves it unset.
fn class_given(
    spec: &myownshell_api::MyOwnShellSpec,
    class: &MyOwnShellClassSpec,
) -> (Option<String>, Option<Vec<String>>, Option<myownshell_api::ShellResources>) {
    let image = spec.image.is_none().then(|| class.images.as_ref().and_then(|i| i.default.clone())).flatten();
    let command = spec.command.is_none().then(|| class.command.clone()).flatten();
    let resources =
        spec.resources.is_none().then(|| class.resources.as_ref().and_then(|r| r.default.clone())).flatten();
    (image, command, resources)
}

/// First 16 hex characters of the SHA-256 of `value`'s JSON.
fn json_hash(value: &impl serde::Serialize) -> String {
    let json = serde_json::to_vec(value).unwrap_or_default();
    Sha256::digest(&json).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Put the hash of the whole Deployment (without its own) in [`SPEC_HASH_ANNOTATION`]: after
/// any change to a built Deployment.
pub fn rehash(deployment: &mut Deployment) {
    deployment.annotations_mut().remove(SPEC_HASH_ANNOTATION);
    let hash = content_hash(deployment);
    deployment.annotations_mut().insert(SPEC_HASH_ANNOTATION.to_owned(), hash);
}

/// The shell container: the spec's image, command and resources (its class's defaults where
/// unset, then the operator's), `HOME` on the writable scratch directory, and nothing it does
/// not need (non-root, no privilege escalation, no capabilities, a read-only root filesystem).
fn shell_container(spec: &myownshell_api::MyOwnShellSpec, class: Option<&MyOwnShellClassSpec>) -> Container {
    let resources = effective::resources(spec, class);
    Container {
        name: SHELL_CONTAINER.to_owned(),
        image: Some(effective::image(spec, class).to_owned()),
        command: Some(effective::command(spec, class)),
        env: Some(vec![EnvVar { name: "HOME".to_owned(), value: Some(SCRATCH_DIR.to_owned()), value_from: None }]),
        volume_mounts: Some(vec![VolumeMount {
            name: SCRATCH_VOLUME.to_owned(),
            mount_path: SCRATCH_DIR.to_owned(),
            ..VolumeMount::default()
        }]),
        // In the apiserver's canonical text (`.5` → `500m`): what it stores, so the live
        // Deployment matches the desired one and is not applied again on every reconcile.
        resources: Some(ResourceRequirements {
            requests: resources.requests.as_ref().map(myownshell_api::quantity::canonical_list),
            limits: resources.limits.as_ref().map(myownshell_api::quantity::canonical_list),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_owned()]), add: None }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(NON_ROOT_ID),
            run_as_group: Some(NON_ROOT_ID),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

/// The shell pod around `container`: its scratch volume, no ServiceAccount token, non-root.
fn pod_spec(container: Container) -> PodSpec {
    PodSpec {
        containers: vec![container],
        volumes: Some(vec![Volume {
            name: SCRATCH_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        }]),
        // A shell has no business talking to the API server with the namespace's default identity.
        automount_service_account_token: Some(false),
        // No environment variables for every Service of the namespace: they would crowd the
        // shell's environment (and the room its command's arguments share with it).
        enable_service_links: Some(false),
        // `sh` as PID 1 ignores SIGTERM, so a stopped shell's pod used to wait out the default
        // 30 s before it was killed: the session is over either way.
        termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(NON_ROOT_ID),
            run_as_group: Some(NON_ROOT_ID),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..PodSecurityContext::default()
        }),
        ..PodSpec::default()
    }
}

fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile { type_: "RuntimeDefault".to_owned(), localhost_profile: None }
}

/// The first 16 hex characters of the SHA-256 of `template`'s JSON.
pub fn template_hash(template: &PodTemplateSpec) -> String {
    json_hash(template)
}

/// First 16 hex characters of the SHA-256 of the object's JSON (k8s-openapi serializes maps in
/// key order, so equal objects hash equally).
fn content_hash(deployment: &Deployment) -> String {
    json_hash(deployment)
}

/// Whether server-side applying `desired` could change `live`: true unless every field of
/// `desired` already has the same value in `live`. Fields others added (and the apiserver's
/// defaults) are ignored, exactly as a forced apply would leave them; the hash annotation
/// catches fields dropped from `desired`. Lists must match in length and element by element.
pub fn needs_apply(desired: &Deployment, live: Option<&Deployment>) -> bool {
    let Some(live) = live else { return true };
    if live.meta().deletion_timestamp.is_some() {
        return true;
    }
    match (serde_json::to_value(desired), serde_json::to_value(live)) {
        (Ok(d), Ok(l)) => !is_subset(&d, &l),
        _ => true,
    }
}

/// Whether every field of `want` has the same value in `have` (nulls in `want` aside; lists
/// element by element, of the same length).
pub(crate) fn is_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => {
            w.iter().all(|(k, wv)| wv.is_null() || h.get(k).is_some_and(|hv| is_subset(wv, hv)))
        }
        (Value::Array(w), Value::Array(h)) => w.len() == h.len() && w.iter().zip(h).all(|(a, b)| is_subset(a, b)),
        (w, h) => w == h,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use myownshell_api::{MyOwnShellSpec, ShellResources};
    use serde_json::json;

    use super::*;

    fn shell(name: &str, spec: MyOwnShellSpec) -> MyOwnShell {
        let mut shell = MyOwnShell::new(name, spec);
        shell.metadata.namespace = Some("team".into());
        shell.metadata.uid = Some("uid-1".into());
        shell
    }

    fn json_of(d: &Deployment) -> Value {
        serde_json::to_value(d).unwrap()
    }

    #[test]
    fn defaults_fill_an_empty_spec() {
        let d = json_of(&desired(&shell("web", MyOwnShellSpec::default()), None).unwrap());
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(d["spec"]["replicas"], json!(defaults::SIZE));
        assert_eq!(c["image"], json!(defaults::IMAGE));
        assert_eq!(c["command"], json!(defaults::command()));
        assert_eq!(c["resources"], serde_json::to_value(defaults::resources()).unwrap());
        assert_eq!(c["name"], json!("shell"));
    }

    #[test]
    fn the_spec_decides_each_field() {
        let resources =
            ShellResources { requests: Some(BTreeMap::from([("cpu".to_owned(), Quantity("1".into()))])), limits: None };
        let spec = MyOwnShellSpec {
            size: Some(0),
            image: Some("registry.example.com/tools:1".into()),
            command: Some(vec!["sleep".into(), "infinity".into()]),
            resources: Some(resources),
            ..MyOwnShellSpec::default()
        };
        let d = json_of(&desired(&shell("web", spec), None).unwrap());
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        let cases = [
            (&d["spec"]["replicas"], json!(0)),
            (&c["image"], json!("registry.example.com/tools:1")),
            (&c["command"], json!(["sleep", "infinity"])),
            (&c["resources"], json!({"requests": {"cpu": "1"}})),
        ];
        for (got, want) in cases {
            assert_eq!(*got, want);
        }
    }

    #[test]
    fn the_shell_writes_only_to_its_scratch_dir_which_is_home() {
        let d = json_of(&desired(&shell("web", MyOwnShellSpec::default()), None).unwrap());
        let pod = &d["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], json!(true));
        assert_eq!(c["volumeMounts"], json!([{"name": "tmp", "mountPath": "/tmp"}]));
        assert_eq!(pod["volumes"], json!([{"name": "tmp", "emptyDir": {}}]));
        assert_eq!(c["env"], json!([{"name": "HOME", "value": "/tmp"}]));
    }

    #[test]
    fn metadata_labels_selector_and_owner() {
        let d = json_of(&desired(&shell("web", MyOwnShellSpec::default()), None).unwrap());
        let labels = json!({
            "app.kubernetes.io/name": "myownshell",
            "app.kubernetes.io/instance": "web",
            "app.kubernetes.io/managed-by": "myownshell-operator",
        });
        assert_eq!(d["metadata"]["name"], json!("web"));
        assert_eq!(d["metadata"]["namespace"], json!("team"));
        assert_eq!(d["metadata"]["labels"], labels);
        assert_eq!(d["spec"]["template"]["metadata"]["labels"], labels);
        assert_eq!(
            d["spec"]["selector"],
            json!({"matchLabels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": "web"}})
        );
        assert_eq!(
            d["metadata"]["ownerReferences"],
            json!([{
                "apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "name": "web", "uid": "uid-1",
                "controller": true, "blockOwnerDeletion": true,
            }])
        );
    }

    #[test]
    fn pods_run_locked_down() {
        let d = json_of(&desired(&shell("web", MyOwnShellSpec::default()), None).unwrap());
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["securityContext"],
            json!({
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": true,
                "runAsNonRoot": true,
                "runAsUser": 65534,
                "runAsGroup": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            })
        );
        assert_eq!(
            pod["securityContext"],
            json!({"runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"}})
        );
        assert_eq!(pod["automountServiceAccountToken"], json!(false));
    }

    #[test]
    fn long_names_get_a_hashed_instance_label_everywhere() {
        let name = "n".repeat(100);
        let d = json_of(&desired(&shell(&name, MyOwnShellSpec::default()), None).unwrap());
        let value = labels::instance_value(&name);
        assert_eq!(value.len(), 63);
        assert_eq!(d["metadata"]["name"], json!(name), "the Deployment keeps the full name");
        for labels in [
            &d["metadata"]["labels"],
            &d["spec"]["template"]["metadata"]["labels"],
            &d["spec"]["selector"]["matchLabels"],
        ] {
            assert_eq!(labels["app.kubernetes.io/instance"], json!(value));
        }
    }

    #[test]
    fn objects_without_identity_are_refused() {
        let mut no_uid = shell("web", MyOwnShellSpec::default());
        no_uid.metadata.uid = None;
        let mut no_ns = shell("web", MyOwnShellSpec::default());
        no_ns.metadata.namespace = None;
        assert_eq!(desired(&no_uid, None), Err(BuildError::MissingMetadata("uid")));
        assert_eq!(desired(&no_ns, None), Err(BuildError::MissingMetadata("namespace")));
    }

    #[test]
    fn the_hash_follows_the_spec() {
        let hash = |size| {
            let d =
                desired(&shell("web", MyOwnShellSpec { size: Some(size), ..MyOwnShellSpec::default() }), None).unwrap();
            d.annotations().get(SPEC_HASH_ANNOTATION).cloned().unwrap()
        };
        assert_eq!(hash(2), hash(2));
        assert_ne!(hash(2), hash(3));
        assert_eq!(hash(2).len(), 16);
    }

    #[test]
    fn needs_apply_cases() {
        let want = desired(&shell("web", MyOwnShellSpec { size: Some(2), ..MyOwnShellSpec::default() }), None).unwrap();
        let with = |f: &dyn Fn(&mut Value)| {
            let mut v = json_of(&want);
            f(&mut v);
            serde_json::from_value::<Deployment>(v).unwrap()
        };
        let cases: Vec<(&str, Option<Deployment>, bool)> = vec![
            ("missing", None, true),
            ("identical", Some(want.clone()), false),
            (
                "apiserver defaults and status added",
                Some(with(&|v| {
                    v["spec"]["strategy"] = json!({"type": "RollingUpdate"});
                    v["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
                    v["metadata"]["resourceVersion"] = json!("42");
                    v["status"] = json!({"replicas": 2, "readyReplicas": 2});
                })),
                false,
            ),
            ("replicas edited by hand", Some(with(&|v| v["spec"]["replicas"] = json!(5))), true),
            (
                "image edited by hand",
                Some(with(&|v| v["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil:1"))),
                true,
            ),
            (
                "a container added by hand",
                Some(with(&|v| {
                    let c = v["spec"]["template"]["spec"]["containers"][0].clone();
                    v["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().push(c);
                })),
                true,
            ),
            (
                "an older spec hash",
                Some(with(&|v| v["metadata"]["annotations"][SPEC_HASH_ANNOTATION] = json!("0000"))),
                true,
            ),
            (
                "being deleted",
                Some(with(&|v| v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"))),
                true,
            ),
        ];
        for (case, live, want_apply) in cases {
            assert_eq!(needs_apply(&want, live.as_ref()), want_apply, "{case}");
        }
    }
}
