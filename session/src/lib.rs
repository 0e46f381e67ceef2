//! `myownshell-session`: durable terminals for a shell's pod. A terminal belongs to the shell,
//! not to the door it came through: a small static binary, put into every shell pod by the
//! controller (an init container runs `myownshell-session install` from the operator's image
//! into an emptyDir at [`INSTALL_DIR`]), runs as the shell container's pid 1 (`serve`) and
//! keeps each session's PTY and processes, its recent output, and who is attached, behind a Unix
//! socket in [`SOCKET_DIR`] that only the shell's user can reach. A page that reloads, a gateway
//! that restarts or a `kubectl exec` that drops leaves the session running; the next `attach`
//! picks it up.
//!
//! This library is what the gateway and the plugin need to talk to it:
//! - [`protocol`]: the frames and messages, pure (bytes in, messages out), with the
//!   incremental [`protocol::Decoder`];
//! - [`exec`]: the command lines to run through `kubectl exec` (`attach --framed`, `list --json`,
//!   `kill`);
//! - [`keys`]: the detach keys (`ctrl-p,ctrl-q`), parsed and watched for in keystrokes, for
//!   `attach` at a TTY and the plugin's `connect` alike;
//! - the fixed paths below.
//!
//! The binary's own modules (the holder, the clients) are in `src/main.rs`'s tree.

pub mod exec;
pub mod keys;
pub mod protocol;
pub mod queries;

/// Where the init container installs the binary (an emptyDir, mounted read-only into the
/// shell's container).
pub const INSTALL_DIR: &str = "/opt/myownshell";

/// The binary in the shell's container.
pub const BINARY: &str = "/opt/myownshell/myownshell-session";

/// The folder of the holder's socket (`serve --socket-dir`): made 0700 by the holder, and must be
/// writable in the shell's container (an emptyDir when its root file system is read-only).
pub const SOCKET_DIR: &str = "/run/myownshell";

/// The socket's name in [`SOCKET_DIR`].
pub const SOCKET_NAME: &str = "session.sock";
