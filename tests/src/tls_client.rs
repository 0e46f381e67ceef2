//! TLS clients for tests: trusting a CA, pinned to one leaf, or accepting whatever a server
//! shows (to look at it); the certificate a server presents; one raw keep-alive HTTPS/1.1
//! connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;

/// Accepts any server certificate (to look at what a server presents, trusted or not), or only
/// the one leaf it is pinned to; handshake signatures are checked either way.
#[derive(Debug)]
struct TestVerifier {
    pinned: Option<CertificateDer<'static>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for TestVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.pinned {
            Some(leaf) if leaf.as_ref() != end_entity.as_ref() => {
                Err(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer))
            }
            _ => Ok(ServerCertVerified::assertion()),
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A verifier that accepts whatever certificate a server shows (signatures are still checked):
/// only for looking at, or talking to, a server whose self-signed certificate a test cannot know.
pub fn accept_any_server() -> Arc<dyn ServerCertVerifier> {
    Arc::new(TestVerifier { pinned: None, provider: provider() })
}

/// A verifier that accepts only the server certificate `leaf`, whoever signed it.
pub fn pinned_server(leaf: CertificateDer<'static>) -> Arc<dyn ServerCertVerifier> {
    Arc::new(TestVerifier { pinned: Some(leaf), provider: provider() })
}

/// A TLS client config trusting `ca_pem`, or anything if `None`.
pub fn tls_client(ca_pem: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let mut config = match ca_pem {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in myownshell_runtime::tls::certs_from_pem(pem).map_err(|e| e.to_string())? {
                roots.add(cert).map_err(|e| e.to_string())?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder.dangerous().with_custom_certificate_verifier(accept_any_server()).with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The leaf certificate a TLS server at `addr` presents (not verified).
pub async fn served_certificate(addr: SocketAddr) -> Result<CertificateDer<'static>, String> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls_client(None)?));
    let tcp = TcpStream::connect(addr).await.map_err(|e| format!("connecting to {addr}: {e}"))?;
    let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let tls = tokio::time::timeout(Duration::from_secs(5), connector.connect(name, tcp))
        .await
        .map_err(|_| "TLS handshake timed out".to_owned())?
        .map_err(|e| format!("TLS handshake: {e}"))?;
    tls.get_ref().1.peer_certificates().and_then(|c| c.first().cloned()).ok_or("no certificate presented".into())
}

/// One keep-alive HTTPS/1.1 connection for raw requests.
pub struct HttpsConnection {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    host: String,
}

impl HttpsConnection {
    /// Connect to `addr`, verifying the server against `ca_pem` for the name `server_name`
    /// (or not at all if `ca_pem` is `None`).
    pub async fn connect(addr: SocketAddr, ca_pem: Option<&str>, server_name: &str) -> Result<Self, String> {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(tls_client(ca_pem)?));
        let tcp = TcpStream::connect(addr).await.map_err(|e| format!("connecting to {addr}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(server_name.to_owned()).map_err(|e| e.to_string())?;
        let tls = connector.connect(name, tcp).await.map_err(|e| format!("TLS handshake: {e}"))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self { sender, host: addr.to_string() })
    }

    /// `POST path` with `body` as JSON; `(status, body)`.
    pub async fn post(&mut self, path: &str, body: Vec<u8>) -> Result<(u16, Bytes), String> {
        self.sender.ready().await.map_err(|e| format!("connection closed: {e}"))?;
        let request = http::Request::post(path)
            .header(http::header::HOST, &self.host)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = self.sender.send_request(request).await.map_err(|e| format!("request failed: {e}"))?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((status, body))
    }
}

pub use myownshell_envtest::tls::trusting;
