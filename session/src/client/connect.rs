//! A connection to the holder's socket, speaking messages.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::holder::socket;
use myownshell_session::protocol::{ClientMessage, Decoder, HolderMessage};

/// Open the socket in `dir`.
pub async fn open(dir: &Path) -> Result<UnixStream, String> {
    let path = socket::path(dir);
    UnixStream::connect(&path).await.map_err(|e| {
        format!(
            "reaching the session holder at {}: {e} (is this the shell's container, started by \
             `myownshell-session serve`?)",
            path.display()
        )
    })
}

/// Messages from the holder.
pub struct Incoming {
    read: OwnedReadHalf,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl Incoming {
    pub fn new(read: OwnedReadHalf) -> Self {
        Incoming { read, decoder: Decoder::new(), buf: vec![0; 64 * 1024] }
    }

    /// The next message; `None` once the holder closed the connection.
    pub async fn next(&mut self) -> Result<Option<HolderMessage>, String> {
        loop {
            if let Some(frame) = self.decoder.next_frame().map_err(|e| format!("from the holder: {e}"))? {
                return HolderMessage::decode(frame).map(Some).map_err(|e| format!("from the holder: {e}"));
            }
            let n = self.read.read(&mut self.buf).await.map_err(|e| format!("reading from the holder: {e}"))?;
            if n == 0 {
                return Ok(None);
            }
            self.decoder.feed(&self.buf[..n]);
        }
    }
}

/// Send one message.
pub async fn send(write: &mut OwnedWriteHalf, message: &ClientMessage) -> Result<(), String> {
    let bytes = message.encode().map_err(|e| e.to_string())?;
    write.write_all(&bytes).await.map_err(|e| format!("writing to the holder: {e}"))
}

/// Send one request and read the one answer (`list`, `kill`).
pub async fn ask(dir: &Path, message: &ClientMessage) -> Result<HolderMessage, String> {
    let (read, mut write) = open(dir).await?.into_split();
    send(&mut write, message).await?;
    Incoming::new(read).next().await?.ok_or_else(|| "the holder closed the connection without an answer".into())
}
