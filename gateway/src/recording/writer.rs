//! One recording: a task that writes a terminal's output and resizes to its file as asciicast
//! v2, until the terminal ends or the recording can go no further: the file reaches its size
//! limit, its shell's or the gateway's quota is reached ([`super::quota`]), or the disk fails.
//! Then it says so in the recording, writes nothing more, and tells its terminal why
//! ([`Recording::stopped`]), which ends: a recorded session never goes on unrecorded. The
//! terminal waits for the writer when the disk is slower than the shell (a recording never
//! drops output).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::asciicast::{self, Utf8Carry};
use super::quota::{Quota, ShellKey};

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

/// Where a recording may write, and how much.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The most this recording holds (`--recording-max-bytes`).
    pub max_bytes: u64,
    /// The quotas it is counted against.
    pub quota: Arc<Quota>,
    /// The shell it is of.
    pub shell: ShellKey,
}

/// A recording being written.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Where the terminal sends what it shows.
    pub tx: mpsc::Sender<Event>,
    /// Cancelled when the recording can go no further; [`Recording::why`] says why.
    pub stopped: CancellationToken,
    why: Arc<Mutex<Option<String>>>,
}

impl Recording {
    /// Why the recording stopped, once it has.
    pub fn why(&self) -> Option<String> {
        self.why.lock().clone()
    }
}

/// Start recording to `path` (its folder made if needed), with `header` as the first line,
/// within `limits`.
pub async fn start(path: PathBuf, header: String, limits: Limits) -> std::io::Result<Recording> {
    limits.quota.take(&limits.shell, header.len() as u64).map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let file = tokio::fs::OpenOptions::new().write(true).create_new(true).open(&path).await?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let recording = Recording { tx, stopped: CancellationToken::new(), why: Arc::default() };
    let told = recording.clone();
    tokio::spawn(async move {
        let why = match write(file, header, &limits, rx).await {
            Ok(None) => return,
            Ok(Some(why)) => why,
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "a recording could not be written");
                format!("the recording could not be written ({e})")
            }
        };
        *told.why.lock() = Some(why);
        told.stopped.cancel();
    });
    Ok(recording)
}

/// Write until the terminal ends (`None`) or the recording can go no further (why).
async fn write(
    file: tokio::fs::File,
    header: String,
    limits: &Limits,
    mut rx: mpsc::Receiver<Event>,
) -> std::io::Result<Option<String>> {
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
        let full = if written + line.len() as u64 > limits.max_bytes {
            Some("it reached its size limit (--recording-max-bytes)".to_owned())
        } else {
            limits.quota.take(&limits.shell, line.len() as u64).err().map(|full| full.to_string())
        };
        if let Some(why) = full {
            // The notice is the recording's last line, over any limit: a few dozen bytes.
            let notice = format!("\r\n[the recording stopped here: {why}]\r\n");
            out.write_all(asciicast::output(at, &notice).as_bytes()).await?;
            out.flush().await?;
            return Ok(Some(format!("the session's recording stopped: {why}")));
        }
        written += line.len() as u64;
        out.write_all(line.as_bytes()).await?;
        if rx.is_empty() {
            out.flush().await?;
        }
    }
    out.flush().await?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_bytes: u64, quota: &Arc<Quota>) -> Limits {
        Limits { max_bytes, quota: quota.clone(), shell: ("team".into(), "web".into()) }
    }

    #[tokio::test]
    async fn output_and_resizes_are_written_until_the_limit() {
        let dir = std::env::temp_dir().join(format!("recording-writer-{}", std::process::id()));
        let path = dir.join("team/web/20270115T080000Z-0123abcd.cast");
        let header = asciicast::header(80, 24, 1_800_000_000, "team/web by alice");
        let quota = Arc::new(Quota::new(u64::MAX, u64::MAX));
        let recording = start(path.clone(), header.clone(), limits(400, &quota)).await.expect("a recording");
        let tx = recording.tx.clone();
        tx.send(Event::Output(Bytes::from_static(b"$ ls\r\n"))).await.expect("sent");
        tx.send(Event::Resize(120, 40)).await.expect("sent");
        for _ in 0..20 {
            if tx.send(Event::Output(Bytes::from_static(b"a line of output\r\n"))).await.is_err() {
                break;
            }
        }
        drop(tx);
        let text = finished(&path).await;
        recording.stopped.cancelled().await;
        assert!(recording.why().is_some_and(|w| w.contains("--recording-max-bytes")), "{:?}", recording.why());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], header.trim_end());
        assert!(lines[1].ends_with(r#","o","$ ls\r\n"]"#), "{}", lines[1]);
        assert!(lines[2].ends_with(r#","r","120x40"]"#), "{}", lines[2]);
        assert!(lines.last().is_some_and(|l| l.contains("the recording stopped here")), "{text}");
        assert!(text.len() < 400 + 200, "the limit holds: {} bytes", text.len());
        assert!(
            start(path, header.clone(), limits(400, &quota)).await.is_err(),
            "a recording never overwrites another"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_quota_reached_stops_the_recording_and_says_why() {
        let dir = std::env::temp_dir().join(format!("recording-quota-writer-{}", std::process::id()));
        let path = dir.join("team/web/20270115T080000Z-0123abcd.cast");
        let header = asciicast::header(80, 24, 1_800_000_000, "team/web by alice");
        let quota = Arc::new(Quota::new(header.len() as u64 + 100, u64::MAX));
        let recording = start(path.clone(), header.clone(), limits(u64::MAX, &quota)).await.expect("a recording");
        for _ in 0..20 {
            if recording.tx.send(Event::Output(Bytes::from_static(b"a line of output\r\n"))).await.is_err() {
                break;
            }
        }
        recording.stopped.cancelled().await;
        let why = recording.why().unwrap_or_default();
        assert!(why.contains("--recordings-max-shell-bytes"), "{why}");
        assert!(finished(&path).await.contains("--recordings-max-shell-bytes"), "the recording says so too");
        let other = dir.join("team/web/20270115T080001Z-0123abce.cast");
        assert!(start(other, header, limits(u64::MAX, &quota)).await.is_err(), "no new recording for a full shell");
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
