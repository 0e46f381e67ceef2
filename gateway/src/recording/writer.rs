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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_and_resizes_are_written_until_the_limit() {
        let dir = std::env::temp_dir().join(format!("recording-writer-{}", std::process::id()));
        let path = dir.join("team/web/20270115T080000Z-0123abcd.cast");
        let header = asciicast::header(80, 24, 1_800_000_000, "team/web by alice");
        let tx = start(path.clone(), header.clone(), 400).await.expect("a recording");
        tx.send(Event::Output(Bytes::from_static(b"$ ls\r\n"))).await.expect("sent");
        tx.send(Event::Resize(120, 40)).await.expect("sent");
        for _ in 0..20 {
            tx.send(Event::Output(Bytes::from_static(b"a line of output\r\n"))).await.expect("sent");
        }
        drop(tx);
        let text = finished(&path).await;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], header.trim_end());
        assert!(lines[1].ends_with(r#","o","$ ls\r\n"]"#), "{}", lines[1]);
        assert!(lines[2].ends_with(r#","r","120x40"]"#), "{}", lines[2]);
        assert!(lines.last().is_some_and(|l| l.contains("the recording stopped here")), "{text}");
        assert!(text.len() < 400 + 200, "the limit holds: {} bytes", text.len());
        assert!(start(path, header, 400).await.is_err(), "a recording never overwrites another");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The file once its writer has finished: the writer ends when its channel closes, and the
    /// last line it writes says the recording stopped (polled, with a deadline).
    async fn finished(path: &std::path::Path) -> String {
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let text = tokio::fs::read_to_string(path).await.unwrap_or_default();
            if text.contains("the recording stopped here") || Instant::now() > deadline {
                return text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}
