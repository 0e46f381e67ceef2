//! `--kubeconfig`, and the Kubernetes client every binary builds from it the same way.

use std::path::PathBuf;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Which cluster to talk to, flattened into each binary's flags.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ClientArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `--kubeconfig` file could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The `--kubeconfig` path as given.
        path: String,
        /// What was wrong with it.
        message: String,
    },
    /// No configuration was found (no `$KUBECONFIG`, no `~/.kube/config`, not in a cluster), or
    /// the one found is unusable.
    #[error("kubernetes client: {0}")]
    Infer(String),
}

impl ClientArgs {
    /// A client from `--kubeconfig`, else from `$KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// configuration, in that order (kube's `Config::infer`).
    pub async fn client(&self) -> Result<Client, ClientError> {
        let Some(path) = &self.kubeconfig else {
            let config = kube::Config::infer().await.map_err(|e| ClientError::Infer(e.to_string()))?;
            return Client::try_from(config).map_err(|e| ClientError::Infer(e.to_string()));
        };
        let error = |message: String| ClientError::Kubeconfig { path: path.display().to_string(), message };
        let file = Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|e| error(e.to_string()))?;
        Client::try_from(config).map_err(|e| error(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Binary {
        #[command(flatten)]
        client: ClientArgs,
    }

    #[tokio::test]
    async fn a_kubeconfig_that_cannot_be_read_is_named() {
        let args = Binary::parse_from(["bin", "--kubeconfig", "/nonexistent/kubeconfig"]).client;
        let err = args.client().await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("kubeconfig /nonexistent/kubeconfig: "), "{err}");
        assert_eq!(Binary::parse_from(["bin"]).client, ClientArgs::default());
    }
}
