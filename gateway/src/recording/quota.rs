//! How much the recordings may hold: per shell (`--recordings-max-shell-bytes`) and in all
//! (`--recordings-max-total-bytes`), beside each recording's own limit (`--recording-max-bytes`),
//! so that no user's output, and not all of them together, can fill the gateway's disk.
//!
//! What is on disk is counted when the gateway starts and after every retention sweep
//! ([`Quota::recount`]); every line a writer puts down is taken from both quotas first
//! ([`Quota::take`]), so the count never lags what is written. A recording that finds no room
//! stops, says why in itself, and its terminal ends (a recorded session never goes on
//! unrecorded); a new recorded terminal is refused while its shell, or the gateway, is full.

use std::collections::HashMap;
use std::path::Path;

use parking_lot::Mutex;

/// A shell, by namespace and name.
pub type ShellKey = (String, String);

/// Why a recording finds no room.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    /// The shell's recordings hold their most.
    #[error(
        "the recordings of shell {0}/{1} hold {2} bytes, the most one shell's may (--recordings-max-shell-bytes) until older ones pass the retention"
    )]
    Shell(String, String, u64),
    /// All recordings hold their most.
    #[error(
        "the gateway's recordings hold {0} bytes, the most they may (--recordings-max-total-bytes) until older ones pass the retention"
    )]
    Total(u64),
}

/// The room left, and what is used, by shell and in all.
#[derive(Debug)]
pub struct Quota {
    shell_limit: u64,
    total_limit: u64,
    used: Mutex<Used>,
}

#[derive(Debug, Default)]
struct Used {
    total: u64,
    shells: HashMap<ShellKey, u64>,
}

impl Quota {
    /// At most `shell_limit` bytes for one shell's recordings and `total_limit` for all.
    pub fn new(shell_limit: u64, total_limit: u64) -> Self {
        Self { shell_limit, total_limit, used: Mutex::new(Used::default()) }
    }

    /// Whether `shell` may start a recording now.
    pub fn room_for(&self, shell: &ShellKey) -> Result<(), Full> {
        self.check(&self.used.lock(), shell, 0)
    }

    fn check(&self, used: &Used, shell: &ShellKey, more: u64) -> Result<(), Full> {
        let mine = used.shells.get(shell).copied().unwrap_or(0);
        if mine.saturating_add(more) > self.shell_limit || (more == 0 && mine >= self.shell_limit) {
            return Err(Full::Shell(shell.0.clone(), shell.1.clone(), mine));
        }
        if used.total.saturating_add(more) > self.total_limit || (more == 0 && used.total >= self.total_limit) {
            return Err(Full::Total(used.total));
        }
        Ok(())
    }

    /// Count `bytes` more of `shell`'s, if both quotas have room for them.
    pub fn take(&self, shell: &ShellKey, bytes: u64) -> Result<(), Full> {
        let mut used = self.used.lock();
        self.check(&used, shell, bytes)?;
        used.total += bytes;
        *used.shells.entry(shell.clone()).or_default() += bytes;
        Ok(())
    }

    /// Count what is on disk under `dir` (`<namespace>/<shell>/<file>`) again, from scratch.
    pub fn recount(&self, dir: &Path) {
        let mut fresh = Used::default();
        for (shell, bytes) in sizes(dir) {
            fresh.total += bytes;
            *fresh.shells.entry(shell).or_default() += bytes;
        }
        *self.used.lock() = fresh;
    }
}

/// The size of every file two folders down `dir`, by the folders' names.
fn sizes(dir: &Path) -> Vec<(ShellKey, u64)> {
    let mut out = Vec::new();
    let read = |d: &Path| std::fs::read_dir(d).into_iter().flatten().flatten();
    for namespace in read(dir).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
        for shell in read(&namespace.path()).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
            let key = (
                namespace.file_name().to_string_lossy().into_owned(),
                shell.file_name().to_string_lossy().into_owned(),
            );
            let bytes: u64 =
                read(&shell.path()).filter_map(|f| f.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum();
            out.push((key, bytes));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(shell: &str) -> ShellKey {
        ("team".to_owned(), shell.to_owned())
    }

    #[test]
    fn each_shell_and_all_of_them_stay_within_their_quota() {
        let quota = Quota::new(100, 150);
        assert_eq!(quota.take(&key("web"), 60), Ok(()));
        assert_eq!(quota.take(&key("web"), 40), Ok(()), "exactly the shell's quota");
        assert_eq!(quota.take(&key("web"), 1), Err(Full::Shell("team".into(), "web".into(), 100)));
        assert_eq!(quota.room_for(&key("web")), Err(Full::Shell("team".into(), "web".into(), 100)));
        assert_eq!(quota.room_for(&key("db")), Ok(()));
        assert_eq!(quota.take(&key("db"), 50), Ok(()), "exactly the total");
        assert_eq!(quota.take(&key("ci"), 1), Err(Full::Total(150)));
        assert_eq!(quota.room_for(&key("ci")), Err(Full::Total(150)));
    }

    #[test]
    fn what_is_on_disk_is_counted_again() {
        let dir = std::env::temp_dir().join(format!("recording-quota-{}", std::process::id()));
        let folder = dir.join("team/web");
        std::fs::create_dir_all(&folder).expect("mkdir");
        std::fs::write(folder.join("20270115T080000Z-0123abcd.cast"), vec![b'x'; 80]).expect("write");
        let quota = Quota::new(100, 1000);
        quota.recount(&dir);
        assert_eq!(quota.take(&key("web"), 21), Err(Full::Shell("team".into(), "web".into(), 80)));
        assert_eq!(quota.take(&key("web"), 20), Ok(()));
        std::fs::remove_dir_all(&dir).expect("rm");
        quota.recount(&dir);
        assert_eq!(quota.room_for(&key("web")), Ok(()), "a sweep frees room");
    }
}
