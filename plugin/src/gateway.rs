//! `connect` through the gateway (`--gateway URL`, or `$MYOWNSHELL_GATEWAY_URL`): the terminal's
//! WebSocket, authenticated with the bearer token of the kubeconfig user (or `--token`), so the
//! exec is made as you by the gateway and counts as use of the shell while you type. The local
//! terminal is put in raw mode (restored on every way out), its size follows the window, and
//! the exit code is the remote shell's. Without a terminal (a pipe), stdin's end closes the
//! remote shell's stdin.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use rustix::termios::{OptionalActions, Termios, tcgetattr, tcgetwinsize, tcsetattr};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Where the system keeps the CAs it trusts, when `$SSL_CERT_FILE` does not say.
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The gateway to connect through.
pub struct Gateway {
    /// `https://HOST[:PORT]`.
    pub url: String,
    /// The CA its certificate chains to (PEM); default: the system's.
    pub certificate_authority: Option<PathBuf>,
}

/// The local terminal in raw mode until dropped.
struct Raw(Option<Termios>);

impl Raw {
    fn enter() -> Self {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Self(None);
        }
        let Ok(saved) = tcgetattr(&stdin) else { return Self(None) };
        let mut raw = saved.clone();
        raw.make_raw();
        match tcsetattr(&stdin, OptionalActions::Now, &raw) {
            Ok(()) => Self(Some(saved)),
            Err(_) => Self(None),
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
        }
    }
}

fn tls(certificate_authority: Option<&Path>) -> anyhow::Result<Arc<rustls::ClientConfig>> {
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

/// The local window's size, if stdout is a terminal.
fn window() -> Option<(u16, u16)> {
    let size = tcgetwinsize(std::io::stdout()).ok()?;
    (size.ws_col > 0 && size.ws_row > 0).then_some((size.ws_col, size.ws_row))
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<TcpStream>>;

async fn open(gateway: &Gateway, namespace: &str, name: &str, token: &str) -> anyhow::Result<Socket> {
    let base: http::Uri = gateway.url.parse().with_context(|| format!("--gateway {}", gateway.url))?;
    if base.scheme_str() != Some("https") {
        bail!("--gateway {}: must be an https:// URL", gateway.url);
    }
    let host = base.host().context("--gateway has no host")?.to_owned();
    let port = base.port_u16().unwrap_or(443);
    let mut path = format!("{}/api/terminal/{namespace}/{name}", base.path().trim_end_matches('/'));
    if let Some((cols, rows)) = window() {
        path.push_str(&format!("?cols={cols}&rows={rows}"));
    }
    let tcp =
        TcpStream::connect((host.as_str(), port)).await.with_context(|| format!("connecting to {host}:{port}"))?;
    let server = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_owned())?;
    let tls = tokio_rustls::TlsConnector::from(tls(gateway.certificate_authority.as_deref())?)
        .connect(server, tcp)
        .await
        .with_context(|| format!("TLS with the gateway {}", gateway.url))?;
    let mut request = format!("wss://{host}:{port}{path}").into_client_request()?;
    request.headers_mut().insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse()?);
    match tokio_tungstenite::client_async(request, tls).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default();
            let said: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            bail!(
                "{}",
                said["error"].as_str().map_or_else(|| format!("the gateway said {}", response.status()), str::to_owned)
            )
        }
        Err(e) => Err(e).context("opening the terminal"),
    }
}

/// A line from the gateway, on stderr (in raw mode a line needs its carriage return).
fn say(line: &str) {
    let _ = write!(std::io::stderr(), "{line}\r\n");
}

/// Connect to shell `name` through `gateway` with `token`; the remote shell's exit code.
pub async fn connect(gateway: &Gateway, namespace: &str, name: &str, token: &str) -> anyhow::Result<ExitCode> {
    let mut socket = open(gateway, namespace, name, token).await?;
    let raw = Raw::enter();
    let outcome = relay(&mut socket).await;
    drop(raw);
    outcome
}

async fn relay(socket: &mut Socket) -> anyhow::Result<ExitCode> {
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut resized = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut stdin_open = true;
    loop {
        tokio::select! {
            read = stdin.read(&mut buf), if stdin_open => match read {
                Ok(0) | Err(_) => {
                    stdin_open = false;
                    socket.send(Message::text(json!({ "type": "eof" }).to_string())).await?;
                }
                Ok(n) => socket.send(Message::binary(buf[..n].to_vec())).await?,
            },
            _ = resized.recv() => {
                if let Some((cols, rows)) = window() {
                    socket.send(Message::text(json!({ "type": "resize", "cols": cols, "rows": rows }).to_string())).await?;
                }
            }
            message = socket.next() => match message {
                Some(Ok(Message::Binary(output))) => {
                    stdout.write_all(&output).await?;
                    stdout.flush().await?;
                }
                Some(Ok(Message::Text(text))) => {
                    if let Some(code) = control(text.as_str())? {
                        return Ok(code);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => bail!("the connection to the gateway broke: {e}"),
                None => bail!("the gateway closed the connection"),
            },
        }
    }
}

/// A message from the gateway: the exit code once the shell ended.
fn control(text: &str) -> anyhow::Result<Option<ExitCode>> {
    let message: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let words = message["message"].as_str().unwrap_or_default();
    match message["type"].as_str().unwrap_or_default() {
        "exit" => {
            let code = message["code"].as_i64().unwrap_or(1);
            Ok(Some(ExitCode::from(u8::try_from(code).unwrap_or(1))))
        }
        "refused" | "closed" => bail!("{words}"),
        "replaced" => bail!("the terminal was opened elsewhere"),
        "notice" | "stopping" | "error" => {
            say(words);
            Ok(None)
        }
        _ => Ok(None),
    }
}
