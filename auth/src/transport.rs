//! TLS for the secure endpoint: the serving certificate (from files, reloaded when they change,
//! or self-signed from the `certs` crate when none are given) and the optional client-certificate
//! verifier for `--client-ca-file`. Clients without a certificate are still let through to
//! token authentication; a certificate that does not chain to the CA fails the handshake.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use myownshell_certs::pki::{CertificateAuthority, LeafSpec, PkiError};
use myownshell_runtime::tls::{LiveResolver, TlsError, certified_key_from_pem, certs_from_pem, server_config};
use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use tokio_util::sync::CancellationToken;

/// How long a self-signed serving certificate is valid.
const SELF_SIGNED_VALIDITY: Duration = Duration::from_secs(365 * 86_400);

/// Why TLS could not be set up; file errors name the file.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A certificate without its key or a key without its certificate.
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    HalfAPair,
    /// A certificate, key or CA file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The certificate or key file holds no usable PEM.
    #[error("{path}: {source}")]
    Pem {
        /// The certificate file, which names the pair.
        path: String,
        /// What is wrong with the PEM.
        source: TlsError,
    },
    /// The key does not belong to the certificate, e.g. one file already rotated and the
    /// other not yet.
    #[error("{key} does not belong to {cert}: {message}")]
    KeyMismatch {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
        /// rustls's message.
        message: String,
    },
    /// The client CA bundle holds no usable CA certificate.
    #[error("--client-ca-file {path}: {message}")]
    ClientCa {
        /// The CA bundle file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// Generating the self-signed certificate failed.
    #[error("generating a self-signed certificate: {0}")]
    SelfSigned(#[from] PkiError),
    /// rustls refused the server configuration.
    #[error("TLS configuration: {0}")]
    Config(#[from] TlsError),
}

/// Certificate files; all optional.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// The serving certificate (PEM, leaf first), watched for changes. Given with `key_file`,
    /// or neither for a self-signed certificate.
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM).
    pub key_file: Option<PathBuf>,
    /// CAs whose client certificates authenticate callers (user = CN, groups = O); none means
    /// bearer tokens only.
    pub client_ca_file: Option<PathBuf>,
}

/// A ready rustls configuration and the resolver behind it (for reloads and for tests).
#[derive(Debug)]
pub struct ServingTls {
    /// What the listener serves with; it asks `resolver` for the certificate at each handshake.
    pub config: Arc<ServerConfig>,
    /// Holds the current certificate; a reload swaps it, and new handshakes get the new one.
    pub resolver: Arc<LiveResolver>,
    /// The certificate and key files, when they were given (they are watched).
    pub files: Option<(PathBuf, PathBuf)>,
}

fn read(path: &Path) -> Result<String, TransportError> {
    std::fs::read_to_string(path).map_err(|source| TransportError::Read { path: path.display().to_string(), source })
}

/// Load a certificate and its key, refusing a pair whose key does not match (e.g. read halfway
/// through a rotation that has replaced one file but not yet the other).
fn load_pair(cert: &Path, key: &Path) -> Result<rustls::sign::CertifiedKey, TransportError> {
    let pair = certified_key_from_pem(&read(cert)?, &read(key)?)
        .map_err(|source| TransportError::Pem { path: cert.display().to_string(), source })?;
    pair.keys_match().map_err(|e| TransportError::KeyMismatch {
        cert: cert.display().to_string(),
        key: key.display().to_string(),
        message: e.to_string(),
    })?;
    Ok(pair)
}

fn self_signed(names: &[String]) -> Result<rustls::sign::CertifiedKey, TransportError> {
    let ca = CertificateAuthority::generate("myownshell-rbac-proxy-self-signed-ca", SELF_SIGNED_VALIDITY)?;
    let mut dns = vec!["localhost".to_owned()];
    dns.extend(names.iter().filter(|n| myownshell_certs::pki::is_dns_name(n)).cloned());
    let ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)];
    let leaf = ca.issue(&LeafSpec::server("myownshell-rbac-proxy", dns, ips, SELF_SIGNED_VALIDITY))?;
    Ok(certified_key_from_pem(&leaf.cert_pem, &leaf.key_pem)?)
}

