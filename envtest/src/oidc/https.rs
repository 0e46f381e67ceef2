//! One HTTPS/1.1 exchange with a server of the test bed (Hydra's endpoints, the login page),
//! trusting only the CA it is given: what the login page calls Hydra's admin API with, and what
//! [`super::browser`] signs in with. A connection per request: nothing is shared between calls,
//! so a test reads as the requests it makes. Bodies are bounded and every exchange has a
//! deadline, so a misbehaving server fails a test instead of hanging it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The largest response body read: Hydra's answers and the login page are a few KiB.
pub const MAX_BODY: usize = 1 << 20;
/// How long one exchange (connect, handshake, request, whole response) may take.
const DEADLINE: Duration = Duration::from_secs(15);

/// A response, read whole.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers (`set-cookie` may appear several times).
    pub headers: http::HeaderMap,
    /// The body, at most [`MAX_BODY`] bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `Location` header, if there is one.
    pub fn location(&self) -> Option<&str> {
        self.headers.get(http::header::LOCATION).and_then(|v| v.to_str().ok())
    }
}

/// Send `request`, whose URI is absolute (`https://HOST:PORT/path?query`), over a new TLS
/// connection verified with `tls`. The request goes out in origin form with a `Host` header.
pub async fn send(tls: &Arc<ClientConfig>, request: http::Request<Vec<u8>>) -> Result<Response, String> {
    let what = format!("{} {}", request.method(), redact(request.uri()));
    tokio::time::timeout(DEADLINE, exchange(tls, request))
        .await
        .map_err(|_| format!("{what}: no whole answer within {DEADLINE:?}"))?
        .map_err(|e| format!("{what}: {e}"))
}

async fn exchange(tls: &Arc<ClientConfig>, request: http::Request<Vec<u8>>) -> Result<Response, String> {
    let (mut parts, body) = request.into_parts();
    if parts.uri.scheme_str() != Some("https") {
        return Err("only https:// URLs are sent".into());
    }
    let authority = parts.uri.authority().cloned().ok_or("the URL names no host")?;
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = authority.port_u16().unwrap_or(443);
    let name = ServerName::try_from(host.clone()).map_err(|e| format!("server name {host}: {e}"))?;
    let tcp = TcpStream::connect((host.as_str(), port)).await.map_err(|e| format!("connecting: {e}"))?;
    let stream = TlsConnector::from(tls.clone()).connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("HTTP: {e}"))?;
    // Ends with the exchange: the connection is dropped once the response is read.
    let driver = tokio::spawn(connection);
    parts.uri = parts.uri.path_and_query().map_or("/", |p| p.as_str()).parse().map_err(|e| format!("path: {e}"))?;
    let host_header = http::HeaderValue::from_str(authority.as_str()).map_err(|e| format!("host: {e}"))?;
    parts.headers.insert(http::header::HOST, host_header);
    let response = sender
        .send_request(http::Request::from_parts(parts, Full::new(Bytes::from(body))))
        .await
        .map_err(|e| format!("sending: {e}"))?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading the body (at most {MAX_BODY} bytes): {e}"))?
        .to_bytes()
        .to_vec();
    driver.abort();
    Ok(Response { status: parts.status.as_u16(), headers: parts.headers, body })
}

/// The URI without its query, for messages: queries carry codes, challenges and verifiers.
pub fn redact(uri: &http::Uri) -> String {
    let scheme = uri.scheme_str().map(|s| format!("{s}://")).unwrap_or_default();
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
    let query = if uri.query().is_some() { "?…" } else { "" };
    format!("{scheme}{authority}{}{query}", uri.path())
}

/// `s` encoded for a query value or a form field (`application/x-www-form-urlencoded`, by the
/// `form_urlencoded` crate).
pub fn percent_encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The value of `name` in a query string or form (`a=1&b=2`), decoded.
pub fn query_value(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// `pairs` as `application/x-www-form-urlencoded` (also a query string).
pub fn form(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_queries_are_encoded_and_decoded() {
        assert_eq!(form(&[("a b", "x&y=z/é"), ("k", "-._")]), "a+b=x%26y%3Dz%2F%C3%A9&k=-._");
        assert_eq!(query_value(&form(&[("code", "a+b c&d")]), "code").as_deref(), Some("a+b c&d"));
        assert_eq!(query_value("code=a", "state"), None);
    }

    #[test]
    fn messages_never_hold_a_query() {
        let uri: http::Uri = "https://127.0.0.1:1234/cb?code=secret&state=s".parse().unwrap();
        assert_eq!(redact(&uri), "https://127.0.0.1:1234/cb?…");
    }
}
