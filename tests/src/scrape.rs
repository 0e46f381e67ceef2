//! Reading the binaries' authenticated `/metrics` the way Prometheus does: over TLS, with the
//! token of a ServiceAccount bound to a ClusterRole that may `get` the non-resource URL
//! `/metrics` (the serving certificate is self-signed, so it is not verified here).

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use crate::tls_client::tls_client;
use myownshell_envtest::namespace::service_account_token;
use myownshell_envtest::rbac;

/// Where the scraper identity lives (created on first use).
pub const SCRAPER_NAMESPACE: &str = "default";
/// The scraper's ServiceAccount (in [`SCRAPER_NAMESPACE`]): [`scraper_token`] returns a token
/// for it, and its ClusterRole allows only `get` on `/metrics`.
pub const SCRAPER_SERVICE_ACCOUNT: &str = "myownshell-test-scraper";
const SCRAPER_ROLE: &str = "myownshell-test-metrics-reader";

/// A token allowed to read `/metrics` (ClusterRole + binding applied idempotently).
pub async fn scraper_token(client: &Client) -> Result<String, String> {
    let apply = PatchParams::apply("myownshell-envtest").force();
    let role = rbac::non_resource_reader_role(SCRAPER_ROLE, &[myownshell_runtime::paths::METRICS]);
    Api::<ClusterRole>::all(client.clone())
        .patch(SCRAPER_ROLE, &apply, &Patch::Apply(&role))
        .await
        .map_err(|e| format!("applying {SCRAPER_ROLE}: {e}"))?;
    let subject = rbac::service_account_subject(SCRAPER_NAMESPACE, SCRAPER_SERVICE_ACCOUNT);
    let binding = rbac::cluster_role_binding(SCRAPER_ROLE, SCRAPER_ROLE, subject);
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(SCRAPER_ROLE, &apply, &Patch::Apply(&binding))
        .await
        .map_err(|e| format!("applying the {SCRAPER_ROLE} binding: {e}"))?;
    service_account_token(client, SCRAPER_NAMESPACE, SCRAPER_SERVICE_ACCOUNT, &[], 3600)
        .await
        .map_err(|e| format!("token for {SCRAPER_SERVICE_ACCOUNT}: {e}"))
}

/// `GET path` over TLS with an optional bearer token: `(status, body)`.
pub async fn https_get(addr: SocketAddr, path: &str, token: Option<&str>) -> Result<(u16, String), String> {
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls_client(None)?));
    let tcp = TcpStream::connect(addr).await.map_err(|e| format!("connecting to {addr}: {e}"))?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = connector.connect(name, tcp).await.map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    let driver = tokio::spawn(conn);
    let mut request = http::Request::get(path).header(http::header::HOST, addr.to_string());
    if let Some(token) = token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request.body(Full::new(Bytes::new())).map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| format!("GET {path}: {e}"))?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    drop(sender);
    let _ = driver.await;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The metrics text at `addr`, read as an authorized scraper.
pub async fn scrape(client: &Client, addr: SocketAddr) -> Result<String, String> {
    let token = scraper_token(client).await?;
    match https_get(addr, myownshell_runtime::paths::METRICS, Some(&token)).await? {
        (200, body) => Ok(body),
        (status, body) => Err(format!("/metrics at {addr} answered {status}: {body}")),
    }
}
