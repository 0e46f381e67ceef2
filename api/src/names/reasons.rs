//! Every reason the operator writes: `status.conditions[].reason` and the `reason` of its
//! Events. CamelCase and stable: users filter on them
//! (`kubectl get events --field-selector reason=Scaled`), alerts and scripts match on them, so
//! each is declared once here, with its meaning. [`ALL`] lists them for the README's table
//! (`cargo xtask docs`) and for the tests.

/// Where a reason appears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// As the reason of a condition (its type and status as written, e.g. `Available=True`).
    Condition(&'static str),
    /// As the reason of a Normal Event.
    NormalEvent,
    /// As the reason of a Warning Event.
    WarningEvent,
    /// As the reason of `Degraded=True` and of the Warning Event of a failed reconcile.
    Failure,
    /// As `status.stopped.reason`: why a shell was stopped.
    Stop,
    /// As the reason of `Degraded=True` and `Available=False`, and of a Warning Event once per
    /// cause: why the shell's pods cannot run.
    PodFailure,
    /// As the `transition` label of `myownshell_controller_lifetime_transitions_total`: a start,
    /// a stop's warning or a stop, counted for every shell.
    Transition,
}

/// One reason: its text, where it appears, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reason {
    /// The reason as written (CamelCase).
    pub name: &'static str,
    /// Where it appears.
    pub uses: &'static [Use],
    /// What it means, for people.
    pub meaning: &'static str,
}

