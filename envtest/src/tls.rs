//! Throwaway TLS for tests and benchmarks: a CA made for the occasion, a serving certificate it
//! signed for `localhost` and `127.0.0.1`, and the rustls configurations of both ends: the
//! server's on the product's own stack (`myownshell_runtime::tls`), the client's trusting only
//! that CA.

use std::sync::Arc;
use std::time::Duration;

use myownshell_certs::pki::{CertificateAuthority, CertifiedKeyPem, LeafSpec};
use myownshell_runtime::tls::{LiveResolver, certs_from_pem, server_config};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// How long the throwaway certificates are valid: longer than any test or benchmark runs.
const VALIDITY: Duration = Duration::from_secs(3600);

/// A CA, a loopback serving certificate it signed, and the configurations of both ends.
pub struct LoopbackTls {
    /// The CA (it can sign more, e.g. client certificates).
    pub ca: CertificateAuthority,
    /// The serving certificate and key, as PEM (for a server that reads files).
    pub leaf: CertifiedKeyPem,
    /// A server configuration that serves `leaf` (HTTP/1.1 by ALPN).
    pub server: Arc<ServerConfig>,
    /// A client configuration that trusts only `ca` (HTTP/1.1 by ALPN).
    pub client: Arc<ClientConfig>,
}

/// Make a [`LoopbackTls`] whose CA is called `name`.
pub fn loopback(name: &str) -> Result<LoopbackTls, String> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{name}: {what}: {e}");
    // Idempotent: the first caller in the process installs ring, later ones find it there.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = CertificateAuthority::generate(name, VALIDITY).map_err(|e| err("CA", &e))?;
    let ip = std::net::IpAddr::from([127, 0, 0, 1]);
    let leaf = ca
        .issue(&LeafSpec::server("localhost", vec!["localhost".to_owned()], vec![ip], VALIDITY))
        .map_err(|e| err("serving certificate", &e))?;
    let resolver = LiveResolver::from_pem(&leaf.cert_pem, &leaf.key_pem).map_err(|e| err("certificate", &e))?;
    let server = Arc::new(server_config(resolver, None).map_err(|e| err("server TLS", &e))?);
    let client = trusting(&[ca.cert_pem()]).map_err(|e| err("client TLS", &e))?;
    Ok(LoopbackTls { ca, leaf, server, client })
}

/// A browser's TLS client trusting only the CAs in `pems` (PEM), speaking HTTP/1.1; `Err` names
/// a PEM that holds no usable certificate.
pub fn trusting(pems: &[&str]) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    for pem in pems {
        for cert in certs_from_pem(pem).map_err(|e| format!("a CA PEM: {e}"))? {
            roots.add(cert).map_err(|e| format!("trusting a CA: {e}"))?;
        }
    }
    let mut client = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("client TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(client))
}
