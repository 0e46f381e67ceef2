//! Where recordings live: `--recordings-dir/<namespace>/<shell>/<start>-<terminal>.cast`, what is
//! there for a shell, one file read back, and the sweep that deletes what is older than
//! `--recording-retention`. Every name from a request is checked before it touches a path.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// The recordings of a gateway.
#[derive(Debug, Clone)]
pub struct Store {
    /// The folder.
    pub dir: PathBuf,
    /// The most a recording may hold.
    pub max_bytes: u64,
    /// How long recordings are kept.
    pub retention: Duration,
    /// What all recordings, and each shell's, may hold.
    pub quota: Arc<super::quota::Quota>,
}

/// One recording, listed.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Entry {
    /// The file name (what a download asks for).
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Whether `name` may be a namespace's or a shell's: what Kubernetes allows in either (DNS
/// subdomain characters), so nothing can climb out of the folder.
pub fn valid_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !name.starts_with('.')
}

/// Whether `name` is a recording's file name as [`Store::path_for`] makes them.
pub fn valid_file_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".cast") else { return false };
    let Some((start, id)) = stem.split_once('-') else { return false };
    start.len() == 16
        && start.bytes().all(|b| b.is_ascii_digit() || b == b'T' || b == b'Z')
        && id.len() == 8
        && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Store {
    /// The folder of shell `shell` in `namespace`.
    fn folder(&self, namespace: &str, shell: &str) -> Option<PathBuf> {
        (valid_object_name(namespace) && valid_object_name(shell)).then(|| self.dir.join(namespace).join(shell))
    }

    /// The file of a terminal started `at` with id `terminal`.
    pub fn path_for(&self, namespace: &str, shell: &str, at: Timestamp, terminal: &str) -> Option<PathBuf> {
        let start = at.strftime("%Y%m%dT%H%M%SZ").to_string();
        let id: String = terminal.chars().take(8).collect();
        Some(self.folder(namespace, shell)?.join(format!("{start}-{id}.cast")))
    }

    /// The recordings of a shell, newest first.
    pub async fn list(&self, namespace: &str, shell: &str) -> std::io::Result<Vec<Entry>> {
        let Some(folder) = self.folder(namespace, shell) else { return Ok(Vec::new()) };
        let mut entries = Vec::new();
        let mut dir = match tokio::fs::read_dir(&folder).await {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(entries),
            Err(e) => return Err(e),
        };
        while let Some(entry) = dir.next_entry().await? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if valid_file_name(&name) {
                entries.push(Entry { name, bytes: entry.metadata().await?.len() });
            }
        }
        entries.sort_by(|a, b| b.name.cmp(&a.name));
        Ok(entries)
    }

    /// One recording's bytes, if `name` is one of the shell's.
    pub async fn read(&self, namespace: &str, shell: &str, name: &str) -> std::io::Result<Option<Vec<u8>>> {
        let Some(folder) = self.folder(namespace, shell).filter(|_| valid_file_name(name)) else { return Ok(None) };
        match tokio::fs::read(folder.join(name)).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Delete the recordings older than the retention, and count what is left against the
    /// quotas; how many went.
    pub fn sweep(&self, now: SystemTime) -> usize {
        let deleted = sweep_dir(&self.dir, now, self.retention, 0);
        self.quota.recount(&self.dir);
        deleted
    }
}

fn sweep_dir(dir: &Path, now: SystemTime, retention: Duration, depth: usize) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut deleted = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() && depth < 2 {
            deleted += sweep_dir(&path, now, retention, depth + 1);
        } else if meta.is_file() && valid_file_name(&entry.file_name().to_string_lossy()) {
            let old = meta.modified().ok().and_then(|m| now.duration_since(m).ok()).is_some_and(|age| age > retention);
            if old && std::fs::remove_file(&path).is_ok() {
                deleted += 1;
            }
        }
    }
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_requests_stay_in_the_folder() {
        let cases = [
            ("web", true),
            ("team-a.web", true),
            ("", false),
            ("..", false),
            (".hidden", false),
            ("a/b", false),
            ("Web", false),
            ("a%2fb", false),
        ];
        for (name, want) in cases {
            assert_eq!(valid_object_name(name), want, "{name:?}");
        }
        let files = [
            ("20261128T215500Z-0123abcd.cast", true),
            ("20261128T215500Z-0123abcd.cast.bak", false),
            ("../20261128T215500Z-0123abcd.cast", false),
            ("20261128T215500Z-0123abc.cast", false),
            ("x-0123abcd.cast", false),
        ];
        for (name, want) in files {
            assert_eq!(valid_file_name(name), want, "{name:?}");
        }
    }

    #[test]
    fn paths_and_the_sweep() {
        let dir = std::env::temp_dir().join(format!("recordings-{}", std::process::id()));
        let quota = Arc::new(super::super::quota::Quota::new(u64::MAX, u64::MAX));
        let store = Store { dir: dir.clone(), max_bytes: 1024, retention: Duration::from_secs(3600), quota };
        let at = Timestamp::from_second(1_800_000_000).unwrap_or_default();
        let path = store.path_for("team", "web", at, "0123abcdef").expect("valid names");
        assert_eq!(path, dir.join("team/web/20270115T080000Z-0123abcd.cast"));
        assert_eq!(store.path_for("..", "web", at, "0123abcd"), None);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(&path, "{}\n").expect("write");
        assert_eq!(store.sweep(SystemTime::now()), 0, "a fresh recording stays");
        assert_eq!(store.sweep(SystemTime::now() + Duration::from_secs(7200)), 1, "an old one goes");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
