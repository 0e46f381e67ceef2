//! GETs of an issuer's public documents (discovery, keys) over HTTPS: bounded in size and time,
//! verified against the operator's CA file for the issuer (`--oidc-ca-file`) or the system's
//! roots, as kube-apiserver's `--oidc-ca-file` works.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::OidcError;

/// How long one GET may take, connection and body included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// An error with what caused it, down its chain (`client error (Connect): tcp connect error:
/// Connection refused (os error 111)`), so that a person reads why, not only hyper's summary.
fn causes(e: &dyn std::error::Error) -> String {
    let mut said = e.to_string();
    let mut cause = e.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !said.contains(&text) {
            said = format!("{said}: {text}");
        }
        cause = next.source();
    }
    said
}

/// An HTTPS-only client for the issuer's documents.
#[derive(Clone)]
pub(crate) struct Fetcher {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fetcher")
    }
}

impl Fetcher {
    /// Trusting the certificates of `ca_file` (PEM) only, or the system's roots without one.
    pub(crate) fn new(ca_file: Option<&Path>) -> Result<Self, OidcError> {
        let roots = match ca_file {
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| OidcError::Config(format!("reading the issuer's CA file {}: {e}", path.display())))?;
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert = cert.map_err(|e| {
                        OidcError::Config(format!(
                            "the issuer's CA file {} is not PEM certificates: {e}",
                            path.display()
                        ))
                    })?;
                    roots.add(cert).map_err(|e| {
                        OidcError::Config(format!("a certificate of the issuer's CA file {}: {e}", path.display()))
                    })?;
                }
                if roots.is_empty() {
                    return Err(OidcError::Config(format!(
                        "the issuer's CA file {} holds no certificate",
                        path.display()
                    )));
                }
                roots
            }
            None => {
                // Certificates the system holds that rustls cannot read are left out, as
                // hyper-rustls's own native roots do.
                let mut roots = RootCertStore::empty();
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                roots
            }
        };
        let tls =
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| OidcError::Config(format!("TLS: {e}")))?
                .with_root_certificates(roots)
                .with_no_client_auth();
        let connector = HttpsConnectorBuilder::new().with_tls_config(tls).https_only().enable_http1().build();
        Ok(Self { client: Client::builder(TokioExecutor::new()).build(connector) })
    }

    /// The body of `GET url`, at most `limit` bytes; anything but a 200 is an error naming `what`.
    pub(crate) async fn get(&self, url: &str, what: &str, limit: usize) -> Result<Bytes, OidcError> {
        let request = Request::get(url).header(header::ACCEPT, "application/json").body(Full::default());
        let (status, body) = self.send(request, url, what, limit).await?;
        if status != StatusCode::OK {
            return Err(OidcError::Unreachable(format!("{what} at {url}: answered {status}")));
        }
        Ok(body)
    }

    /// `POST url` of a form with HTTP Basic client credentials (`client_secret_basic`, what
    /// every issuer takes); the status and at most `limit` bytes of the answer, whatever the
    /// status (a token endpoint says why in a 400's body).
    pub(crate) async fn post_form(
        &self,
        url: &str,
        what: &str,
        basic: Option<&str>,
        form: String,
        limit: usize,
    ) -> Result<(StatusCode, Bytes), OidcError> {
        let mut request = Request::post(url)
            .header(header::ACCEPT, "application/json")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(basic) = basic {
            request = request.header(header::AUTHORIZATION, basic);
        }
        self.send(request.body(Full::new(Bytes::from(form))), url, what, limit).await
    }

    async fn send(
        &self,
        request: http::Result<Request<Full<Bytes>>>,
        url: &str,
        what: &str,
        limit: usize,
    ) -> Result<(StatusCode, Bytes), OidcError> {
        let unreachable = |e: String| OidcError::Unreachable(format!("{what} at {url}: {e}"));
        let request = request.map_err(|e| OidcError::Config(format!("{what}: {url} is not a URL: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| unreachable(causes(&e)))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), limit)
                .collect()
                .await
                .map_err(|e| unreachable(format!("the answer was cut off or longer than {limit} bytes: {e}")))?;
            Ok((status, body.to_bytes()))
        };
        tokio::time::timeout(TIMEOUT, exchange).await.map_err(|_| unreachable(format!("no answer in {TIMEOUT:?}")))?
    }
}
