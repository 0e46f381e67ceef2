//! Names fixed by the design (`shared/DESIGN.md`, "Names"). Tests, manifests and both binaries
//! use these constants, so a rename happens in exactly one place. (The probe and metrics paths
//! every binary serves are `myownshell_runtime::paths`.)

/// API group of the `MyOwnShell` resource (`apiVersion: myownshell.io/…`).
pub const GROUP: &str = "myownshell.io";
/// The one served (and stored) version of the resource.
pub const VERSION: &str = "v1alpha1";
/// `<group>/<version>`, as written in an object's `apiVersion`.
pub const API_VERSION: &str = "myownshell.io/v1alpha1";
/// `kind` of the custom resource.
pub const KIND: &str = "MyOwnShell";
/// Resource name in URLs, RBAC rules and webhook rules (`kubectl get myownshells`).
pub const PLURAL: &str = "myownshells";
/// Singular resource name, accepted by `kubectl` (`kubectl get myownshell sample`).
pub const SINGULAR: &str = "myownshell";
/// `kubectl` short name (`kubectl get mos`).
pub const SHORT_NAME: &str = "mos";
/// `<plural>.<group>`, the name of the CustomResourceDefinition object.
pub const CRD_NAME: &str = "myownshells.myownshell.io";

/// `kind` of the class resource.
pub const CLASS_KIND: &str = "MyOwnShellClass";
/// Its resource name (`kubectl get myownshellclasses`, RBAC rules).
pub const CLASS_PLURAL: &str = "myownshellclasses";
/// Its `kubectl` short name (`kubectl get mosc`).
pub const CLASS_SHORT_NAME: &str = "mosc";
/// The name of its CustomResourceDefinition.
pub const CLASS_CRD_NAME: &str = "myownshellclasses.myownshell.io";
/// The annotation (value `"true"`) that makes a class the default, as
/// `storageclass.kubernetes.io/is-default-class` does for StorageClasses.
pub const DEFAULT_CLASS_ANNOTATION: &str = "myownshell.io/is-default-class";
/// The RBAC verb on `myownshellclasses/<name>` that lets a user create shells of that class.
pub const USE_VERB: &str = "use";

/// Finalizer the mutating webhook adds (and the controller adds if it is missing), so a deleted
/// `MyOwnShell` stays until the controller has deleted its Deployment; the controller then
/// removes it.
pub const FINALIZER: &str = "myownshell.io/finalizer";
/// Field manager for server-side apply by the controller.
pub const FIELD_MANAGER: &str = "myownshell-controller";

/// Recommended label `app.kubernetes.io/name`, on every Deployment and shell pod the controller
/// creates; part of the pod selector.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// Value of [`LABEL_NAME`]: the application is MyOwnShell.
pub const LABEL_NAME_VALUE: &str = "myownshell";
/// Recommended label `app.kubernetes.io/instance`: which `MyOwnShell` a Deployment and its pods
/// belong to (its name, shortened when longer than a label value may be).
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// Recommended label `app.kubernetes.io/managed-by`. The controller watches only Deployments that
/// carry it with [`LABEL_MANAGED_BY_VALUE`], so it never caches the rest of the cluster's.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`] on what the controller creates.
pub const LABEL_MANAGED_BY_VALUE: &str = "myownshell-operator";

/// What a shell's home claim is named: this, then the shell's name. A name of its own, so that
/// the `shell-homes` admission policy can tell a home from any other claim by its name alone:
/// only the operator creates claims named so, and only the shell's own pods mount them.
pub const HOME_CLAIM_PREFIX: &str = "myownshell-home-";

/// The home claim of the shell `shell`.
pub fn home_claim(shell: &str) -> String {
    format!("{HOME_CLAIM_PREFIX}{shell}")
}

/// The shell whose home claim is `claim`, if it is one.
pub fn shell_of_home_claim(claim: &str) -> Option<&str> {
    claim.strip_prefix(HOME_CLAIM_PREFIX).filter(|s| !s.is_empty())
}

/// The longest name a shell with a home may have: its claim's name is at most 253 characters.
pub const MAX_NAME_WITH_HOME: usize = 253 - HOME_CLAIM_PREFIX.len();

