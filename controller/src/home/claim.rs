//! The PersistentVolumeClaim a shell's `spec.home` asks for, as a pure function of the shell,
//! and the rule that says whose an existing claim of the shell's name is.
//!
//! A claim is the shell's when its `myownshell.io/shell-uid` annotation names the shell's uid
//! (or, for a claim made before that annotation, its controller ownerReference does: such a
//! claim is moved to the annotation when next seen). Claims carry no ownerReference: with one, a
//! foreground deletion of the shell (`kubectl delete --cascade=foreground`) had the garbage
//! collector delete the home ahead of the finalizer, `onDelete: Retain` or not. Homes are
//! deleted by the finalizer's cleanup alone. A claim with neither ([`Ownership::Retained`]) is
//! taken up only if it carries the labels and the retained mark the controller gives a home it
//! keeps (`spec.home.onDelete: Retain`) and names the same owner: the `shell-homes` admission
//! policy lets nobody but the operator create a claim with those labels or annotations or change
//! them, so a user cannot plant a claim (with a `.profile` of their choosing) for someone else's
//! next shell. Anything else is foreign: never written, never deleted, never mounted.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use myownshell_api::{MyOwnShell, defaults, names};

use crate::deployment::BuildError;
use crate::labels;

/// The size a shell's home asks for: `spec.home.size`, or the default, in the apiserver's
/// canonical text (what it stores, so a comparison with the live claim is exact).
pub fn wanted_size(shell: &MyOwnShell) -> Quantity {
    let size = shell.spec.home.as_ref().and_then(|h| h.size.as_ref()).map_or(defaults::HOME_SIZE, |q| q.0.as_str());
    Quantity(myownshell_api::quantity::canonical(size).into_owned())
}

/// The annotations that name the shell and its owner on its claim.
fn owner_annotations(shell: &MyOwnShell) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    if let Some(uid) = &shell.metadata.uid {
        annotations.insert(names::ANNOTATION_HOME_SHELL_UID.to_owned(), uid.clone());
    }
    if let Some(owner) = &shell.spec.owner {
        annotations.insert(names::ANNOTATION_HOME_OWNER.to_owned(), owner.clone());
    }
    if let Some(uid) = &shell.spec.owner_uid {
        annotations.insert(names::ANNOTATION_HOME_OWNER_UID.to_owned(), uid.clone());
    }
    annotations
}

/// The claim for `shell`'s home (which it must have): ReadWriteOnce, `spec.home.size`, its
/// class (unset: the cluster's default class, which the apiserver fills in), marked as the
/// shell's by annotation, with no ownerReference (see the module's documentation).
pub fn desired(shell: &MyOwnShell) -> Result<PersistentVolumeClaim, BuildError> {
    let name = shell.metadata.name.clone().ok_or(BuildError::MissingMetadata("name"))?;
    let namespace = shell.metadata.namespace.clone().ok_or(BuildError::MissingMetadata("namespace"))?;
    if shell.metadata.uid.is_none() {
        return Err(BuildError::MissingMetadata("uid"));
    }
    let home = shell.spec.home.clone().unwrap_or_default();
    Ok(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(names::home_claim(&name)),
            namespace: Some(namespace),
            labels: Some(labels::labels(&labels::instance_value(&name))),
            annotations: Some(owner_annotations(shell)),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_owned(), wanted_size(shell))])),
                limits: None,
            }),
            storage_class_name: home.storage_class_name,
            volume_mode: Some("Filesystem".to_owned()),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

/// How a claim of the shell's name relates to the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// This shell's home.
    Ours,
    /// This shell's home, made before homes carried the shell's uid: still controlled by the
    /// shell through an ownerReference, which is to be replaced by the annotation.
    OursByReference,
    /// A home the controller kept from an earlier shell of this name and owner: taken up.
    Retained,
    /// Anything else: left alone, and the shell runs no pods while it is in the way.
    Foreign,
}

/// What [`of`] reads of a claim: its controller reference's kind and uid, the shell its
/// operator labels name, the retained mark, and its owner annotations. The watch's cache keeps
/// these few strings per claim ([`crate::home::cached::CachedClaim`]), not the claim's label and
/// annotation maps: two `BTreeMap`s took 1.3 KB a claim, the largest part of a home's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimMeta {
    /// The controller ownerReference: kind and uid.
    pub controller: Option<(String, String)>,
    /// The instance label's value, if the claim carries all of the operator's labels for it
    /// ([`labels::labels`]: name, instance and managed-by).
    pub instance: Option<String>,
    /// Marked as a home kept for its owner ([`names::LABEL_RETAINED_HOME`] `"true"`).
    pub retained: bool,
    /// [`names::ANNOTATION_HOME_SHELL_UID`].
    pub shell_uid: Option<String>,
    /// [`names::ANNOTATION_HOME_OWNER`].
    pub owner: Option<String>,
    /// [`names::ANNOTATION_HOME_OWNER_UID`].
    pub owner_uid: Option<String>,
}

