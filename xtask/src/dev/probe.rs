//! Plain-HTTP readiness checks of the probe ports (`/readyz`).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The status code of `GET path` on `addr`, or why there is none.
pub async fn http_status(addr: SocketAddr, path: &str) -> Result<u16, String> {
    let attempt = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
        let mut head = [0u8; 32];
        let n = stream.read(&mut head).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&head[..n]);
        text.split_whitespace().nth(1).and_then(|code| code.parse().ok()).ok_or_else(|| format!("not HTTP: {text:?}"))
    };
    tokio::time::timeout(Duration::from_secs(2), attempt).await.map_err(|_| "timed out".to_owned())?
}
