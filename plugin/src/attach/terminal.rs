//! The person's end, as the session logic sees it: input, window sizes and stop signals as
//! they come, the output to write, and lines to say. `local` makes the real one (stdin, SIGWINCH,
//! stdout, stderr); tests make one of channels.

use myownshell_session::protocol::Size;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Where the client reads and writes.
pub struct Terminal<W> {
    /// Chunks of input; closed at its end.
    pub input: mpsc::Receiver<Vec<u8>>,
    /// The window's new sizes.
    pub resized: mpsc::Receiver<Size>,
    /// Signals that ask the client to stop (SIGTERM, SIGHUP, SIGINT), by number.
    pub stop: mpsc::Receiver<i32>,
    /// Where the session's output goes.
    pub output: W,
    /// Says one line to the person (stderr).
    pub lines: Box<dyn FnMut(&str) + Send>,
}

impl<W: AsyncWrite + Unpin> Terminal<W> {
    /// Write output as it comes.
    pub async fn show(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.output.write_all(bytes).await.map_err(|e| format!("writing the output: {e}"))?;
        self.output.flush().await.map_err(|e| format!("writing the output: {e}"))
    }

    /// Say one line.
    pub fn say(&mut self, line: &str) {
        (self.lines)(line);
    }
}
