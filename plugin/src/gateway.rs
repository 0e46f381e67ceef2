//! `connect` through the gateway (`--gateway URL`, or `$MYOWNSHELL_GATEWAY_URL`): the terminal's
//! WebSocket (`GET /api/terminal/{namespace}/{shell}`, page protocol v2, `attach::page`),
//! authenticated with the bearer token of the kubeconfig user (or `--token`), so the exec is made
//! as you by the gateway and counts as use of the shell while you type. The session logic is
//! `attach`'s, as for the direct way: this is only the transport. The socket is pinged, so that
//! one that went quiet (a sleeping laptop, a path that drops everything) is found dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::attach::transport::QUEUE;
use crate::attach::{Down, Joined, Link, OpenError, Request, Transport, Up, framed, page};

/// Where the system keeps the CAs it trusts, when `$SSL_CERT_FILE` does not say.
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// How often the socket is pinged.
const PING: Duration = Duration::from_secs(15);

/// How long the gateway may say nothing (not even a pong) before the socket counts as dropped.
const SILENCE: Duration = Duration::from_secs(45);

/// The gateway to connect through, and to which shell.
pub struct Gateway {
    /// `https://HOST[:PORT]`.
    pub url: String,
    /// The CA its certificate chains to (PEM); default: the system's.
    pub certificate_authority: Option<PathBuf>,
    pub namespace: String,
    pub shell: String,
    pub token: String,
    /// Says the gateway's words before a session is joined (what it waits for), as they come.
    pub progress: Progress,
}

/// A line to say now.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

type Socket = WebSocketStream<tokio_rustls::client::TlsStream<TcpStream>>;

impl Transport for Gateway {
    async fn open(&mut self, request: &Request) -> Result<(Link, Joined), OpenError> {
        let socket = self.socket(&page::query(request)).await?;
        link(socket, self.progress.clone()).joined().await
    }
}

/// A link over the terminal's WebSocket: a task reading it, a task writing it.
pub fn link<S>(socket: WebSocketStream<S>, progress: Progress) -> Link
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sink, stream) = socket.split();
    let (up_tx, up_rx) = mpsc::channel(QUEUE);
    let (down_tx, down_rx) = mpsc::channel(QUEUE);
    let reader = tokio::spawn(read_messages(stream, down_tx, progress));
    let writer = tokio::spawn(write_messages(sink, up_rx));
    Link::new(up_tx, down_rx, vec![reader, writer])
}

impl Gateway {
    /// The terminal's socket, with `query`. A refusal of the handshake, or a gateway URL or CA
    /// that cannot work, is final; the network is worth another try.
    async fn socket(&self, query: &str) -> Result<Socket, OpenError> {
        let refused = |e: String| OpenError::Refused(e);
        let base: http::Uri = self.url.parse().map_err(|e| refused(format!("--gateway {}: {e}", self.url)))?;
        if base.scheme_str() != Some("https") {
            return Err(refused(format!("--gateway {}: must be an https:// URL", self.url)));
        }
        let host = base.host().ok_or_else(|| refused("--gateway has no host".into()))?.to_owned();
        let port = base.port_u16().unwrap_or(443);
        let path = format!("{}/api/terminal/{}/{}", base.path().trim_end_matches('/'), self.namespace, self.shell);
        let path = if query.is_empty() { path } else { format!("{path}?{query}") };
        let config = tls(self.certificate_authority.as_deref()).map_err(|e| refused(format!("{e:#}")))?;
        let server = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_owned())
            .map_err(|e| refused(format!("--gateway {}: {e}", self.url)))?;
        let failed = |what: &str, e: &dyn std::fmt::Display| OpenError::Failed(format!("{what}: {e}"));
        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| failed(&format!("connecting to {host}:{port}"), &e))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(server, tcp)
            .await
            .map_err(|e| failed(&format!("TLS with the gateway {}", self.url), &e))?;
        let mut request =
            format!("wss://{host}:{port}{path}").into_client_request().map_err(|e| refused(e.to_string()))?;
        let bearer =
            format!("Bearer {}", self.token).parse().map_err(|_| refused("the token is not a header".into()))?;
        request.headers_mut().insert(http::header::AUTHORIZATION, bearer);
        match tokio_tungstenite::client_async(request, tls).await {
            Ok((socket, _)) => Ok(socket),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(handshake_refused(
                response.status().as_u16(),
                response.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default().as_ref(),
            )),
            Err(e) => Err(failed("opening the terminal", &e)),
        }
    }
}