/// On a home claim that outlived its shell (`spec.home.onDelete: Retain`), value `"true"`: how
/// an administrator finds kept homes (`kubectl get pvc -A -l myownshell.io/retained-home`).
pub const LABEL_RETAINED_HOME: &str = "myownshell.io/retained-home";
/// On a home claim: the user name of the shell's owner, so that a retained home is taken up
/// again only by a new shell of the same name and the same owner.
pub const ANNOTATION_HOME_OWNER: &str = "myownshell.io/owner";
/// On a home claim: the owner's uid (`spec.ownerUID`), when the authenticator gave one.
pub const ANNOTATION_HOME_OWNER_UID: &str = "myownshell.io/owner-uid";
/// On a home claim: the uid of the shell whose home it is. Written only by the operator (the
/// `shell-homes` admission policy refuses anyone else a change of it), and in place of an
/// ownerReference: a claim the shell owned would be deleted by the garbage collector ahead of
/// the shell's finalizer on a foreground deletion, whatever `spec.home.onDelete` says.
pub const ANNOTATION_HOME_SHELL_UID: &str = "myownshell.io/shell-uid";

/// On a shell's pods (and Deployment): the name of the shell's class (shortened as
/// `app.kubernetes.io/instance` is when longer than a label value may be). The operator's
/// NetworkPolicies select a class's shells by it; nobody but Kubernetes' controllers changes a
/// shell pod's labels (`config/policy/shell_workloads.yaml`).
pub const LABEL_CLASS: &str = "myownshell.io/class";

/// The label a cluster administrator puts on a namespace to open it to shells, with
/// [`SHELLS_NAMESPACE_LABEL_VALUE`]: shells are created only there, and the admission policies
/// that take MyOwnShells as parameters look only there (`config/policy/shell_namespaces.yaml`).
pub const SHELLS_NAMESPACE_LABEL: &str = "myownshell.io/shells";
/// Value of [`SHELLS_NAMESPACE_LABEL`] that opens a namespace to shells.
pub const SHELLS_NAMESPACE_LABEL_VALUE: &str = "enabled";

/// HTTPS path of the mutating (defaulting) webhook, as the MutatingWebhookConfiguration in
/// `config/webhook` calls it (kubebuilder's naming:
/// `/mutate-<group with dashes>-<version>-<kind>`).
pub const MUTATE_PATH: &str = "/mutate-myownshell-io-v1alpha1-myownshell";
/// HTTPS path of the validating webhook, as the ValidatingWebhookConfiguration in `config/webhook`
/// calls it.
pub const VALIDATE_PATH: &str = "/validate-myownshell-io-v1alpha1-myownshell";
/// HTTPS path of the connect webhook (who may exec, attach, port-forward or debug into a
/// shell's pods), as the MutatingWebhookConfiguration in `config/webhook` calls it.
pub const CONNECT_PATH: &str = "/connect-v1-pod";

/// Condition types reported in `status.conditions`.
pub mod conditions {
    /// `True` when every requested shell pod is ready; `False` otherwise, also while paused at
    /// `size: 0`.
    pub const AVAILABLE: &str = "Available";
    /// `True` while the Deployment is being created, rolled out or scaled.
    pub const PROGRESSING: &str = "Progressing";
    /// `True` when the last reconcile failed, the shell's pods cannot run (the reason says why:
    /// a bad image, a crash loop, …), or the Deployment cannot create them.
    pub const DEGRADED: &str = "Degraded";
    /// `True` when the shell's lifetime stops it within `warnBefore`: the reason says why
    /// (`Idle`, `MaxRunTime`), the message when.
    pub const STOPPING: &str = "Stopping";
    /// `True` when the shell's pods run the pod template of the running operator release;
    /// `False` while a template that changed with an operator upgrade waits for a quiet moment.
    pub const UP_TO_DATE: &str = "UpToDate";
    /// `True` when the shell's home claim is bound and usable; `False` with a reason
    /// (`HomePending`, `HomeLost`, `HomeNodeUnavailable`, …) otherwise. Absent without a home.
    pub const HOME_READY: &str = "HomeReady";
    /// `True` when the shell fits its MyOwnShellClass (its image among those the class allows);
    /// `False` (`ClassForbids`, `ClassMissing`) when the class changed or went since: the shell
    /// runs on as it is, and its next start is refused until it fits. Absent without a class.
    pub const FITS_CLASS: &str = "FitsClass";
    /// `True` when the shell's class asks for approval and has it: the message names the
    /// approvers and until when; `False` (`WaitingForApproval`, `Rejected`, `ApprovalExpired`)
    /// while it waits, the shell held at no pods. Absent when its class asks for none.
    pub const APPROVED: &str = "Approved";
}

/// The custom RBAC verb an approver needs on a shell (`kubectl auth can-i approve myownshells`).
pub const APPROVE_VERB: &str = "approve";

pub mod reasons;