/// A verifier of client certificates signed by the CAs of the PEM file `path`. A client that
/// presents none still connects (the caller decides what it may then do); one that presents a
/// certificate the CAs did not sign fails the handshake.
pub fn client_verifier(path: &Path) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TransportError> {
    let origin = path.display().to_string();
    let pem = read(path)?;
    let certs =
        certs_from_pem(&pem).map_err(|e| TransportError::ClientCa { path: origin.clone(), message: e.to_string() })?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| TransportError::ClientCa { path: origin.clone(), message: e.to_string() })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::new(rustls::crypto::ring::default_provider()))
        // No certificate: fall through to bearer tokens. A bad certificate: handshake fails.
        .allow_unauthenticated()
        .build()
        .map_err(|e| TransportError::ClientCa { path: origin, message: e.to_string() })
}

impl ServingTls {
    /// TLS from `files`, or self-signed for `localhost`, the loopback addresses and `names`.
    pub fn new(files: &TlsFiles, names: &[String]) -> Result<Self, TransportError> {
        let (key, pair) = match (&files.cert_file, &files.key_file) {
            (Some(cert), Some(key)) => (load_pair(cert, key)?, Some((cert.clone(), key.clone()))),
            (None, None) => (self_signed(names)?, None),
            _ => return Err(TransportError::HalfAPair),
        };
        let resolver = LiveResolver::new(key);
        let verifier = files.client_ca_file.as_deref().map(client_verifier).transpose()?;
        let config = server_config(resolver.clone(), verifier)?;
        Ok(Self { config: Arc::new(config), resolver, files: pair })
    }

    /// Reload the certificate files whenever they change, until `shutdown`. A broken update
    /// (half-written file, mismatched key) is logged and the current certificate kept.
    pub async fn watch_files(&self, interval: Duration, shutdown: CancellationToken) {
        let Some((cert, key)) = self.files.clone() else { return };
        let stamp = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let mut seen: (Option<SystemTime>, Option<SystemTime>) = (stamp(&cert), stamp(&key));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let now = (stamp(&cert), stamp(&key));
            if now == seen {
                continue;
            }
            match load_pair(&cert, &key) {
                Ok(next) => {
                    self.resolver.swap(next);
                    seen = now;
                    tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "serving certificate changed but could not be loaded; keeping the old one")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_a_pair_is_refused() {
        let files = TlsFiles { cert_file: Some("/x.crt".into()), ..TlsFiles::default() };
        let err = ServingTls::new(&files, &[]).unwrap_err().to_string();
        assert!(err.contains("--tls-cert-file and --tls-private-key-file"), "{err}");
    }

    #[test]
    fn missing_files_are_named() {
        let files = TlsFiles {
            cert_file: Some("/nonexistent/tls.crt".into()),
            key_file: Some("/nonexistent/tls.key".into()),
            ..TlsFiles::default()
        };
        let err = ServingTls::new(&files, &[]).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/tls.crt"), "{err}");
    }

    #[test]
    fn a_key_from_another_certificate_is_refused() {
        let ca = CertificateAuthority::generate("ca", SELF_SIGNED_VALIDITY).unwrap();
        let spec = LeafSpec::server("a", vec!["a.test".into()], vec![], SELF_SIGNED_VALIDITY);
        let (a, b) = (ca.issue(&spec).unwrap(), ca.issue(&spec).unwrap());
        let dir = std::env::temp_dir().join(format!("rbac-proxy-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, &a.cert_pem).unwrap();
        std::fs::write(&key, &b.key_pem).unwrap();
        let err = load_pair(&cert, &key).err().map(|e| e.to_string()).unwrap_or_default();
        std::fs::write(&key, &a.key_pem).unwrap();
        let ok = load_pair(&cert, &key);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(err.contains("does not belong to"), "{err}");
        assert!(ok.is_ok());
    }

    #[test]
    fn self_signed_by_default_with_http1_only() {
        let tls = ServingTls::new(&TlsFiles::default(), &["metrics.example".into()]).unwrap();
        assert!(tls.resolver.leaf_der().is_some());
        assert_eq!(tls.config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(tls.files.is_none());
    }
}