/// Declares each reason as a constant, with its doc comment, and lists them all in [`ALL`]
/// with the same text as their meaning: one place to add a reason.
macro_rules! reasons {
    ($($(#[doc = $doc:literal])+ $name:ident = $value:literal, [$($use:expr),+ $(,)?];)+) => {
        $($(#[doc = $doc])+ pub const $name: &str = $value;)+
        /// Every reason, in the order declared.
        pub const ALL: &[Reason] = &[$(Reason { name: $value, uses: &[$($use),+], meaning: concat!($($doc),+) }),+];
    };
}

use Use::{Condition, Failure, NormalEvent, PodFailure, Stop, Transition, WarningEvent};

reasons! {
    /// Every requested shell pod is ready.
    SHELLS_READY = "ShellsReady", [Condition("Available=True")];
    /// Fewer shell pods are ready than requested.
    SHELLS_NOT_READY = "ShellsNotReady", [Condition("Available=False")];
    /// `size` is 0: no shell pods run, nothing to roll out.
    PAUSED = "Paused", [Condition("Available=False"), Condition("Progressing=False")];
    /// The shell Deployment does not exist (yet).
    DEPLOYMENT_MISSING = "DeploymentMissing", [Condition("Available=False")];
    /// The Deployment is being created, rolled out or scaled.
    ROLLING_OUT = "RollingOut", [Condition("Progressing=True")];
    /// The Deployment matches the spec and all its pods are ready.
    ROLLOUT_COMPLETE = "RolloutComplete", [Condition("Progressing=False")];
    /// The Deployment gave up on its rollout (its progress deadline passed).
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded", [Condition("Progressing=False"), Condition("Degraded=True")];
    /// The Deployment cannot create its pods (quota, admission, …).
    REPLICA_FAILURE = "ReplicaFailure", [Condition("Degraded=True")];
    /// Nothing is wrong: the shells run as specified.
    AS_EXPECTED = "AsExpected", [Condition("Degraded=False")];
    /// The shell Deployment was created for a new shell (made again at a start, it is no Event:
    /// the status tells the start).
    CREATED = "Created", [NormalEvent];
    /// The shell Deployment's replica count was changed to match `size` (a stop or start by the
    /// lifetime is no Event: the status tells it, the `Stopped` and `Started` transitions count it).
    SCALED = "Scaled", [NormalEvent];
    /// The shell Deployment was changed back to match the spec (a spec change or a hand edit).
    UPDATED = "Updated", [NormalEvent];
    /// The shell Deployment was deleted (or found gone, or left alone as not ours) because the
    /// `MyOwnShell` is being deleted.
    DELETED = "Deleted", [NormalEvent];
    /// A NetworkPolicy of someone else's, in a namespace opened to shells, allows traffic and
    /// can select shell pods, so it opens them past the operator's isolation (made before the
    /// namespace was opened, or by an administrator: admission refuses it otherwise). Told on
    /// the policy; the operator never changes it.
    NETWORK_POLICY_OPENS_SHELLS = "NetworkPolicyOpensShells", [WarningEvent];
    /// A reconcile failed; the message says why. Mirrors `Degraded=True`.
    RECONCILE_FAILED = "ReconcileFailed", [WarningEvent];
    /// A Deployment of the shell's name exists and is not its own: nothing is written until it
    /// goes away.
    DEPLOYMENT_CONFLICT = "DeploymentConflict", [Failure];
    /// Another Deployment already selects pods by the instance label the shell's Deployment
    /// would use: it is not created until that one goes away.
    SELECTOR_CONFLICT = "SelectorConflict", [Failure];
    /// The object lacks its name, namespace or uid (never from the apiserver).
    INVALID_OBJECT = "InvalidObject", [Failure];
    /// The apiserver refused or failed the server-side apply of the Deployment.
    DEPLOYMENT_APPLY_FAILED = "DeploymentApplyFailed", [Failure];
    /// The status could not be written.
    STATUS_WRITE_FAILED = "StatusWriteFailed", [Failure];
    /// The Deployment could not be read from the apiserver.
    DEPLOYMENT_READ_FAILED = "DeploymentReadFailed", [Failure];
    /// The Deployment could not be deleted during cleanup.
    DEPLOYMENT_DELETE_FAILED = "DeploymentDeleteFailed", [Failure];
    /// Cleanup waits for the Deployment to be gone before it releases the finalizer.
    DEPLOYMENT_TERMINATING = "DeploymentTerminating", [Failure];
    /// Cleanup waits for the shell's pods to be gone before it releases the finalizer: the
    /// shell's owner is what keeps strangers out of them.
    SHELL_PODS_TERMINATING = "ShellPodsTerminating", [Failure];
    /// The shell's namespace is not opened to shells (the label `myownshell.io/shells: enabled`,
    /// which a cluster administrator sets): the connect gate does not look there, so the shell
    /// runs no pods until it is.
    NAMESPACE_NOT_OPEN = "NamespaceNotOpen", [Failure];
    /// The shell would start, but its MyOwnShellClass's `maxRunningPerUser` or
    /// `maxRunningPerNamespace` is reached: it waits, with no pods, and the message names the
    /// shells that count; it starts when one of them stops.
    RUNNING_LIMIT_REACHED = "RunningLimitReached", [Failure];
    /// The shell's pods could not be listed during cleanup.
    POD_READ_FAILED = "PodReadFailed", [Failure];
    /// A shell pod that lost its owner could not be deleted during cleanup.
    POD_DELETE_FAILED = "PodDeleteFailed", [Failure];
    /// A shell stopped longer than `lifetime.deletePausedAfter` could not be deleted.
    SHELL_DELETE_FAILED = "ShellDeleteFailed", [Failure];
    /// The shell could not be read from the apiserver (its copy in the controller's cache did not
    /// unpack).
    SHELL_READ_FAILED = "ShellReadFailed", [Failure];
    /// The Deployment watch stopped before its first list (the controller is stopping).
    CACHE_STOPPED = "CacheStopped", [Failure];
    /// Adding or removing the finalizer failed.
    FINALIZER_FAILED = "FinalizerFailed", [Failure];
    /// Someone connected to one of the shell's pods (exec, attach, port-forward, cp, debug);
    /// the note says who, to which pod, how, and why they may.
    CONNECTED = "Connected", [NormalEvent];
    /// Someone was refused a connection to one of the shell's pods: they are neither its owner
    /// nor among those it is shared with.
    CONNECTION_DENIED = "ConnectionDenied", [WarningEvent];
    /// The shell is stopped (`status.stopped` says why and when): no pods run, and its Deployment
    /// is deleted; its spec, `size` included, its home and its record are kept, and `kubectl
    /// myownshell start` makes the Deployment and its pods again. No Event: the status says it,
    /// and `kubectl describe` shows it (issue 41: one write less per stop).
    STOPPED = "Stopped", [Condition("Available=False"), Condition("Progressing=False"), Condition("Stopping=False"), Transition];
    /// No new connection for `lifetime.idleTimeout`: stopped, or (as `Stopping=True`) about to be.
    IDLE = "Idle", [Stop, Condition("Stopping=True")];
    /// Running for `lifetime.maxRunTime`: stopped, or (as `Stopping=True`) about to be.
    MAX_RUN_TIME = "MaxRunTime", [Stop, Condition("Stopping=True")];
    /// Stopped because its owner asked (`spec.stopped`, `kubectl myownshell stop`).
    REQUESTED = "Requested", [Stop];
    /// Its class asks for approval and the shell has it: the message names the approvers and
    /// until when (told as an Event when it is given).
    APPROVED = "Approved", [Condition("Approved=True"), NormalEvent];
    /// Its class asks for approval and the shell does not have it (yet): held at no pods; the
    /// message says how many approvals it has of how many, and from whom.
    WAITING_FOR_APPROVAL = "WaitingForApproval", [Condition("Approved=False"), NormalEvent];
    /// An approver rejected the shell: held at no pods until they take it back.
    REJECTED = "Rejected", [Condition("Approved=False"), WarningEvent];
    /// Its approval ran out: stopped, or (as `Stopping=True`) about to be; it waits for a new
    /// one, and `kubectl myownshell start` then.
    APPROVAL_EXPIRED = "ApprovalExpired", [Stop, Condition("Stopping=True"), Condition("Approved=False")];
    /// No lifetime stop is due within `warnBefore`.
    NO_STOP_DUE = "NoStopDue", [Condition("Stopping=False")];
    /// The shell's lifetime stops it within `warnBefore`; the note says when and why, and how to
    /// extend it.
    STOPPING_SOON = "StoppingSoon", [WarningEvent, Transition];
    /// The shell's pods were started (again): created, started after a stop, or resized from 0.
    /// No Event: `status.startedAt` and `Available` say it.
    STARTED = "Started", [Transition];
    /// The shell was deleted after being stopped for `lifetime.deletePausedAfter`.
    DELETED_AFTER_STOP = "DeletedAfterStop", [NormalEvent];
    /// The shell's pods run the pod template of the running operator release.
    TEMPLATE_CURRENT = "TemplateCurrent", [Condition("UpToDate=True")];
    /// The operator's pod template changed (an upgrade, or a changed operator flag) and the
    /// shell's pods still run the earlier one: it is applied when the shell has no pods, after
    /// no new connection for a while, or on request (`kubectl myownshell update`).
    OPERATOR_UPGRADED = "OperatorUpgraded", [Condition("UpToDate=False")];
    /// The shell's MyOwnShellClass changed what it puts in its shells' pods (a default image,
    /// command or resources) and the shell's pods still run the earlier one: applied at the
    /// same moments as an operator upgrade's.
    CLASS_CHANGED = "ClassChanged", [Condition("UpToDate=False")];
    /// The shell's image is among those its MyOwnShellClass allows.
    CLASS_FITS = "ClassFits", [Condition("FitsClass=True")];
    /// The shell's image is no longer among those its MyOwnShellClass allows: it runs on, and its
    /// next start is refused until its image is changed.
    CLASS_FORBIDS = "ClassForbids", [Condition("FitsClass=False")];
    /// The shell's MyOwnShellClass does not exist (deleted since): it runs on, its caps no longer
    /// count, and its next start is refused.
    CLASS_MISSING = "ClassMissing", [Condition("FitsClass=False")];
    /// The pod template of the running operator release was applied to the shell's pods
    /// (restarting them): the note says why now. A template taken at a start or a stop, with no
    /// running pod to restart, is told by `UpToDate` only.
    TEMPLATE_UPDATED = "TemplateUpdated", [NormalEvent];
    /// A shell pod's image cannot be pulled (`ErrImagePull`, `ImagePullBackOff`,
    /// `InvalidImageName`, …): the message names the pod, the container and the kubelet's reason.
    IMAGE_PULL_FAILED = "ImagePullFailed", [PodFailure];
    /// A shell pod's container keeps exiting and is restarted (`CrashLoopBackOff`): the message
    /// names the pod, the container, its exit code and how it ended.
    CRASH_LOOPING = "CrashLooping", [PodFailure];
    /// A shell pod's container was killed for using more memory than its limit (`OOMKilled`).
    OOM_KILLED = "OOMKilled", [PodFailure];
    /// A shell pod's container cannot be created or started (`CreateContainerConfigError`,
    /// `CreateContainerError`, `RunContainerError`, `StartError`, …).
    CONTAINER_CREATE_FAILED = "ContainerCreateFailed", [PodFailure];
    /// A shell pod cannot be scheduled: the message says why (`Insufficient memory`, `Too many
    /// pods`, …). Not while the scheduler only waits for the shell's home to be bound (`unbound
    /// immediate PersistentVolumeClaims`): `HomePending` tells that.
    UNSCHEDULABLE = "Unschedulable", [PodFailure];
    /// A shell pod runs on a node that is not ready (down, unreachable).
    NODE_NOT_READY = "NodeNotReady", [PodFailure];
    /// The home's claim is bound: the shell's pod mounts it as `$HOME`.
    HOME_BOUND = "HomeBound", [Condition("HomeReady=True")];
    /// The home's volume grew; its file system grows when the shell's pod next starts
    /// (`kubectl myownshell update` restarts it now).
    HOME_RESIZE_PENDING = "HomeResizePending", [Condition("HomeReady=True")];
    /// The home's claim is being created, or waits for a volume: with a class that binds on
    /// first use, until the shell's pod is scheduled; with one that binds at once, the pod waits
    /// for it (and is not `Unschedulable` for that).
    HOME_PENDING = "HomePending", [Condition("HomeReady=False")];
    /// The home's claim has no storage class: `spec.home.storageClassName` is unset and the
    /// cluster has no default StorageClass, so no volume is ever provisioned for it.
    HOME_NO_STORAGE_CLASS = "HomeNoStorageClass", [Condition("HomeReady=False"), Failure];
    /// The home's claim lost its volume (`Lost`): an administrator must restore the volume or
    /// delete the claim.
    HOME_LOST = "HomeLost", [Condition("HomeReady=False"), Failure];
    /// The home's claim is being deleted; it stays while a pod still uses it.
    HOME_TERMINATING = "HomeTerminating", [Condition("HomeReady=False")];
    /// The home's volume lives on a node that is not ready or gone: the shell's pod can run only
    /// there, and runs again when the node returns.
    HOME_NODE_UNAVAILABLE = "HomeNodeUnavailable", [Condition("HomeReady=False"), Failure];
    /// A PersistentVolumeClaim of the shell's name exists and is not its home (another object
    /// controls it, or a home kept for another owner): the shell runs no pods while it is there.
    HOME_CLAIM_CONFLICT = "HomeClaimConflict", [Condition("HomeReady=False"), Failure];
    /// The home's claim could not be created, taken up, grown, kept or deleted: the message
    /// gives the apiserver's answer (growing needs a class with `allowVolumeExpansion`).
    HOME_WRITE_FAILED = "HomeWriteFailed", [Failure];
    /// A home kept from an earlier shell of the same name and owner (`onDelete: Retain`) was
    /// taken up, files and all.
    HOME_REUSED = "HomeReused", [NormalEvent];
    /// The home was kept as the shell was deleted (`onDelete: Retain`), labelled
    /// `myownshell.io/retained-home=true`.
    HOME_RETAINED = "HomeRetained", [NormalEvent];
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_reason_is_camel_case_unique_and_explained() {
        let mut seen = BTreeSet::new();
        for reason in ALL {
            let r = reason.name;
            assert!(r.chars().next().is_some_and(|c| c.is_ascii_uppercase()), "{r}: CamelCase");
            assert!(r.chars().all(|c| c.is_ascii_alphanumeric()), "{r}: letters and digits only");
            assert!(seen.insert(r), "{r} declared twice");
            assert!(reason.meaning.trim().ends_with('.'), "{r}: a sentence of meaning");
            assert!(!reason.uses.is_empty(), "{r}: used somewhere");
        }
        assert_eq!(ALL.len(), 70);
    }
}
