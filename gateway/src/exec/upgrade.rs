//! The exec's WebSocket to the apiserver, opened here rather than by kube's `Client::connect`
//! for one reason, measured: kube opens it with tungstenite's default configuration, whose
//! 128 KiB read buffer is zero-filled before every read, so each open terminal held 128 KiB for
//! it alone (`cargo xtask bench gateway`: 171.4 KiB per idle terminal with kube's, see the
//! README). The request goes through the same kube client (`Client::send`: its TLS, its
//! credentials, the user's impersonation headers); only the handshake's check is ours:
//! `101 Switching Protocols`, the accept key, and the `v5.channel.k8s.io` subprotocol.

use http::{HeaderValue, Request, StatusCode, header};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use kube::Client;
use kube::core::Status;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// The exec protocol the gateway speaks (v5: stdin can be closed).
pub const PROTOCOL: &str = "v5.channel.k8s.io";
/// What the exec's socket reads into at once: output arrives in chunks the kubelet sizes
/// (at most 32 KiB), and a bigger frame grows the buffer for itself.
const READ_BUFFER: usize = 8 * 1024;

/// The exec's socket.
pub type ExecSocket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Why no exec was opened.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The apiserver, or an admission webhook (the connect gate), refused it: its status code and
    /// their words.
    #[error("{1}")]
    Refused(StatusCode, String),
    /// Anything else.
    #[error("could not open the exec: {0}")]
    Failed(String),
}

/// Whether an apiserver's answer `code` may be different on the next try: throttled (429) or
/// not able to answer now (5xx, a webhook it could not call included); a 4xx refusal stands.
pub fn answers_later(code: StatusCode) -> bool {
    code == StatusCode::TOO_MANY_REQUESTS || code.is_server_error()
}

impl UpgradeError {
    /// Whether trying again may open it: [`answers_later`], or the connection broke.
    pub fn transient(&self) -> bool {
        match self {
            UpgradeError::Refused(code, _) => answers_later(*code),
            UpgradeError::Failed(_) => true,
        }
    }
}

/// Open the exec `request` (an `exec` URL, headers as wanted) as a WebSocket.
pub async fn open(client: &Client, request: Request<Vec<u8>>) -> Result<ExecSocket, UpgradeError> {
    let (mut parts, body) = request.into_parts();
    let key = generate_key();
    let headers = &mut parts.headers;
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
    headers.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(PROTOCOL));
    let key_value = HeaderValue::from_str(&key).map_err(|e| UpgradeError::Failed(e.to_string()))?;
    headers.insert(header::SEC_WEBSOCKET_KEY, key_value);
    let request = Request::from_parts(parts, kube::client::Body::from(body));
    let response = client.send(request).await.map_err(|e| UpgradeError::Failed(e.to_string()))?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        let code = response.status();
        let bytes = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        return Err(refusal(code, &bytes));
    }
    check(response.headers(), &key)?;
    let upgraded = hyper::upgrade::on(response).await.map_err(|e| UpgradeError::Failed(e.to_string()))?;
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
    Ok(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, Some(config)).await)
}

/// The refusal in an answer that is not an upgrade: a `metav1.Status`'s message, else the text.
fn refusal(code: StatusCode, body: &[u8]) -> UpgradeError {
    match serde_json::from_slice::<Status>(body) {
        Ok(status) if !status.message.is_empty() => UpgradeError::Refused(code, status.message),
        _ => UpgradeError::Failed(format!("{code}: {}", String::from_utf8_lossy(body).trim())),
    }
}

/// RFC 6455's checks of the answer, and the subprotocol.
fn check(headers: &http::HeaderMap, key: &str) -> Result<(), UpgradeError> {
    let has = |name: header::HeaderName, want: &str| {
        headers.get(name).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case(want))
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return Err(UpgradeError::Failed("the apiserver did not upgrade the connection".into()));
    }
    let accept = headers.get(header::SEC_WEBSOCKET_ACCEPT).and_then(|v| v.to_str().ok());
    if accept != Some(derive_accept_key(key.as_bytes()).as_str()) {
        return Err(UpgradeError::Failed("the apiserver's Sec-WebSocket-Accept does not match".into()));
    }
    if !has(header::SEC_WEBSOCKET_PROTOCOL, PROTOCOL) {
        return Err(UpgradeError::Failed(format!("the apiserver does not speak {PROTOCOL}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;

    fn answer(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(header::HeaderName::from_bytes(k.as_bytes()).expect("name"), HeaderValue::from_str(v).expect("v"));
        }
        h
    }

    #[test]
    fn the_answer_is_checked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let good = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            ("sec-websocket-protocol", PROTOCOL),
        ];
        assert!(check(&answer(&good), key).is_ok());
        for missing in 0..good.len() {
            let pairs: Vec<_> = good.iter().enumerate().filter(|(i, _)| *i != missing).map(|(_, p)| *p).collect();
            assert!(check(&answer(&pairs), key).is_err(), "without {}", good[missing].0);
        }
        let v4 = [good[0], good[1], good[2], ("sec-websocket-protocol", "v4.channel.k8s.io")];
        assert!(check(&answer(&v4), key).is_err());
    }

    #[test]
    fn refusals_are_the_statuss_words() {
        let gate = br#"{"kind":"Status","status":"Failure","message":"bob may not exec into pod web-1","code":403}"#;
        assert_eq!(refusal(StatusCode::FORBIDDEN, gate).to_string(), "bob may not exec into pod web-1");
        assert_eq!(
            refusal(StatusCode::BAD_GATEWAY, b"<html>no</html>").to_string(),
            "could not open the exec: 502 Bad Gateway: <html>no</html>"
        );
    }

    #[test]
    fn only_what_may_answer_next_time_is_transient() {
        let cases = [
            ("the gate's refusal", UpgradeError::Refused(StatusCode::FORBIDDEN, "no".into()), false),
            ("no such pod", UpgradeError::Refused(StatusCode::NOT_FOUND, "gone".into()), false),
            ("the apiserver's throttling", UpgradeError::Refused(StatusCode::TOO_MANY_REQUESTS, "later".into()), true),
            (
                "a webhook that could not be called",
                UpgradeError::Refused(StatusCode::INTERNAL_SERVER_ERROR, "x".into()),
                true,
            ),
            ("the kubelet unreachable", UpgradeError::Refused(StatusCode::BAD_GATEWAY, "x".into()), true),
            ("a broken connection", UpgradeError::Failed("reset".into()), true),
        ];
        for (what, error, want) in cases {
            assert_eq!(error.transient(), want, "{what}");
        }
    }
}