/// What a handshake answered with `status` and `body` (`{"error": …}`) is: a refusal (4xx but
/// a timeout or too many requests), else worth another try (a gateway restarting).
pub fn handshake_refused(status: u16, body: &str) -> OpenError {
    let said: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let words = said["error"].as_str().map_or_else(|| format!("the gateway said {status}"), str::to_owned);
    match status {
        408 | 429 => OpenError::Failed(words),
        400..=499 => OpenError::Refused(words),
        _ => OpenError::Failed(words),
    }
}

fn tls(certificate_authority: Option<&Path>) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    use anyhow::Context;
    let file = certificate_authority.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty()).map_or_else(|| SYSTEM_CAS.into(), PathBuf::from)
    });
    let pem = std::fs::read(&file).with_context(|| format!("reading the gateway's CA {}", file.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.with_context(|| format!("{}", file.display()))?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The gateway's messages as the client's, until a last word or the socket's end; its notices
/// before a session is joined (the pod it waits for) are said as they come.
async fn read_messages<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: SplitStream<WebSocketStream<S>>,
    down: mpsc::Sender<Down>,
    progress: Progress,
) {
    let mut order = Order::default();
    loop {
        let message = match tokio::time::timeout(SILENCE, stream.next()).await {
            Err(_) => Down::Dropped(format!("no word from the gateway for {}s", SILENCE.as_secs())),
            Ok(None | Some(Ok(Message::Close(_)))) => Down::Dropped("the gateway closed the connection".into()),
            Ok(Some(Err(e))) => Down::Dropped(format!("the connection to the gateway broke: {e}")),
            Ok(Some(Ok(Message::Binary(bytes)))) => Down::Output(bytes.to_vec()),
            Ok(Some(Ok(Message::Text(text)))) => page::to_down(text.as_str()),
            Ok(Some(Ok(_))) => Down::Nothing,
        };
        let last = framed::is_last(&message) || matches!(message, Down::Dropped(_));
        if let (false, Down::Notice(line)) = (order.joined, &message) {
            progress(line);
            continue;
        }
        for message in order.next(message) {
            if down.send(message).await.is_err() {
                return;
            }
        }
        if last {
            return;
        }
    }
}

/// The gateway's messages in the order the client reads them: `attached` first, the words that
/// came before it after it. Output before it is a gateway older than v2, which names no session:
/// the session is joined unnamed.
#[derive(Debug, Default)]
pub struct Order {
    /// Whether `attached` (or output) came.
    pub joined: bool,
    early: Vec<Down>,
}

impl Order {
    /// What to pass on now, given `message`.
    pub fn next(&mut self, message: Down) -> Vec<Down> {
        if message == Down::Nothing {
            return Vec::new();
        }
        if self.joined {
            return vec![message];
        }
        let last = framed::is_last(&message) || matches!(message, Down::Dropped(_));
        let mut out = match message {
            Down::Joined(_) => vec![message],
            Down::Output(_) => vec![Down::Joined(Joined::default()), message],
            _ if last => return vec![message],
            _ => {
                self.early.push(message);
                return Vec::new();
            }
        };
        self.joined = true;
        out.splice(1..1, self.early.drain(..));
        out
    }
}

/// What the client sends, as the gateway's messages, and a ping every [`PING`].
async fn write_messages<S: AsyncRead + AsyncWrite + Unpin>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    mut up: mpsc::Receiver<Up>,
) {
    let mut ping = tokio::time::interval(PING);
    ping.tick().await;
    loop {
        let message = tokio::select! {
            message = up.recv() => match message {
                Some(message) => page::to_message(&message),
                None => {
                    let _ = sink.close().await;
                    return;
                }
            },
            _ = ping.tick() => Message::Ping(Default::default()),
        };
        if sink.send(message).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_handshake_is_final_and_a_restarting_gateway_is_not() {
        let cases = [
            (401, r#"{"error":"sign in again"}"#, OpenError::Refused("sign in again".into())),
            (403, r#"{"error":"not your shell"}"#, OpenError::Refused("not your shell".into())),
            (404, "", OpenError::Refused("the gateway said 404".into())),
            (429, "", OpenError::Failed("the gateway said 429".into())),
            (502, "", OpenError::Failed("the gateway said 502".into())),
            (503, r#"{"error":"stopping"}"#, OpenError::Failed("stopping".into())),
        ];
        for (status, body, expected) in cases {
            assert_eq!(handshake_refused(status, body), expected, "{status}");
        }
    }

    /// The link over a WebSocket, against a gateway played by the test: the session joined,
    /// output, what the client sends as the gateway's messages, and a socket that closes without
    /// a last word is a dropped connection.
    #[tokio::test]
    async fn the_link_speaks_the_page_protocol() {
        use tokio_tungstenite::tungstenite::protocol::Role;
        let (client, server) = tokio::io::duplex(64 * 1024);
        let mut gateway = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let socket = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
        let attached = r#"{"type":"attached","session":"ab12","pod":"web-0","resumed":false,"readOnly":false,
            "allowDrive":false,"attached":[]}"#;
        let waiting = r#"{"type":"notice","message":"waiting for shell web: pod web-0: ContainerCreating"}"#;
        gateway.send(Message::text(waiting)).await.unwrap();
        gateway.send(Message::text(attached)).await.unwrap();
        gateway.send(Message::text(r#"{"type":"notice","message":"recorded"}"#)).await.unwrap();
        gateway.send(Message::binary(b"$ ".to_vec())).await.unwrap();
        let said = Arc::new(std::sync::Mutex::new(Vec::new()));
        let heard = said.clone();
        let progress: Progress = Arc::new(move |line: &str| heard.lock().unwrap().push(line.to_owned()));
        let (mut link, joined) = link(socket, progress).joined().await.unwrap();
        assert_eq!(joined.id, "ab12");
        assert_eq!(*said.lock().unwrap(), ["waiting for shell web: pod web-0: ContainerCreating"]);
        assert_eq!(link.recv().await, Down::Notice("recorded".into()));
        assert_eq!(link.recv().await, Down::Output(b"$ ".to_vec()));
        let size = myownshell_session::protocol::Size { cols: 90, rows: 20 };
        for up in [Up::Input(b"ls\r".to_vec()), Up::Resize(size), Up::Eof, Up::Detach] {
            link.up.send(up).await.unwrap();
        }
        // Binary messages as `bin:…`, text ones as JSON.
        let mut heard: Vec<Value> = Vec::new();
        while heard.len() < 4 {
            match gateway.next().await.unwrap().unwrap() {
                Message::Binary(bytes) => heard.push(format!("bin:{}", String::from_utf8_lossy(&bytes)).into()),
                Message::Text(text) => heard.push(serde_json::from_str(text.as_str()).unwrap()),
                _ => {}
            }
        }
        let expected = [
            "bin:ls\r".into(),
            serde_json::json!({"type": "resize", "cols": 90, "rows": 20}),
            serde_json::json!({"type": "eof"}),
            serde_json::json!({"type": "detach"}),
        ];
        assert_eq!(heard, expected);
        drop(gateway);
        assert!(matches!(link.recv().await, Down::Dropped(_)));
    }

    #[test]
    fn attached_comes_first_and_an_older_gateway_is_joined_unnamed() {
        let named = Down::Joined(Joined { id: "ab12".into(), ..Joined::default() });
        let notice = || Down::Notice("recorded".into());
        let output = || Down::Output(b"$ ".to_vec());
        // (what, the gateway's messages, what the client reads)
        let cases = [
            ("v2", vec![named.clone(), output()], vec![named.clone(), output()]),
            (
                "a notice before attached",
                vec![notice(), named.clone(), output()],
                vec![named.clone(), notice(), output()],
            ),
            (
                "before v2: output first",
                vec![notice(), output(), output()],
                vec![Down::Joined(Joined::default()), notice(), output(), output()],
            ),
            ("refused", vec![notice(), Down::Refused("no".into())], vec![Down::Refused("no".into())]),
            ("nothing is nothing", vec![Down::Nothing, named.clone(), Down::Nothing], vec![named.clone()]),
        ];
        for (what, messages, expected) in cases {
            let mut order = Order::default();
            let read: Vec<Down> = messages.into_iter().flat_map(|m| order.next(m)).collect();
            assert_eq!(read, expected, "{what}");
        }
    }
}
