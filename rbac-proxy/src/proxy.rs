//! Forwarding to the upstream (standalone mode): a pooled HTTP/1.1 client, bodies streamed in
//! both directions (never buffered), hop-by-hop headers dropped, 502 when the upstream fails.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::header::{self, HeaderName};
use http::uri::{PathAndQuery, Scheme};
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use myownshell_runtime::server::ConnectionInfo;

/// Why an `--upstream` cannot be used; each holds the URL as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// Not a URL, or one without a host.
    #[error("--upstream {0:?}: not a URL")]
    NotAUrl(String),
    /// Not `http://`: the proxy speaks plain HTTP to its upstream.
    #[error(
        "--upstream {0:?}: only http:// upstreams are supported (the proxy terminates TLS in front of a local upstream)"
    )]
    Scheme(String),
    /// A query, which would have no clear place beside each request's own.
    #[error("--upstream {0:?}: must not have a query")]
    Query(String),
}

/// The parsed `--upstream`: scheme, authority, and a base path requests are appended to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamUrl {
    authority: http::uri::Authority,
    base_path: String,
}

impl UpstreamUrl {
    /// Parse `--upstream`: `http://`, a host, and an optional base path (a trailing `/` is
    /// dropped so that joining adds exactly one).
    pub fn parse(url: &str) -> Result<Self, UpstreamError> {
        let uri: Uri = url.parse().map_err(|_| UpstreamError::NotAUrl(url.to_owned()))?;
        if uri.scheme() != Some(&Scheme::HTTP) {
            return Err(UpstreamError::Scheme(url.to_owned()));
        }
        let authority = uri.authority().cloned().ok_or_else(|| UpstreamError::NotAUrl(url.to_owned()))?;
        if uri.query().is_some() {
            return Err(UpstreamError::Query(url.to_owned()));
        }
        Ok(Self { authority, base_path: uri.path().trim_end_matches('/').to_owned() })
    }

    /// The upstream URI for a request's path and query: the base path joined with one slash.
    pub fn join(&self, request: Option<&PathAndQuery>) -> Result<Uri, http::Error> {
        let pq = request.map_or("/", PathAndQuery::as_str);
        let pq = if pq.starts_with('/') { pq.to_owned() } else { format!("/{pq}") };
        Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(self.authority.clone())
            .path_and_query(format!("{}{pq}", self.base_path))
            .build()
    }
}

/// Headers that describe one connection, not the message (RFC 9110 7.6.1), plus any the
/// `Connection` header names.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
}

/// The upstream and the connection pool to it.
#[derive(Clone)]
pub struct Upstream {
    url: UpstreamUrl,
    client: Client<HttpConnector, Body>,
}

impl Upstream {
    /// A pool of connections to `url`, with Nagle's algorithm off (small requests and
    /// responses should not wait); nothing connects until the first request.
    pub fn new(url: UpstreamUrl) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Self { url, client }
    }
}

fn bad_gateway() -> Response {
    let mut response = Response::new(Body::from("Bad Gateway\n"));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}

/// The axum handler that forwards a request (already authorized by the layer) upstream.
pub async fn forward(State(upstream): State<Upstream>, req: Request) -> Response {
    let (mut parts, body) = req.into_parts();
    let uri = match upstream.url.join(parts.uri.path_and_query()) {
        Ok(uri) => uri,
        Err(e) => {
            tracing::warn!(error = %e, "cannot build the upstream URI");
            return bad_gateway();
        }
    };
    remove_hop_by_hop(&mut parts.headers);
    // The client sets Host from the upstream URI.
    parts.headers.remove(header::HOST);
    if let Some(info) = parts.extensions.get::<ConnectionInfo>()
        && let Ok(addr) = HeaderValue::from_str(&info.remote_addr.ip().to_string())
    {
        parts.headers.append(HeaderName::from_static("x-forwarded-for"), addr);
    }
    parts.headers.insert(HeaderName::from_static("x-forwarded-proto"), HeaderValue::from_static("https"));
    let mut outgoing = http::Request::new(body);
    *outgoing.method_mut() = parts.method;
    *outgoing.uri_mut() = uri;
    *outgoing.headers_mut() = parts.headers;
    match upstream.client.request(outgoing).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            remove_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, Body::new(body))
        }
        Err(e) => {
            tracing::warn!(error = %e, "upstream request failed");
            bad_gateway()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_join_like_a_single_host_reverse_proxy() {
        let cases = [
            ("http://127.0.0.1:8080/", "/metrics", "http://127.0.0.1:8080/metrics"),
            ("http://127.0.0.1:8080", "/metrics?x=1", "http://127.0.0.1:8080/metrics?x=1"),
            ("http://up:80/base/", "/metrics", "http://up:80/base/metrics"),
            ("http://up/base", "/", "http://up/base/"),
        ];
        for (base, path, want) in cases {
            let url = UpstreamUrl::parse(base).unwrap();
            let pq: PathAndQuery = path.parse().unwrap();
            assert_eq!(url.join(Some(&pq)).unwrap().to_string(), want, "{base} + {path}");
        }
        assert_eq!(UpstreamUrl::parse("http://up/").unwrap().join(None).unwrap().to_string(), "http://up/");
    }

    #[test]
    fn bad_upstreams_say_why() {
        let cases = [
            ("https://up/", "only http://"),
            ("up:8080", "only http://"),
            ("http://up/?a=b", "must not have a query"),
            ("not a url", "not a URL"),
        ];
        for (url, want) in cases {
            let err = UpstreamUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(want) && err.contains("--upstream"), "{url}: {err}");
        }
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut headers = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-private"),
            ("keep-alive", "timeout=5"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("te", "trailers"),
            ("content-type", "text/plain"),
            ("content-length", "5"),
        ] {
            headers.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        remove_hop_by_hop(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, vec!["content-length", "content-type"]);
    }
}
