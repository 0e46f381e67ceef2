//! The controller's one error type.

use crate::deployment::BuildError;
use myownshell_api::names::reasons;

/// Why a reconcile did not finish. Each variant has a CamelCase [`Error::reason`] for the
/// `Degraded` condition and the Warning event, and the error policy picks the retry from it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object lacks what the Deployment is built from (name, namespace, uid); objects read
    /// from the apiserver always carry them.
    #[error("cannot build the Deployment: {0}")]
    Build(#[from] BuildError),

    /// The server-side apply of the Deployment was refused or failed.
    #[error("applying Deployment {name}: {source}")]
    ApplyDeployment {
        /// Name of the Deployment (the `MyOwnShell`'s name).
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// The status patch failed (the apiserver was unreachable or refused it).
    #[error("writing the status: {0}")]
    WriteStatus(#[source] kube::Error),

    /// Reading the Deployment from the apiserver failed (the cache had none, or cleanup reads
    /// past the cache).
    #[error("reading Deployment {name}: {source}")]
    ReadDeployment {
        /// Name of the Deployment (the `MyOwnShell`'s name).
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// Deleting the Deployment during cleanup failed (other than by its being gone already).
    #[error("deleting Deployment {name}: {source}")]
    DeleteDeployment {
        /// Name of the Deployment (the `MyOwnShell`'s name).
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// A Deployment of the `MyOwnShell`'s name exists and is not ours (see `ownership`): it is
    /// never written or deleted; the object stays `Degraded` until it goes away.
    #[error(
        "Deployment {0} already exists and is not controlled by this MyOwnShell; \
         delete or rename it, or rename the MyOwnShell"
    )]
    DeploymentConflict(String),

    /// Another Deployment already selects pods by the instance label this `MyOwnShell`'s
    /// Deployment would use (see `labels::may_share_instance`): ours is not created, so the two
    /// never select each other's pods; the object stays `Degraded` until that one goes away.
    #[error(
        "Deployment {deployment} already selects pods labelled app.kubernetes.io/instance={instance}, \
         the label this MyOwnShell's Deployment would select on; rename the MyOwnShell"
    )]
    SelectorConflict {
        /// The Deployment that holds the label.
        deployment: String,
        /// The instance label value both would use.
        instance: String,
    },

    /// Not a failure: cleanup waits for the Deployment to disappear before the finalizer goes.
    #[error("Deployment {0} is still being deleted")]
    DeploymentTerminating(String),

    /// Not a failure: cleanup waits for the shell's pods to be gone before the finalizer goes.
    #[error("{pods} pod(s) of shell {name} are still being deleted")]
    ShellPodsTerminating {
        /// The shell's name.
        name: String,
        /// How many are left.
        pods: usize,
    },

    /// Listing the shell's pods during cleanup failed.
    #[error("reading the pods of shell {name}: {source}")]
    ReadPods {
        /// The shell's name.
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// Deleting a shell pod that lost its owner failed during cleanup.
    #[error("deleting pod {name}: {source}")]
    DeletePod {
        /// The pod's name.
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// Deleting a shell stopped longer than `lifetime.deletePausedAfter` failed.
    #[error("deleting shell {name}, stopped longer than lifetime.deletePausedAfter: {source}")]
    DeleteShell {
        /// The shell's name.
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// Creating, taking up, growing, keeping or deleting the home's claim failed.
    #[error("{what} PersistentVolumeClaim {name}: {source}")]
    WriteHome {
        /// What was being done ("creating", "growing", …).
        what: &'static str,
        /// The claim's name (the `MyOwnShell`'s name).
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// The shell's cached copy did not unpack, and reading it from the apiserver failed.
    #[error("reading shell {name}: {source}")]
    ReadShell {
        /// The shell's name.
        name: String,
        /// What the apiserver (or the connection) said.
        source: kube::Error,
    },

    /// The Deployment watch was dropped before its first full list, so there is no cache to
    /// read; in practice, the controller is stopping.
    #[error("the Deployment cache stopped")]
    CacheStopped,

    /// kube's finalizer helper failed: adding or removing the finalizer, or (wrapped) one of the
    /// errors above from the reconcile step it ran. [`Error::metric_label`],
    /// [`Error::is_waiting`] and [`Error::is_conflict`] look through it.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl Error {
    /// The CamelCase reason shown in the `Degraded` condition and in the Warning event.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Build(_) => reasons::INVALID_OBJECT,
            Error::ApplyDeployment { .. } => reasons::DEPLOYMENT_APPLY_FAILED,
            Error::WriteStatus(_) => reasons::STATUS_WRITE_FAILED,
            Error::ReadDeployment { .. } => reasons::DEPLOYMENT_READ_FAILED,
            Error::DeleteDeployment { .. } => reasons::DEPLOYMENT_DELETE_FAILED,
            Error::DeploymentTerminating(_) => reasons::DEPLOYMENT_TERMINATING,
            Error::ShellPodsTerminating { .. } => reasons::SHELL_PODS_TERMINATING,
            Error::ReadPods { .. } => reasons::POD_READ_FAILED,
            Error::DeletePod { .. } => reasons::POD_DELETE_FAILED,
            Error::DeploymentConflict(_) => reasons::DEPLOYMENT_CONFLICT,
            Error::SelectorConflict { .. } => reasons::SELECTOR_CONFLICT,
            Error::DeleteShell { .. } => reasons::SHELL_DELETE_FAILED,
            Error::WriteHome { .. } => reasons::HOME_WRITE_FAILED,
            Error::ReadShell { .. } => reasons::SHELL_READ_FAILED,
            Error::CacheStopped => reasons::CACHE_STOPPED,
            Error::Finalizer(_) => reasons::FINALIZER_FAILED,
        }
    }

    /// The error a reconcile step returned, out of the finalizer helper's wrapping.
    fn step(&self) -> &Error {
        match self {
            Error::Finalizer(inner) => match inner.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e) | kube::runtime::finalizer::Error::CleanupFailed(e) => {
                    e.step()
                }
                _ => self,
            },
            other => other,
        }
    }

    /// A short label for the reconcile metrics.
    pub fn metric_label(&self) -> &'static str {
        match self.step() {
            Error::Finalizer(_) => "finalizer",
            Error::DeploymentTerminating(_) | Error::ShellPodsTerminating { .. } => "waiting",
            Error::DeploymentConflict(_) | Error::SelectorConflict { .. } => "conflict",
            _ => "error",
        }
    }

    /// Whether this is the expected wait during cleanup rather than a failure.
    pub fn is_waiting(&self) -> bool {
        matches!(self.step(), Error::DeploymentTerminating(_) | Error::ShellPodsTerminating { .. })
    }

    /// Whether the apiserver refused a write because the namespace is being deleted (the
    /// shell's own deletion follows: nothing to retry or report).
    pub fn is_namespace_terminating(&self) -> bool {
        match self.step() {
            Error::ApplyDeployment { source, .. } | Error::WriteStatus(source) | Error::WriteHome { source, .. } => {
                crate::cache::namespaces::is_terminating_refusal(source)
            }
            _ => false,
        }
    }

    /// Whether a foreign Deployment, or another one's selector, is in the way.
    pub fn is_conflict(&self) -> bool {
        matches!(self.step(), Error::DeploymentConflict(_) | Error::SelectorConflict { .. })
    }
}

