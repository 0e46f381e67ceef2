//! The controller's one error type.

use crate::deployment::BuildError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot build the Deployment: {0}")]
    Build(#[from] BuildError),

    #[error("applying Deployment {name}: {source}")]
    ApplyDeployment { name: String, source: kube::Error },

    #[error("writing the status: {0}")]
    WriteStatus(#[source] kube::Error),

    #[error("reading Deployment {name}: {source}")]
    ReadDeployment { name: String, source: kube::Error },

    #[error("deleting Deployment {name}: {source}")]
    DeleteDeployment { name: String, source: kube::Error },

    /// Not a failure: cleanup waits for the Deployment to disappear before the finalizer goes.
    #[error("Deployment {0} is still being deleted")]
    DeploymentTerminating(String),

    #[error("the Deployment cache stopped")]
    CacheStopped,

    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl Error {
    /// The CamelCase reason shown in the `Degraded` condition and in the Warning event.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Build(_) => "InvalidObject",
            Error::ApplyDeployment { .. } => "DeploymentApplyFailed",
            Error::WriteStatus(_) => "StatusWriteFailed",
            Error::ReadDeployment { .. } => "DeploymentReadFailed",
            Error::DeleteDeployment { .. } => "DeploymentDeleteFailed",
            Error::DeploymentTerminating(_) => "DeploymentTerminating",
            Error::CacheStopped => "CacheStopped",
            Error::Finalizer(_) => "FinalizerFailed",
        }
    }

    /// A short label for the reconcile metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Finalizer(inner) => match inner.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e) | kube::runtime::finalizer::Error::CleanupFailed(e) => {
                    e.metric_label()
                }
                _ => "finalizer",
            },
            Error::DeploymentTerminating(_) => "waiting",
            _ => "error",
        }
    }

    /// Whether this is the expected wait during cleanup rather than a failure.
    pub fn is_waiting(&self) -> bool {
        self.metric_label() == "waiting"
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
            (Error::DeploymentTerminating("web".into()), "DeploymentTerminating", "waiting"),
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
        assert_eq!(api_message(&api_error(422, "spec.replicas: Invalid value")), "spec.replicas: Invalid value");
    }
}
