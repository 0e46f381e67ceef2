//! `install DEST`: this very binary copied to DEST for the shell container, by the operator
//! image's init container (which has no `cp`). Written to a temporary file beside DEST and
//! renamed over it, so DEST is never seen half-written; mode 0555, as it is mounted read-only.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Copy `/proc/self/exe` to `dest`.
pub fn install(dest: &Path) -> Result<(), String> {
    let source = Path::new("/proc/self/exe");
    let bytes = std::fs::read(source).map_err(|e| format!("reading this binary ({}): {e}", source.display()))?;
    let dir = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = dest.file_name().ok_or_else(|| format!("{} names no file", dest.display()))?;
    let temp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(&bytes)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o555))?;
        file.sync_all()?;
        std::fs::rename(&temp, dest)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("writing {}: {e}", dest.display())
    })
}