impl ClaimMeta {
    /// What the rule reads of a claim with this controller and these labels and annotations.
    pub fn read(
        controller: Option<(&str, &str)>,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> Self {
        let instance = labels
            .get(names::LABEL_INSTANCE)
            .filter(|i| labels::labels(i).iter().all(|(k, v)| labels.get(k) == Some(v)));
        let annotation = |key: &str| annotations.get(key).cloned();
        Self {
            controller: controller.map(|(kind, uid)| (kind.to_owned(), uid.to_owned())),
            instance: instance.cloned(),
            retained: labels.get(names::LABEL_RETAINED_HOME).is_some_and(|v| v == "true"),
            shell_uid: annotation(names::ANNOTATION_HOME_SHELL_UID),
            owner: annotation(names::ANNOTATION_HOME_OWNER),
            owner_uid: annotation(names::ANNOTATION_HOME_OWNER_UID),
        }
    }
}

/// Classify a claim against `shell` by the rule in this module's documentation.
pub fn of(claim: &ClaimMeta, shell: &MyOwnShell) -> Ownership {
    let labelled = claim.instance.as_deref() == Some(labels::instance_value(&shell.name_any()).as_str());
    let (shell_uid, owner, owner_uid) =
        (claim.shell_uid.as_deref(), claim.owner.as_deref(), claim.owner_uid.as_deref());
    match claim.controller.as_ref().map(|(kind, uid)| (kind.as_str(), uid.as_str())) {
        Some((kind, uid)) if kind == names::KIND && Some(uid) == shell.metadata.uid.as_deref() => {
            Ownership::OursByReference
        }
        Some(_) => Ownership::Foreign,
        None if shell_uid.is_some() => {
            let ours = shell_uid == shell.metadata.uid.as_deref() && labelled;
            if ours { Ownership::Ours } else { Ownership::Foreign }
        }
        None => {
            let same_owner = shell.spec.owner.is_some()
                && owner == shell.spec.owner.as_deref()
                && owner_uid == shell.spec.owner_uid.as_deref();
            if labelled && claim.retained && same_owner { Ownership::Retained } else { Ownership::Foreign }
        }
    }
}

/// The merge patch that makes a claim the shell's: the shell's uid, no ownerReference, its
/// labels without the retained mark (for adopting a retained home, and for a home made before
/// homes carried the shell's uid).
pub fn adopt_patch(shell: &MyOwnShell) -> Result<serde_json::Value, BuildError> {
    let uid = shell.metadata.uid.clone().ok_or(BuildError::MissingMetadata("uid"))?;
    Ok(serde_json::json!({
        "metadata": {
            "ownerReferences": null,
            "annotations": { names::ANNOTATION_HOME_SHELL_UID: uid },
            "labels": { names::LABEL_RETAINED_HOME: null },
        }
    }))
}

/// The merge patch that keeps a claim when its shell is deleted (`onDelete: Retain`): no
/// shell's uid, the retained mark on.
pub fn release_patch() -> serde_json::Value {
    serde_json::json!({
        "metadata": {
            "ownerReferences": null,
            "annotations": { names::ANNOTATION_HOME_SHELL_UID: null },
            "labels": { names::LABEL_RETAINED_HOME: "true" },
        }
    })
}

/// Whether a claim that asks for `requested` must grow to give `wanted` (both as the apiserver
/// reads them; text it cannot read is never a reason to write).
pub fn must_grow(requested: &Quantity, wanted: &Quantity) -> bool {
    use myownshell_api::quantity::parse;
    matches!((parse(&requested.0), parse(&wanted.0)), (Ok(r), Ok(w)) if w.millis() > r.millis())
}

/// The merge patch that grows a claim to `size`.
pub fn resize_patch(size: &Quantity) -> serde_json::Value {
    serde_json::json!({ "spec": { "resources": { "requests": { "storage": size } } } })
}

#[cfg(test)]
mod tests {
    use myownshell_api::{Home, MyOwnShellSpec};

    use super::*;

    fn shell(owner: Option<&str>, home: Home) -> MyOwnShell {
        let mut shell =
            MyOwnShell::new("alice-shell", MyOwnShellSpec { home: Some(home), ..MyOwnShellSpec::default() });
        shell.metadata.namespace = Some("team".into());
        shell.metadata.uid = Some("uid-1".into());
        shell.spec.owner = owner.map(str::to_owned);
        shell
    }