/// The message of an API error without the `ApiError` wrapper noise, for conditions and events.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::finalizer;

    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.to_owned(),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn reasons_and_metric_labels() {
        let apply = || Error::ApplyDeployment { name: "web".into(), source: api_error(422, "bad") };
        let cases: Vec<(Error, &str, &str)> = vec![
            (apply(), "DeploymentApplyFailed", "error"),
            (Error::WriteStatus(api_error(409, "conflict")), "StatusWriteFailed", "error"),
            (Error::Build(BuildError::MissingMetadata("uid")), "InvalidObject", "error"),
            (
                Error::ReadShell { name: "web".into(), source: api_error(503, "unavailable") },
                "ShellReadFailed",
                "error",
            ),
            (Error::DeploymentTerminating("web".into()), "DeploymentTerminating", "waiting"),
            (Error::DeploymentConflict("web".into()), "DeploymentConflict", "conflict"),
            (
                Error::SelectorConflict { deployment: "old".into(), instance: "web".into() },
                "SelectorConflict",
                "conflict",
            ),
            (Error::Finalizer(Box::new(finalizer::Error::ApplyFailed(apply()))), "FinalizerFailed", "error"),
            (
                Error::Finalizer(Box::new(finalizer::Error::CleanupFailed(Error::DeploymentTerminating("web".into())))),
                "FinalizerFailed",
                "waiting",
            ),
            (
                Error::Finalizer(Box::new(finalizer::Error::AddFinalizer(api_error(409, "x")))),
                "FinalizerFailed",
                "finalizer",
            ),
        ];
        for (error, reason, label) in cases {
            assert_eq!(error.reason(), reason, "{error}");
            assert_eq!(error.metric_label(), label, "{error}");
            assert!(
                reason.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && !reason.contains(' '),
                "CamelCase"
            );
        }
        assert!(Error::DeploymentTerminating("web".into()).is_waiting());
        assert!(!Error::DeploymentConflict("web".into()).is_waiting());
        assert!(Error::DeploymentConflict("web".into()).is_conflict());
        let wrapped = |e| Error::Finalizer(Box::new(finalizer::Error::ApplyFailed(e)));
        assert!(wrapped(Error::DeploymentConflict("web".into())).is_conflict(), "seen through the finalizer");
        assert!(!wrapped(apply()).is_waiting() && !wrapped(apply()).is_conflict());
        assert_eq!(api_message(&api_error(422, "spec.replicas: Invalid value")), "spec.replicas: Invalid value");
    }
}
