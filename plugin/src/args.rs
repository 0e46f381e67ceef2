//! The command line, as kubectl users expect it: kubectl's own global flags (`-n/--namespace`,
//! `--context`, `--kubeconfig`, `--user`, `--token`, `--as`, `--as-group`, `--request-timeout`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use myownshell_runtime::time::parse_duration;

/// Your shells: list them, connect to one, start, stop, extend or update them.
#[derive(Debug, Parser)]
#[command(name = "kubectl-myownshell", bin_name = "kubectl myownshell", version)]
pub struct Args {
    /// The namespace (default: the context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The kubeconfig context to use (default: the current one).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig user to use (default: the context's).
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// A bearer token instead of the kubeconfig user's credentials.
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// The user to act as (impersonation; your own credentials must allow it).
    #[arg(long = "as", global = true)]
    pub as_user: Option<String>,
    /// A group to act as (repeat for several; with --as).
    #[arg(long = "as-group", global = true, requires = "as_user")]
    pub as_groups: Vec<String>,
    /// How long one request to the apiserver may take (`0`: no limit), e.g. `30s`.
    #[arg(long, global = true, value_parser = request_timeout)]
    pub request_timeout: Option<Duration>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `--request-timeout`: kubectl's forms, a bare number of seconds or a duration.
fn request_timeout(text: &str) -> Result<Duration, String> {
    match text.parse::<u64>() {
        Ok(seconds) => Ok(Duration::from_secs(seconds)),
        Err(_) => parse_duration(text),
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the shells: owner, state, ready pods, when each stops next and why.
    Ls {
        /// List the shells of every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
    },
    /// List the shell classes you may use in the namespace (RBAC's `use`, asked by
    /// SelfSubjectAccessReview; the default class needs none): what each offers.
    Classes,
    /// Open an interactive shell in a ready pod of NAME, waiting (with a progress line) until
    /// one is ready.
    Connect {
        /// The MyOwnShell.
        name: String,
        /// Give up waiting for a ready pod after this long.
        #[arg(long, default_value = "2m", value_parser = parse_duration)]
        timeout: Duration,
        /// Start the shell first if it is stopped.
        #[arg(long)]
        start: bool,
        /// Connect through this MyOwnShell gateway (`https://HOST[:PORT]`) with your bearer token
        /// (the kubeconfig user's, or --token) instead of `kubectl exec`.
        #[arg(long, env = "MYOWNSHELL_GATEWAY_URL")]
        gateway: Option<String>,
        /// The CA the gateway's certificate chains to (PEM; default: the system's CAs).
        #[arg(long, env = "MYOWNSHELL_GATEWAY_CA")]
        gateway_certificate_authority: Option<PathBuf>,
        /// `kubectl exec` even when a gateway is configured.
        #[arg(long)]
        direct: bool,
        /// The command to run instead of `sh` (with `kubectl exec`: the gateway runs its shell).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Start a stopped shell: its pods come back (`spec.size` of them) and its clocks restart.
    Start {
        /// The MyOwnShell.
        name: String,
    },
    /// Stop a shell now: its pods go; the shell and its spec (size included) stay.
    Stop {
        /// The MyOwnShell.
        name: String,
    },
    /// Restart the shell's pods on this operator release's pod template now: a template that
    /// changed with an operator upgrade otherwise waits for a quiet moment (`UP-TO-DATE False`).
    Update {
        /// The MyOwnShell.
        name: String,
    },
    /// Push the next stop back: no idle or run-time stop before DURATION from now (default: the
    /// shell's idle timeout, else 1h). The shell keeps running as it is: nothing restarts.
    Extend {
        /// The MyOwnShell.
        name: String,
        /// How long from now, e.g. `30m` or `2h`.
        #[arg(value_parser = parse_duration)]
        duration: Option<Duration>,
    },
}
