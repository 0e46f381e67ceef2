//! `--cert-dir` mode: `tls.crt` and `tls.key` come from files (a cert-manager Secret mounted as a
//! volume) and are reloaded when they change. Nothing is injected: cert-manager's CA injector
//! owns `caBundle` then.
//!
//! Kubelet updates a mounted Secret by swapping a symlink, so the files are compared by content
//! on a short poll rather than watched by inode. A half-written or mismatched pair is ignored
//! (the previous certificate stays) until a consistent pair appears.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::manager::CertStatus;
use crate::trust::validity;
use myownshell_runtime::tls::{LiveResolver, certified_key_from_pem};

/// File in the directory with the serving certificate chain (PEM, leaf first), as a
/// `kubernetes.io/tls` Secret mounted as a volume names it.
pub const CERT_FILE: &str = "tls.crt";
/// File in the directory with the private key of [`CERT_FILE`]'s leaf (PEM).
pub const KEY_FILE: &str = "tls.key";

/// Read and parse the pair in `dir`.
pub fn load(dir: &Path) -> Result<(String, rustls::sign::CertifiedKey), String> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))
    };
    let (cert, key) = (read(CERT_FILE)?, read(KEY_FILE)?);
    let certified = certified_key_from_pem(&cert, &key).map_err(|e| format!("{}: {e}", dir.display()))?;
    certified.keys_match().map_err(|e| format!("{}: certificate and key do not match: {e}", dir.display()))?;
    Ok((cert, certified))
}

fn status_of(resolver: &LiveResolver) -> CertStatus {
    let not_after = resolver.leaf_der().and_then(|l| validity(&l).ok()).map(|v| v.not_after_time());
    CertStatus { serving: true, trusted: true, not_after, detail: String::new() }
}

/// A running file-backed certificate source.
pub struct CertDir {
    /// Hands the current pair to the TLS server; swapped in place on every reload.
    pub resolver: Arc<LiveResolver>,
    /// Expiry of the served certificate, updated on every reload. `trusted` is always true:
    /// whether clients trust it is cert-manager's business here.
    pub status: watch::Receiver<CertStatus>,
    /// The reload loop; it ends when the `shutdown` token given to [`start`] is cancelled.
    pub task: tokio::task::JoinHandle<()>,
}

/// Load the pair now (an error if it is not there or unusable), then reload it every `poll`
/// until `shutdown`.
pub fn start(dir: PathBuf, poll: Duration, shutdown: CancellationToken) -> Result<CertDir, String> {
    let (mut current, key) = load(&dir)?;
    let resolver = LiveResolver::new(key);
    let (tx, rx) = watch::channel(status_of(&resolver));
    let served = resolver.clone();
    let task = tokio::spawn(async move {
        let mut failing = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(poll) => {}
            }
            match load(&dir) {
                Ok((cert, key)) if cert != current => {
                    served.swap(key);
                    current = cert;
                    failing = false;
                    tx.send_replace(status_of(&served));
                    tracing::info!(dir = %dir.display(), "reloaded the serving certificate");
                }
                Ok(_) => failing = false,
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "cannot reload the serving certificate; keeping the current one");
                    }
                    failing = true;
                }
            }
        }
    });
    Ok(CertDir { resolver, status: rx, task })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{CertificateAuthority, LeafSpec};

    fn write_pair(dir: &Path, name: &str) -> String {
        let ca = CertificateAuthority::generate("ca", Duration::from_secs(3600)).unwrap();
        let leaf = ca.issue(&LeafSpec::server(name, vec![name.into()], vec![], Duration::from_secs(3600))).unwrap();
        std::fs::write(dir.join(CERT_FILE), &leaf.cert_pem).unwrap();
        std::fs::write(dir.join(KEY_FILE), &leaf.key_pem).unwrap();
        leaf.cert_pem
    }

    #[tokio::test]
    async fn reloads_when_the_files_change_and_keeps_serving_through_bad_writes() {
        let dir = tempfile::tempdir().unwrap();
        assert!(start(dir.path().to_path_buf(), Duration::from_millis(20), CancellationToken::new()).is_err());
        let first = write_pair(dir.path(), "a.test");
        let shutdown = CancellationToken::new();
        let source = start(dir.path().to_path_buf(), Duration::from_millis(20), shutdown.clone()).unwrap();
        let leaf = |pem: &str| myownshell_runtime::tls::certs_from_pem(pem).unwrap().remove(0);
        assert_eq!(source.resolver.leaf_der(), Some(leaf(&first)));
        assert!(source.status.borrow().trusted);

        // A key that does not match: ignored.
        let other = CertificateAuthority::generate("x", Duration::from_secs(60)).unwrap();
        std::fs::write(dir.path().join(KEY_FILE), &other.pem().key_pem).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(source.resolver.leaf_der(), Some(leaf(&first)));

        let second = write_pair(dir.path(), "b.test");
        let mut status = source.status.clone();
        tokio::time::timeout(Duration::from_secs(5), async {
            while source.resolver.leaf_der() != Some(leaf(&second)) {
                let _ = status.changed().await;
            }
        })
        .await
        .unwrap();
        shutdown.cancel();
        source.task.await.unwrap();
    }
}
