//! One recording: a task that writes a terminal's output and resizes to its file as asciicast
//! v2, until the terminal ends or the file reaches its size limit (then it says so in the
//! recording and writes nothing more). The terminal waits for the writer when the disk is
//! slower than the shell (a recording never drops output).

use std::path::PathBuf;
use std::time::Instant;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::asciicast::{self, Utf8Carry};

/// What a terminal tells its recording.
#[derive(Debug)]
pub enum Event {
    /// Output shown.
    Output(Bytes),
    /// The window's new size.
    Resize(u16, u16),
}

/// Events queued before the terminal waits for the disk.
const QUEUE: usize = 256;

/// Start recording to `path` (its folder made if needed), with `header` as the first line and
/// at most `max_bytes` in all.
pub async fn start(path: PathBuf, header: String, max_bytes: u64) -> std::io::Result<mpsc::Sender<Event>> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let file = tokio::fs::OpenOptions::new().write(true).create_new(true).open(&path).await?;
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(async move {
        if let Err(e) = write(file, header, max_bytes, rx).await {
            tracing::warn!(error = %e, path = %path.display(), "a recording could not be written");
        }
    });
    Ok(tx)
}

async fn write(
    file: tokio::fs::File,
    header: String,
    max_bytes: u64,
    mut rx: mpsc::Receiver<Event>,
) -> std::io::Result<()> {
    let mut out = tokio::io::BufWriter::new(file);
    let started = Instant::now();
    let mut written = header.len() as u64;
    out.write_all(header.as_bytes()).await?;
    let mut carry = Utf8Carry::default();
    while let Some(event) = rx.recv().await {
        let at = started.elapsed().as_secs_f64();
        let line = match event {
            Event::Output(bytes) => asciicast::output(at, &carry.text(&bytes)),
            Event::Resize(cols, rows) => asciicast::resize(at, cols, rows),
        };
        if written + line.len() as u64 > max_bytes {
            let notice = "\r\n[the recording stopped here: it reached its size limit (--recording-max-bytes)]\r\n";
            out.write_all(asciicast::output(at, notice).as_bytes()).await?;
            out.flush().await?;
            // The terminal goes on; what it sends now is not kept.
            while rx.recv().await.is_some() {}
            return Ok(());
        }
        written += line.len() as u64;
        out.write_all(line.as_bytes()).await?;
        if rx.is_empty() {
            out.flush().await?;
        }
    }
    out.flush().await
}
