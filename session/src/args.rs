//! The command line: `serve`, `attach`, `list`, `kill`, `install`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::duration;
use myownshell_session::SOCKET_DIR;
use myownshell_session::protocol::{Hello, Size, VERSION, Which};

#[derive(Debug, Parser)]
#[command(
    name = "myownshell-session",
    version,
    about = "Durable terminal sessions for a MyOwnShell: pid 1 of the shell's container holds them, clients attach"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run as the shell container's pid 1: wrap CMD, reap every process, hold the sessions.
    Serve(ServeArgs),
    /// Attach to a session (the newest detached one of --user, else a new one).
    Attach(AttachArgs),
    /// List the sessions.
    List(ListArgs),
    /// End a session and every process of it.
    Kill(KillArgs),
    /// Copy this binary to DEST (mode 0555), for the init container.
    Install(InstallArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Folder of the socket (made 0700; the socket 0600).
    #[arg(long, default_value = SOCKET_DIR)]
    pub socket_dir: PathBuf,
    /// The most sessions at once (the per-pod cap).
    // Up to 1024, beyond what the operator offers (the controller's --max-sessions-per-pod, 16
    // by default, at most 64): a pod of one's own with more, and `cargo xtask bench sessions`,
    // which holds 500 in one pod.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub max_sessions: u16,
    /// A session nobody is attached to for this long ends.
    #[arg(long, default_value = "1h", value_parser = duration::parse)]
    pub detached_ttl: Duration,
    /// Bytes of recent output each session keeps for whoever attaches next.
    #[arg(long, default_value_t = 64 * 1024, value_parser = clap::value_parser!(u32).range(1024..=512 * 1024))]
    pub scrollback: u32,
    /// A session's command when the client names none.
    #[arg(long, default_value = "/bin/sh")]
    pub shell: String,
    /// From SIGHUP to SIGKILL when a session's processes are ended.
    // 2 s: long enough for a shell to write its history and an editor its swap file; short next
    // to a pod's termination grace (30 s by default), inside which every session must end.
    #[arg(long, default_value = "2s", value_parser = duration::parse)]
    pub kill_grace: Duration,
    /// The container's own command.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Folder of the holder's socket.
    #[arg(long, default_value = SOCKET_DIR)]
    pub socket_dir: PathBuf,
    /// The session to attach to.
    #[arg(long, conflicts_with_all = ["new", "command"])]
    pub id: Option<String>,
    /// Start a new session.
    #[arg(long)]
    pub new: bool,
    /// Who you are: a session's creator may type in it, others once allowed.
    #[arg(long, env = "USER", default_value = "user")]
    pub user: String,
    /// Watch without typing.
    #[arg(long)]
    pub read_only: bool,
    /// Speak the protocol on stdin and stdout (the gateway and the plugin, through an exec
    /// without a TTY).
    #[arg(long)]
    pub framed: bool,
    /// Keys that detach, leaving the session running (with a TTY).
    #[arg(long, default_value = "ctrl-p,ctrl-q")]
    pub detach_keys: String,
    /// Terminal columns, without a TTY (with one, its own size).
    #[arg(long, requires = "rows", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub cols: Option<u16>,
    /// Terminal rows, without a TTY.
    #[arg(long, requires = "cols", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub rows: Option<u16>,
    /// The command of a new session (default: the holder's shell).
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Folder of the holder's socket.
    #[arg(long, default_value = SOCKET_DIR)]
    pub socket_dir: PathBuf,
    /// JSON (an array of sessions) instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    /// Folder of the holder's socket.
    #[arg(long, default_value = SOCKET_DIR)]
    pub socket_dir: PathBuf,
    /// The session.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Where to copy the binary.
    pub dest: PathBuf,
}

impl AttachArgs {
    /// The hello these flags ask for, with `size` (the terminal's, or `--cols`/`--rows`).
    pub fn hello(&self, size: Option<Size>) -> Hello {
        let command = (!self.command.is_empty()).then(|| self.command.clone());
        let session = match (&self.id, self.new) {
            (Some(id), _) => Which::Attach { id: id.clone() },
            (None, true) => Which::New { command },
            (None, false) => Which::AttachOrNew { command },
        };
        Hello { version: VERSION, user: self.user.clone(), session, read_only: self.read_only, size }
    }

    /// `--cols` and `--rows`, if given.
    pub fn size(&self) -> Option<Size> {
        Some(Size { cols: self.cols?, rows: self.rows? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attach(argv: &[String]) -> AttachArgs {
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Attach(args) => args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_gateways_command_line_makes_the_hello_it_was_made_from() {
        let hellos = [
            Hello { version: VERSION, user: "alice".into(), session: Which::default(), read_only: false, size: None },
            Hello {
                version: VERSION,
                user: "bob@example.com".into(),
                session: Which::New { command: Some(vec!["top".into(), "-d".into(), "--x".into()]) },
                read_only: false,
                size: Some(Size { cols: 120, rows: 40 }),
            },
            Hello {
                version: VERSION,
                user: "carol".into(),
                session: Which::Attach { id: "ab12cd34".into() },
                read_only: true,
                size: Some(Size { cols: 80, rows: 24 }),
            },
            Hello {
                version: VERSION,
                user: "dan".into(),
                session: Which::AttachOrNew { command: Some(vec!["bash".into()]) },
                read_only: false,
                size: None,
            },
        ];
        for hello in hellos {
            let argv = myownshell_session::exec::attach(&hello);
            let args = attach(&argv);
            assert!(args.framed, "{argv:?}");
            assert_eq!(args.hello(args.size()), hello, "{argv:?}");
        }
    }

    #[test]
    fn flags_that_contradict_are_refused() {
        let bad: &[&[&str]] = &[
            &["x", "attach", "--id", "a", "--new"],
            &["x", "attach", "--id", "a", "--", "top"],
            &["x", "attach", "--cols", "80"],
            &["x", "attach", "--cols", "0", "--rows", "5"],
            &["x", "serve"],
            &["x", "serve", "--max-sessions", "0", "--", "sleep"],
            &["x", "serve", "--max-sessions", "1025", "--", "sleep"],
            &["x", "serve", "--detached-ttl", "soon", "--", "sleep"],
        ];
        for argv in bad {
            assert!(Cli::try_parse_from(*argv).is_err(), "{argv:?}");
        }
        let Command::Serve(serve) = Cli::try_parse_from(["x", "serve", "--", "sleep", "1"]).unwrap().command else {
            panic!("not serve")
        };
        assert_eq!((serve.max_sessions, serve.scrollback, serve.shell.as_str()), (16, 65536, "/bin/sh"));
        assert_eq!(serve.detached_ttl, Duration::from_secs(3600));
    }
}
