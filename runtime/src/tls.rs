//! rustls server configuration around a certificate that can be swapped while serving.
//!
//! [`LiveResolver`] hands every new TLS handshake the current certificate; replacing it
//! (rotation, a reloaded cert-manager file) needs no restart and drops no connection: existing
//! connections keep the certificate they were established with.

use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why certificates or a TLS configuration could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The PEM data held no certificate.
    #[error("no certificate found in the PEM data")]
    NoCertificate,
    /// The PEM data did not parse.
    #[error("invalid PEM: {0}")]
    Pem(String),
    /// rustls cannot sign with the key.
    #[error("unusable private key: {0}")]
    Key(rustls::Error),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(rustls::Error),
}

/// Parse a PEM certificate chain.
pub fn certs_from_pem(pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    Ok(certs)
}

/// A rustls `CertifiedKey` from a PEM chain and PEM private key (PKCS#8, SEC1 or PKCS#1).
pub fn certified_key_from_pem(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, TlsError> {
    let chain = certs_from_pem(cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsError::Pem(e.to_string()))?;
    let signing_key = rustls::crypto::ring::sign::any_supported_type(&key).map_err(TlsError::Key)?;
    Ok(CertifiedKey::new(chain, signing_key))
}

/// Serves whatever certificate was stored last.
#[derive(Debug)]
pub struct LiveResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl LiveResolver {
    /// A resolver serving `initial` until swapped.
    pub fn new(initial: CertifiedKey) -> Arc<Self> {
        Arc::new(Self { current: RwLock::new(Arc::new(initial)) })
    }

    /// A resolver serving the PEM chain and key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Arc<Self>, TlsError> {
        Ok(Self::new(certified_key_from_pem(cert_pem, key_pem)?))
    }

    /// Serve `next` from the next handshake on.
    pub fn swap(&self, next: CertifiedKey) {
        let next = Arc::new(next);
        match self.current.write() {
            Ok(mut guard) => *guard = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }

    /// The certificate served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// DER of the leaf certificate being served.
    pub fn leaf_der(&self) -> Option<CertificateDer<'static>> {
        self.current().cert.first().cloned()
    }
}

impl ResolvesServerCert for LiveResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// TLS 1.2 and 1.3 with the ring provider, HTTP/1.1 only (ALPN `http/1.1`), and, if given, a
/// client-certificate verifier.
pub fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Config)?;
    let builder = match client_verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and key as PEM.
    struct Pem {
        cert_pem: String,
        key_pem: String,
    }

    fn leaf(cn: &str) -> Pem {
        let certified = rcgen::generate_simple_self_signed(vec![format!("{cn}.test")]).unwrap();
        Pem { cert_pem: certified.cert.pem(), key_pem: certified.signing_key.serialize_pem() }
    }

    #[test]
    fn swapping_changes_what_is_served() {
        let (a, b) = (leaf("a"), leaf("b"));
        let resolver = LiveResolver::from_pem(&a.cert_pem, &a.key_pem).unwrap();
        let first = resolver.leaf_der().unwrap();
        resolver.swap(certified_key_from_pem(&b.cert_pem, &b.key_pem).unwrap());
        assert_ne!(first, resolver.leaf_der().unwrap());
        assert_eq!(resolver.leaf_der().unwrap(), certs_from_pem(&b.cert_pem).unwrap()[0]);
    }

    #[test]
    fn bad_pem_is_an_error() {
        let cases = [("", "", "no certificate"), ("-----BEGIN CERTIFICATE-----\nnot base64\n", "", "invalid pem")];
        for (cert, key, want) in cases {
            let err = certified_key_from_pem(cert, key).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.to_lowercase().contains(want), "{err}");
        }
        let good = leaf("x");
        assert!(certified_key_from_pem(&good.cert_pem, "garbage").is_err());
    }
}
