//! The cluster and namespace the flags name, and the same flags for the `kubectl` this plugin
//! runs for a plain interactive exec (a pod without a session holder).

use std::path::PathBuf;

use anyhow::Context;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::args::Args;

/// Where the plugin works.
pub struct Target {
    /// A client for the cluster.
    pub client: Client,
    /// The same, for execs: no read or write timeout (`--request-timeout` bounds requests, not
    /// a terminal that sits quiet).
    pub exec_client: Client,
    /// The namespace.
    pub namespace: String,
    /// The user as the kubeconfig (and `--token`) say, for the gateway's bearer token
    /// ([`crate::credential`]), read only when the gateway is used.
    pub auth: kube::config::AuthInfo,
    /// kubectl's global flags as given, for a `kubectl` run on the same cluster as the same user.
    pub kubectl_flags: Vec<String>,
}

impl Target {
    /// The cluster and namespace of `args`: `--kubeconfig` (else `$KUBECONFIG`, else
    /// `~/.kube/config`, else in-cluster), `--context`, `--namespace` (else the context's).
    pub async fn of(args: &Args) -> anyhow::Result<Self> {
        let options = KubeConfigOptions {
            context: args.context.clone(),
            user: args.user.clone(),
            ..KubeConfigOptions::default()
        };
        let mut config = match &args.kubeconfig {
            Some(path) => {
                let file = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(file, &options).await?
            }
            None if args.context.is_some() || args.user.is_some() => kube::Config::from_kubeconfig(&options).await?,
            None => kube::Config::infer().await.context("no kubeconfig found (use --kubeconfig)")?,
        };
        apply_flags(&mut config, args);
        let namespace = args.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let auth = config.auth_info.clone();
        let mut exec_config = config.clone();
        exec_config.read_timeout = None;
        exec_config.write_timeout = None;
        Ok(Self {
            client: Client::try_from(config)?,
            exec_client: Client::try_from(exec_config)?,
            namespace,
            auth,
            kubectl_flags: kubectl_flags(args),
        })
    }
}

/// `--token`, `--as`, `--as-group` and `--request-timeout` on top of the kubeconfig, as kubectl
/// applies them: a token replaces the user's other credentials.
fn apply_flags(config: &mut kube::Config, args: &Args) {
    if let Some(token) = &args.token {
        config.auth_info = kube::config::AuthInfo { token: Some(token.clone().into()), ..Default::default() };
    }
    if let Some(user) = &args.as_user {
        config.auth_info.impersonate = Some(user.clone());
        config.auth_info.impersonate_groups = (!args.as_groups.is_empty()).then(|| args.as_groups.clone());
    }
    if let Some(timeout) = args.request_timeout.filter(|t| !t.is_zero()) {
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        config.connect_timeout = Some(timeout);
    }
}

/// The same flags for a `kubectl` run on the same cluster as the same user.
pub fn kubectl_flags(args: &Args) -> Vec<String> {
    let mut flags = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            flags.push(format!("--{name}={value}"));
        }
    };
    flag("kubeconfig", args.kubeconfig.as_ref().map(|p| p.display().to_string()));
    flag("context", args.context.clone());
    flag("user", args.user.clone());
    flag("token", args.token.clone());
    flag("as", args.as_user.clone());
    for group in &args.as_groups {
        flag("as-group", Some(group.clone()));
    }
    flag("request-timeout", args.request_timeout.map(|t| format!("{}s", t.as_secs())));
    flags
}

/// The `kubectl` to run: `$KUBECTL`, else the one on `PATH` (a plugin runs under it).
pub fn kubectl() -> PathBuf {
    std::env::var_os("KUBECTL").filter(|k| !k.is_empty()).map_or_else(|| PathBuf::from("kubectl"), PathBuf::from)
}
