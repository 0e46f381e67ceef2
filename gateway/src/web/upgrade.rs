//! The server side of a WebSocket handshake (RFC 6455), on the connection hyper hands over.
//!
//! Written here rather than taken from axum's `ws` feature: that feature builds on a different
//! major of tokio-tungstenite than kube's `ws` (0.29 against 0.30), and two copies of the
//! WebSocket stack would be compiled into the image. The handshake is the check below and one
//! header; the framing is tungstenite's.

use axum::body::Body;
use futures::SinkExt;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// What a page's socket reads into at once.
const READ_BUFFER: usize = 8 * 1024;

/// The upgraded connection.
pub type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Why a request is not a WebSocket handshake.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotAWebSocket {
    /// A header the handshake needs is missing or wrong.
    #[error("not a WebSocket handshake: {0}")]
    Header(&'static str),
    /// The server cannot take the connection over.
    #[error("this connection cannot be upgraded")]
    NoUpgrade,
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The `Sec-WebSocket-Accept` answer to a valid handshake's headers.
pub fn accept_key(headers: &HeaderMap) -> Result<String, NotAWebSocket> {
    if !has_token(headers, header::CONNECTION, "upgrade") {
        return Err(NotAWebSocket::Header("Connection: Upgrade"));
    }
    if !has_token(headers, header::UPGRADE, "websocket") {
        return Err(NotAWebSocket::Header("Upgrade: websocket"));
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION).map(HeaderValue::as_bytes) != Some(b"13") {
        return Err(NotAWebSocket::Header("Sec-WebSocket-Version: 13"));
    }
    let key = headers.get(header::SEC_WEBSOCKET_KEY).ok_or(NotAWebSocket::Header("Sec-WebSocket-Key"))?;
    Ok(derive_accept_key(key.as_bytes()))
}

/// Take the request's connection over: the `101` response to return, and the socket, which
/// becomes usable once that response has been sent.
pub fn upgrade(
    request: &mut Request<Body>,
    max_message: usize,
) -> Result<(Response<Body>, impl Future<Output = Option<Socket>> + use<>), NotAWebSocket> {
    let accept = accept_key(request.headers())?;
    let on_upgrade = request.extensions_mut().remove::<OnUpgrade>().ok_or(NotAWebSocket::NoUpgrade)?;
    let response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .body(Body::empty())
        .map_err(|_| NotAWebSocket::Header("Sec-WebSocket-Key"))?;
    // tungstenite zero-fills its whole read buffer before each read: its default 128 KiB made
    // every open terminal 128 KiB bigger (`cargo xtask bench gateway`, memory per terminal).
    // Keystrokes and resizes are small; a paste past 8 KiB grows the buffer for that frame.
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    let socket = async move {
        let upgraded = on_upgrade.await.ok()?;
        Some(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await)
    };
    Ok((response, socket))
}

/// Send `value` as a text message; whether it went.
pub async fn send_json(socket: &mut Socket, value: serde_json::Value) -> bool {
    socket.send(Message::text(value.to_string())).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        h
    }

    #[test]
    fn handshakes() {
        let good = [
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        // RFC 6455's own example.
        assert_eq!(accept_key(&headers(&good)), Ok("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".into()));
        let cases: &[(&str, usize, &'static str)] = &[
            ("no Connection", 0, "Connection: Upgrade"),
            ("no Upgrade", 1, "Upgrade: websocket"),
            ("no version", 2, "Sec-WebSocket-Version: 13"),
            ("no key", 3, "Sec-WebSocket-Key"),
        ];
        for (name, missing, want) in cases {
            let pairs: Vec<_> = good.iter().enumerate().filter(|(i, _)| i != missing).map(|(_, p)| *p).collect();
            assert_eq!(accept_key(&headers(&pairs)), Err(NotAWebSocket::Header(want)), "{name}");
        }
        let old = [good[0], good[1], ("sec-websocket-version", "8"), good[3]];
        assert_eq!(accept_key(&headers(&old)), Err(NotAWebSocket::Header("Sec-WebSocket-Version: 13")));
    }
}
