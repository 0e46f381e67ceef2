//! The HTTP stack under every kube client the binaries build: kube's own, layer for layer,
//! except that its connection pool closes a connection left idle for [`POOL_IDLE_TIMEOUT`].
//!
//! Why not kube's `Client::try_from(Config)`: it builds its hyper-util pool without a timer
//! (kube-client 5.0, `client/builder.rs`, `make_generic_builder`), and a pool without a timer
//! never expires an idle connection. After a burst, every connection its 128 workers opened
//! stays with its read buffer, request channel and task: 4.4 MB of the controller's 23.4 MB
//! heap at 2,000 shells (heaptrack, `cargo xtask bench controller --objects 2000 --homes
//! --no-floors --heap-profile`). kube offers no setting for it; its documented way is this one,
//! a custom stack from `ConfigExt`'s layers (`kube::client::ConfigExt`). What it leaves out:
//! gzip (the workspace does not enable kube's `gzip`), the tracing layer (debug spans only), and
//! the expiry of a client certificate an exec plugin gave (`Client::valid_until`, which nothing
//! here reads). A configuration with a proxy keeps kube's own stack, which tunnels through it.

use std::time::Duration;

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::Client;
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// How long a pooled connection to the apiserver may stay idle before it is closed: long enough
/// that steady work (reconciles every few seconds, a sweep's pages) keeps reusing its
/// connections, short enough that a burst's surplus is gone before the next steady figure.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A client for `config` whose pool closes connections idle for `idle`.
pub fn client(config: kube::Config, idle: Duration) -> Result<Client, kube::Error> {
    if config.proxy_url.is_some() {
        return Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    // The https connector below chooses by scheme; plain HTTP (a test server) passes through.
    http.enforce_http(false);
    let mut connector = TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let pool = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .pool_idle_timeout(idle)
        .pool_timer(TokioTimer::new())
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| RetryLayer::new(RetryPolicy::server_retry())))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(pool);
    Ok(Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server answering each request on a connection with a small JSON body and keeping the
    /// connection open, counting the connections the client closed.
    async fn counting_server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (opened, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (o, c) = (opened.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                o.fetch_add(1, Ordering::SeqCst);
                let c = c.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                let body = r#"{"major":"1","minor":"35","gitVersion":"v1.35.4"}"#;
                                let answer = format!(
                                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                                    body.len()
                                );
                                if conn.write_all(answer.as_bytes()).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        (url, opened, closed)
    }

    async fn version(client: &Client) {
        let request = http::Request::get("/version").body(Vec::new()).unwrap();
        client.request_text(request).await.unwrap();
    }

    #[tokio::test]
    async fn a_connection_is_reused_then_closed_once_idle() {
        let (url, opened, closed) = counting_server().await;
        let client = client(kube::Config::new(url.parse().unwrap()), Duration::from_millis(300)).unwrap();
        version(&client).await;
        version(&client).await;
        assert_eq!(opened.load(Ordering::SeqCst), 1, "the second request reused the pooled connection");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while closed.load(Ordering::SeqCst) == 0 {
            assert!(tokio::time::Instant::now() < deadline, "the idle connection was still open after 10 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        version(&client).await;
        assert_eq!(opened.load(Ordering::SeqCst), 2, "a request after the idle close opened a new connection");
    }
}
