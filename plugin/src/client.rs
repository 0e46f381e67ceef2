//! The cluster and namespace the flags name, and the same flags for the `kubectl` this plugin
//! runs for an interactive exec.

use std::path::PathBuf;

use anyhow::Context;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::args::Args;

/// Where the plugin works.
pub struct Target {
    /// A client for the cluster.
    pub client: Client,
    /// The namespace.
    pub namespace: String,
    /// `--kubeconfig` and `--context` as given, for a `kubectl` run on the same cluster.
    pub kubectl_flags: Vec<String>,
}

impl Target {
    /// The cluster and namespace of `args`: `--kubeconfig` (else `$KUBECONFIG`, else
    /// `~/.kube/config`, else in-cluster), `--context`, `--namespace` (else the context's).
    pub async fn of(args: &Args) -> anyhow::Result<Self> {
        let options = KubeConfigOptions { context: args.context.clone(), ..KubeConfigOptions::default() };
        let config = match &args.kubeconfig {
            Some(path) => {
                let file = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(file, &options).await?
            }
            None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
            None => kube::Config::infer().await.context("no kubeconfig found (use --kubeconfig)")?,
        };
        let namespace = args.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let mut kubectl_flags = Vec::new();
        if let Some(path) = &args.kubeconfig {
            kubectl_flags.push(format!("--kubeconfig={}", path.display()));
        }
        if let Some(context) = &args.context {
            kubectl_flags.push(format!("--context={context}"));
        }
        Ok(Self { client: Client::try_from(config)?, namespace, kubectl_flags })
    }
}

/// The `kubectl` to run: `$KUBECTL`, else the one on `PATH` (a plugin runs under it).
pub fn kubectl() -> PathBuf {
    std::env::var_os("KUBECTL").filter(|k| !k.is_empty()).map_or_else(|| PathBuf::from("kubectl"), PathBuf::from)
}
