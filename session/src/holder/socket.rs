//! The holder's Unix socket: `DIR/session.sock` (DIR `/run/myownshell` by default), the folder
//! made 0700 and the socket 0600.
//!
//! That is the whole of the holder's access control: the kernel lets only the folder's owner
//! (the shell's user; the container runs as one user) and root reach the socket, and whoever
//! reaches it may list, attach to and end every session. Anyone who can run a process in the
//! shell's container as its user can do all that anyway; the gateway and the plugin get there
//! through `kubectl exec`, which the connect gate decides.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

use myownshell_session::SOCKET_NAME;

/// The socket's path in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// Listen on `dir`'s socket, replacing a stale one (left by a holder that was killed); refuse
/// if another holder answers on it.
pub fn bind(dir: &Path) -> Result<UnixListener, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("making {} private (0700): {e}", dir.display()))?;
    let path = path(dir);
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            return Err(format!("another holder already serves {}", path.display()));
        }
        std::fs::remove_file(&path).map_err(|e| format!("removing the stale socket {}: {e}", path.display()))?;
    }
    let listener = UnixListener::bind(&path).map_err(|e| format!("listening on {}: {e}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("making {} private (0600): {e}", path.display()))?;
    Ok(listener)
}
