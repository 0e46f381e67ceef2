//! A minimal plain-HTTP/1.1 GET for probe endpoints (`/healthz`, `/readyz`), shared by the
//! harness helpers and `cargo xtask dev`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET path` on `addr` over plain HTTP/1.1: `(status, body)`.
pub async fn plain_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| format!("GET {path} on {addr} timed out"))?
        .map_err(|e| format!("GET {path} on {addr}: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("malformed response: {text}"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status code in: {head}"))?;
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    Ok((code, if chunked { dechunk(body) } else { body.to_owned() }))
}

/// Undo `Transfer-Encoding: chunked`.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies() {
        assert_eq!(dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), "hello world");
    }
}
