//! `--kubeconfig`, and the Kubernetes client every binary builds from it the same way (on the
//! stack of [`crate::client_pool`]).

use std::path::PathBuf;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::client_pool;

/// How long a response may go without a byte before its request fails, for every client but the
/// one that holds terminals open ([`ClientArgs::streaming_client`]).
///
/// kube's default is none: a request on a connection whose apiserver vanished without a reset
/// (a node lost, a NAT entry dropped) waits forever: a reconcile holds its worker and its shell,
/// a relist never ends. Longer than the watcher's own idle timeout (kube-runtime drops a watch
/// with no event for 290 + 5 s and watches again), so no quiet watch is cut by this.
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Which cluster to talk to, flattened into each binary's flags.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ClientArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `--kubeconfig` file could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The `--kubeconfig` path as given.
        path: String,
        /// What was wrong with it.
        message: String,
    },
    /// No configuration was found (no `$KUBECONFIG`, no `~/.kube/config`, not in a cluster), or
    /// the one found is unusable.
    #[error("kubernetes client: {0}")]
    Infer(String),
}

impl ClientArgs {
    /// A client from `--kubeconfig`, else from `$KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// configuration, in that order (kube's `Config::infer`); a response that stalls for
    /// [`READ_TIMEOUT`] fails its request.
    pub async fn client(&self) -> Result<Client, ClientError> {
        self.client_with(Some(READ_TIMEOUT)).await
    }

    /// [`ClientArgs::client`] without a read timeout, for exec and attach streams: a terminal
    /// nobody types in may read nothing for hours, and must stay open.
    pub async fn streaming_client(&self) -> Result<Client, ClientError> {
        self.client_with(None).await
    }

    async fn client_with(&self, read_timeout: Option<Duration>) -> Result<Client, ClientError> {
        let Some(path) = &self.kubeconfig else {
            let config = kube::Config::infer().await.map_err(|e| ClientError::Infer(e.to_string()))?;
            return built(with_read_timeout(config, read_timeout)).map_err(|e| ClientError::Infer(e.to_string()));
        };
        let error = |message: String| ClientError::Kubeconfig { path: path.display().to_string(), message };
        let file = Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|e| error(e.to_string()))?;
        built(with_read_timeout(config, read_timeout)).map_err(|e| error(e.to_string()))
    }
}

/// The client of `config`, on the stack whose pool closes idle connections ([`client_pool`]).
fn built(config: kube::Config) -> Result<Client, kube::Error> {
    client_pool::client(config, client_pool::POOL_IDLE_TIMEOUT)
}

/// `config` whose responses fail after `read_timeout` without a byte, counted from the request's
/// last write (kube's `reset_reader_on_write`), not from when its pooled connection went idle,
/// which may be long before: a request handed a connection idle for nearly `read_timeout` would
/// otherwise fail at once.
pub fn with_read_timeout(mut config: kube::Config, read_timeout: Option<Duration>) -> kube::Config {
    config.read_timeout = read_timeout;
    config.reset_reader_on_write = read_timeout.is_some();
    config
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Binary {
        #[command(flatten)]
        client: ClientArgs,
    }

    /// A server that takes connections and reads requests but never answers, as an apiserver
    /// gone without a reset looks from the client.
    async fn stalling_server() -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        (url, server)
    }

    #[tokio::test]
    async fn a_stalled_response_fails_its_request_after_the_read_timeout() {
        let (url, server) = stalling_server().await;
        let config = kube::Config::new(url.parse().unwrap());
        let client = built(with_read_timeout(config, Some(Duration::from_millis(500)))).unwrap();
        let request = http::Request::get("/version").body(Vec::new()).unwrap();
        let answered = tokio::time::timeout(Duration::from_secs(10), client.request_text(request)).await;
        server.abort();
        let Ok(result) = answered else { panic!("the request still waited after 10 s: no read timeout") };
        assert!(result.is_err(), "a server that never answers gave {result:?}");
    }

    /// A server on one connection at a time that answers each request `delay` after reading it,
    /// keeping the connection open for the next.
    async fn slow_server(delay: Duration) -> (String, tokio::task::JoinHandle<()>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                // A GET's head fits one read here; the test sends nothing else.
                while conn.read(&mut buf).await.is_ok_and(|n| n > 0) {
                    tokio::time::sleep(delay).await;
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if conn.write_all(answer.as_bytes()).await.is_err() {
                        break;
                    }
                }
            }
        });
        (url, server)
    }

    #[tokio::test]
    async fn a_request_on_a_connection_idle_nearly_the_read_timeout_gets_its_whole_read_timeout() {
        let read = Duration::from_millis(1000);
        let (url, server) = slow_server(Duration::from_millis(300)).await;
        let client = built(with_read_timeout(kube::Config::new(url.parse().unwrap()), Some(read))).unwrap();
        let get = || http::Request::get("/version").body(Vec::new()).unwrap();
        client.request_text(get()).await.expect("the first request");
        // The scenario, not a wait for state: the pooled connection idles for most of the read
        // timeout, then carries a request answered well within it. Counted from the idle start,
        // the timeout would fire 200 ms into that request, 100 ms before its answer.
        tokio::time::sleep(Duration::from_millis(800)).await;
        let second = client.request_text(get()).await;
        server.abort();
        assert!(second.is_ok(), "a request answered in 300 ms failed under a 1 s read timeout: {second:?}");
    }

    #[test]
    fn the_read_timeout_outlasts_a_quiet_watch_and_streams_have_none() {
        // kube-runtime's watcher drops a watch with no event after 290 + 5 s and watches again.
        assert!(READ_TIMEOUT > Duration::from_secs(295));
        let config = |t| with_read_timeout(kube::Config::new("http://127.0.0.1".parse().unwrap()), t);
        let requests = config(Some(READ_TIMEOUT));
        assert_eq!((requests.read_timeout, requests.reset_reader_on_write), (Some(READ_TIMEOUT), true));
        let streams = config(None);
        assert_eq!((streams.read_timeout, streams.reset_reader_on_write), (None, false));
    }

    #[tokio::test]
    async fn a_kubeconfig_that_cannot_be_read_is_named() {
        let args = Binary::parse_from(["bin", "--kubeconfig", "/nonexistent/kubeconfig"]).client;
        let err = args.client().await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("kubeconfig /nonexistent/kubeconfig: "), "{err}");
        assert_eq!(Binary::parse_from(["bin"]).client, ClientArgs::default());
    }
}
