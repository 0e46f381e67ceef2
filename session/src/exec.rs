//! The command lines the gateway and the plugin run in the shell's container through
//! `kubectl exec POD -c shell -- …` (without a TTY for [`attach`], whose stdin and stdout then
//! carry [`crate::protocol`] frames).
//!
//! `attach --framed` sends the hello itself, built from its flags: [`attach`] writes the flags
//! for a [`Hello`], so the client's first frame back is `Attached` (or `Refused`), and from then
//! on every frame it writes to the exec's stdin goes to the holder as it is.

use crate::BINARY;
use crate::protocol::{Hello, Which};

/// `attach --framed` with the flags that make the hello `hello` (its version is this crate's).
pub fn attach(hello: &Hello) -> Vec<String> {
    let mut argv = vec![BINARY.to_owned(), "attach".into(), "--framed".into(), "--user".into(), hello.user.clone()];
    let command = match &hello.session {
        Which::New { command } => {
            argv.push("--new".into());
            command
        }
        Which::Attach { id } => {
            argv.extend(["--id".into(), id.clone()]);
            &None
        }
        Which::AttachOrNew { command } => command,
    };
    if hello.read_only {
        argv.push("--read-only".into());
    }
    if let Some(size) = hello.size {
        argv.extend(["--cols".into(), size.cols.to_string(), "--rows".into(), size.rows.to_string()]);
    }
    if let Some(command) = command {
        argv.push("--".into());
        argv.extend(command.iter().cloned());
    }
    argv
}

/// `list --json`: its stdout is a JSON array of [`crate::protocol::SessionInfo`].
pub fn list() -> Vec<String> {
    vec![BINARY.to_owned(), "list".into(), "--json".into()]
}

/// `kill ID`: exits 0 once every process of the session is gone.
pub fn kill(id: &str) -> Vec<String> {
    vec![BINARY.to_owned(), "kill".into(), id.to_owned()]
}
