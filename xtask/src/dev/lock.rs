//! One `cargo xtask dev` per state directory: a second one says who is running instead of
//! fighting over ports and files.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Held while dev runs; removed on drop.
pub struct DevLock {
    path: PathBuf,
}

impl DevLock {
    pub fn acquire(state_dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(state_dir).with_context(|| format!("creating {}", state_dir.display()))?;
        let path = state_dir.join("dev.lock");
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    writeln!(file, "{}", std::process::id())?;
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).unwrap_or_default().trim().parse::<u32>().ok();
                    match holder {
                        Some(pid) if Path::new(&format!("/proc/{pid}")).exists() => bail!(
                            "`cargo xtask dev` is already running (pid {pid}, state in {}); use it (`source {}/env`) or stop it first",
                            state_dir.display(),
                            state_dir.display()
                        ),
                        // A crashed run left its lock behind: take it over.
                        _ => std::fs::remove_file(&path)?,
                    }
                }
                Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
            }
        }
        bail!("could not take {}", path.display())
    }
}

impl Drop for DevLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