    #[test]
    fn the_claim_a_home_asks_for() {
        let home = Home { size: Some(Quantity("1.5Gi".into())), ..Home::default() };
        let claim = desired(&shell(Some("alice"), home)).unwrap();
        assert_eq!(claim.metadata.name.as_deref(), Some("myownshell-home-alice-shell"));
        let spec = claim.spec.unwrap();
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
        assert_eq!(spec.storage_class_name, None, "unset means the default class, never \"\"");
        assert_eq!(spec.resources.unwrap().requests.unwrap()["storage"], Quantity("1536Mi".into()));
        assert_eq!(claim.metadata.owner_references, None, "no garbage collector may take a home");
        let annotations = claim.metadata.annotations.unwrap();
        assert_eq!(annotations[names::ANNOTATION_HOME_OWNER], "alice");
        assert_eq!(annotations[names::ANNOTATION_HOME_SHELL_UID], "uid-1");
        let with_class = Home { storage_class_name: Some("fast".into()), ..Home::default() };
        let claim = desired(&shell(Some("alice"), with_class)).unwrap();
        assert_eq!(claim.spec.unwrap().storage_class_name.as_deref(), Some("fast"));
        let default_sized = desired(&shell(None, Home::default())).unwrap();
        assert_eq!(default_sized.spec.unwrap().resources.unwrap().requests.unwrap()["storage"], Quantity("1Gi".into()));
    }

    #[test]
    fn whose_a_claim_is() {
        let ours = labels::labels(&labels::instance_value("alice-shell"));
        let mut retained = ours.clone();
        retained.insert(names::LABEL_RETAINED_HOME.into(), "true".into());
        let another = labels::labels(&labels::instance_value("bob-shell"));
        let mut partly = ours.clone();
        partly.remove(names::LABEL_MANAGED_BY);
        let by = |owner: &str| BTreeMap::from([(names::ANNOTATION_HOME_OWNER.to_owned(), owner.to_owned())]);
        let of_shell = |uid: &str| {
            let mut a = by("alice");
            a.insert(names::ANNOTATION_HOME_SHELL_UID.to_owned(), uid.to_owned());
            a
        };
        let none = BTreeMap::new();
        let alice = shell(Some("alice"), Home::default());
        type Row<'a> =
            (&'a str, Option<(&'a str, &'a str)>, &'a BTreeMap<String, String>, BTreeMap<String, String>, Ownership);
        let rows: [Row<'_>; 14] = [
            ("marked with the shell's uid", None, &ours, of_shell("uid-1"), Ownership::Ours),
            (
                "marked with the shell's uid, labelled for another",
                None,
                &another,
                of_shell("uid-1"),
                Ownership::Foreign,
            ),
            ("marked with the shell's uid, one label missing", None, &partly, of_shell("uid-1"), Ownership::Foreign),
            ("marked with an earlier shell's uid", None, &ours, of_shell("uid-0"), Ownership::Foreign),
            ("marked with the shell's uid, not labelled", None, &none, of_shell("uid-1"), Ownership::Foreign),
            (
                "marked, and controlled by something",
                Some(("StatefulSet", "s")),
                &ours,
                of_shell("uid-1"),
                Ownership::Foreign,
            ),
            (
                "controlled by the shell (before the mark)",
                Some(("MyOwnShell", "uid-1")),
                &none,
                BTreeMap::new(),
                Ownership::OursByReference,
            ),
            ("controlled by an earlier shell", Some(("MyOwnShell", "uid-0")), &ours, by("alice"), Ownership::Foreign),
            ("controlled by something else", Some(("StatefulSet", "uid-1")), &ours, by("alice"), Ownership::Foreign),
            ("kept for the same owner", None, &retained, by("alice"), Ownership::Retained),
            ("kept for another owner", None, &retained, by("mallory"), Ownership::Foreign),
            ("kept, no owner named", None, &retained, BTreeMap::new(), Ownership::Foreign),
            ("our labels, not marked as kept", None, &ours, by("alice"), Ownership::Foreign),
            ("a user's own claim", None, &none, BTreeMap::new(), Ownership::Foreign),
        ];
        for (what, controller, labels, annotations, want) in rows {
            let meta = ClaimMeta::read(controller, labels, &annotations);
            assert_eq!(of(&meta, &alice), want, "{what}");
        }
        let mut with_uid = by("alice");
        with_uid.insert(names::ANNOTATION_HOME_OWNER_UID.into(), "u-1".into());
        let meta = ClaimMeta::read(None, &retained, &with_uid);
        assert_eq!(of(&meta, &alice), Ownership::Foreign, "the owner's uid differs (none now)");
        let mut alice_uid = alice.clone();
        alice_uid.spec.owner_uid = Some("u-1".into());
        assert_eq!(of(&meta, &alice_uid), Ownership::Retained, "same name, same uid");
    }
}
