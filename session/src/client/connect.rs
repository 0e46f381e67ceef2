//! A connection to the holder's socket, speaking messages.

use std::io::ErrorKind;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::holder::socket;
use myownshell_session::protocol::{ClientMessage, Decoder, HolderMessage};

/// How long a client waits for the holder to listen. The holder is the container's first
/// process and listens within milliseconds of its start, but a pod is Ready (and a page's attach
/// can arrive) as soon as the container has started, which on a loaded node can be before then.
const HOLDER_STARTING: Duration = Duration::from_secs(10);
/// How often it looks again meanwhile.
const RETRY: Duration = Duration::from_millis(50);

/// Open the socket in `dir`, waiting up to [`HOLDER_STARTING`] for a holder that is starting
/// (no socket yet, or nobody listening on it yet).
pub async fn open(dir: &Path) -> Result<UnixStream, String> {
    open_within(dir, HOLDER_STARTING).await
}

async fn open_within(dir: &Path, wait: Duration) -> Result<UnixStream, String> {
    let path = socket::path(dir);
    let started = Instant::now();
    loop {
        match UnixStream::connect(&path).await {
            Ok(stream) => return Ok(stream),
            Err(e)
                if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused)
                    && started.elapsed() < wait =>
            {
                tokio::time::sleep(RETRY).await;
            }
            Err(e) => {
                return Err(format!(
                    "reaching the session holder at {}: {e} (is this the shell's container, started by \
                     `myownshell-session serve`?)",
                    path.display()
                ));
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// A client that comes before the holder listens gets in once it does; with nobody ever
    /// listening it gives up, naming the socket.
    #[test]
    fn a_client_waits_for_a_starting_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = socket::path(dir.path());
        runtime().block_on(async {
            let client = tokio::spawn({
                let dir = dir.path().to_owned();
                async move { open_within(&dir, Duration::from_secs(10)).await }
            });
            tokio::time::sleep(Duration::from_millis(200)).await;
            let listener = tokio::net::UnixListener::bind(&path).unwrap();
            let (accepted, opened) = tokio::join!(listener.accept(), client);
            assert!(accepted.is_ok() && opened.unwrap().is_ok());
            drop(listener);
            std::fs::remove_file(&path).unwrap();
            let started = Instant::now();
            let err = open_within(dir.path(), Duration::from_millis(300)).await.unwrap_err();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(started.elapsed() >= Duration::from_millis(300), "gave up at once");
        });
    }
}
