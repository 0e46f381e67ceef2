//! The command line, as kubectl users expect it: kubectl's own global flags (`-n/--namespace`,
//! `--context`, `--kubeconfig`, `--user`, `--token`, `--as`, `--as-group`, `--request-timeout`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use myownshell_runtime::time::parse_duration;
use myownshell_session::protocol::Which;

/// Your shells: list them, connect to one (in a session that outlives the connection), list its
/// sessions, start, stop, extend or update them.
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
    /// Open a terminal in a ready pod of NAME (waiting, with a progress line, until one is
    /// ready), in a session its holder keeps: detach with ctrl-p ctrl-q and come back with
    /// `--session ID`; a dropped connection is reattached by itself.
    Connect(ConnectArgs),
    /// List your terminal sessions in shell NAME (and its owner's, when it is not yours): who is
    /// attached, when someone last typed, what runs.
    Sessions {
        /// The MyOwnShell.
        name: String,
        /// `table`, or `json` (the sessions as the holder describes them).
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
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
    /// Approve someone's shell of a class that asks for approval (you must be among the class's
    /// approvers, allowed by RBAC to `approve` it, and not its owner). Recorded in
    /// `spec.approvals` with your name and the time.
    Approve {
        /// The MyOwnShell.
        name: String,
        /// Why (some classes want one).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reject someone's shell of a class that asks for approval: it runs no pods until you take
    /// it back (`kubectl myownshell approve` does not: remove your entry from `spec.approvals`).
    Reject {
        /// The MyOwnShell.
        name: String,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
    },
}

/// `sessions -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

/// `connect`'s flags.
#[derive(Debug, clap::Args)]
pub struct ConnectArgs {
    /// The MyOwnShell.
    pub name: String,
    /// Give up waiting for a ready pod after this long.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Start the shell first if it is stopped.
    #[arg(long)]
    pub start: bool,
    /// Connect through this MyOwnShell gateway (`https://HOST[:PORT]`) with your bearer token
    /// (the kubeconfig user's, or --token) instead of your own exec.
    #[arg(long, env = "MYOWNSHELL_GATEWAY_URL")]
    pub gateway: Option<String>,
    /// The CA the gateway's certificate chains to (PEM; default: the system's CAs).
    #[arg(long, env = "MYOWNSHELL_GATEWAY_CA")]
    pub gateway_certificate_authority: Option<PathBuf>,
    /// Straight to the pod (your own exec) even when a gateway is configured.
    #[arg(long)]
    pub direct: bool,
    /// Reattach to this session (`kubectl myownshell sessions NAME` lists them).
    #[arg(long, value_name = "ID", conflicts_with_all = ["new", "command"])]
    pub session: Option<String>,
    /// Start a new session, even if one of yours is detached (by default, the newest of them is
    /// reattached).
    #[arg(long)]
    pub new: bool,
    /// Watch without typing.
    #[arg(long)]
    pub read_only: bool,
    /// The keys that detach, leaving the session running (docker's format: `ctrl-a,d`; empty:
    /// none).
    #[arg(long, default_value = "ctrl-p,ctrl-q", value_parser = detach_keys)]
    pub detach_keys: DetachKeys,
    /// How long a dropped connection is retried, reattaching to the same session.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub reconnect_grace: Duration,
    /// A new session running this command instead of the shell (straight to the pod: the
    /// gateway runs the shell).
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// The detach keys' bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachKeys(pub Vec<u8>);

fn detach_keys(text: &str) -> Result<DetachKeys, String> {
    myownshell_session::keys::parse(text).map(DetachKeys)
}

impl ConnectArgs {
    /// Which session the flags ask for: `--session ID`, a new one (`--new`, or a command), else
    /// the caller's newest detached one or a new one (the holder picks).
    pub fn which(&self) -> Which {
        let command = (!self.command.is_empty()).then(|| self.command.clone());
        match (&self.session, self.new || command.is_some()) {
            (Some(id), _) => Which::Attach { id: id.clone() },
            (None, true) => Which::New { command },
            (None, false) => Which::AttachOrNew { command: None },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(argv: &[&str]) -> Result<ConnectArgs, String> {
        let argv = ["kubectl-myownshell", "connect"].iter().chain(argv);
        match Args::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            Command::Connect(args) => Ok(args),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn connect_flags_ask_for_a_session() {
        let new = |command: Option<&[&str]>| Which::New {
            command: command.map(|c| c.iter().map(|s| s.to_string()).collect()),
        };
        // (argv, which session, read-only)
        let cases: &[(&[&str], Which, bool)] = &[
            (&["web"], Which::AttachOrNew { command: None }, false),
            (&["web", "--session", "ab12"], Which::Attach { id: "ab12".into() }, false),
            (&["web", "--session=ab12", "--read-only"], Which::Attach { id: "ab12".into() }, true),
            (&["web", "--new"], new(None), false),
            (&["web", "--", "top", "-d", "1"], new(Some(&["top", "-d", "1"])), false),
            (&["web", "--new", "--", "top"], new(Some(&["top"])), false),
        ];
        for (argv, which, read_only) in cases {
            let args = connect(argv).unwrap();
            assert_eq!((args.which(), args.read_only), (which.clone(), *read_only), "{argv:?}");
        }
    }

    #[test]
    fn connect_defaults_and_what_does_not_parse() {
        let args = connect(&["web"]).unwrap();
        assert_eq!(args.detach_keys, DetachKeys(vec![0x10, 0x11]));
        assert_eq!(args.reconnect_grace, Duration::from_secs(60));
        let args = connect(&["web", "--detach-keys", "ctrl-a,d", "--reconnect-grace", "5m"]).unwrap();
        assert_eq!((args.detach_keys, args.reconnect_grace), (DetachKeys(vec![0x01, b'd']), Duration::from_secs(300)));
        assert_eq!(connect(&["web", "--detach-keys="]).unwrap().detach_keys, DetachKeys(vec![]));
        // (argv, words of the error)
        let bad: &[(&[&str], &str)] = &[
            (&["web", "--session", "ab12", "--new"], "cannot be used with"),
            (&["web", "--session", "ab12", "--", "top"], "cannot be used with"),
            (&["web", "--detach-keys", "ctrl-P"], "ctrl-P"),
            (&["web", "--detach-keys", "ab"], "\"ab\""),
            (&["web", "--reconnect-grace", "soon"], "soon"),
        ];
        for (argv, words) in bad {
            let error = connect(argv).err().unwrap_or_default();
            assert!(error.contains(words), "{argv:?}: {error}");
        }
    }

    #[test]
    fn sessions_output() {
        let parse = |argv: &[&str]| match Args::try_parse_from(argv).map(|a| a.command) {
            Ok(Command::Sessions { name, output }) => Ok((name, output)),
            other => Err(format!("{other:?}")),
        };
        assert_eq!(parse(&["k", "sessions", "web"]), Ok(("web".into(), Output::Table)));
        assert_eq!(parse(&["k", "sessions", "web", "-o", "json"]), Ok(("web".into(), Output::Json)));
        assert!(parse(&["k", "sessions", "web", "-o", "yaml"]).is_err());
    }
}
