//! The holder's frames over a pair of byte streams (the exec's stdout and stdin, or a local
//! `attach --framed`'s): a task decoding frames into [`Down`], a task encoding [`Up`] into
//! frames, and the mapping between the holder's messages and the client's, pure.

use std::future::Future;

use myownshell_session::protocol::{Attached, ClientMessage, Decoder, EndReason, Ended, HolderMessage};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::transport::{Down, Joined, Link, QUEUE, Up};

/// A link over `read` and `write`. When `read` ends or fails without a last word, `end` says
/// what that was, told whether any frame came and the read error, if any (the exec's status
/// tells a pod without a holder from a dropped connection).
pub fn spawn<R, W, E, F>(read: R, write: W, end: E) -> Link
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    E: FnOnce(bool, Option<String>) -> F + Send + 'static,
    F: Future<Output = Down> + Send + 'static,
{
    let (up_tx, up_rx) = mpsc::channel(QUEUE);
    let (down_tx, down_rx) = mpsc::channel(QUEUE);
    let reader = tokio::spawn(read_frames(read, down_tx, end));
    let writer = tokio::spawn(write_frames(write, up_rx));
    Link::new(up_tx, down_rx, vec![reader, writer])
}

async fn read_frames<R, E, F>(mut read: R, down: mpsc::Sender<Down>, end: E)
where
    R: AsyncRead + Unpin,
    E: FnOnce(bool, Option<String>) -> F,
    F: Future<Output = Down>,
{
    let mut decoder = Decoder::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen = false;
    let error = 'reading: loop {
        loop {
            let message = match decoder.next_frame() {
                Ok(Some(frame)) => HolderMessage::decode(frame),
                Ok(None) => break,
                Err(e) => break 'reading Some(format!("from the holder: {e}")),
            };
            let message = match message {
                Ok(message) => to_down(message),
                Err(e) => break 'reading Some(format!("from the holder: {e}")),
            };
            seen = true;
            let last = is_last(&message);
            if down.send(message).await.is_err() || last {
                return;
            }
        }
        match read.read(&mut buf).await {
            Ok(0) => break None,
            Ok(n) => decoder.feed(&buf[..n]),
            Err(e) => break Some(format!("reading from the holder: {e}")),
        }
    };
    let _ = down.send(end(seen, error).await).await;
}

async fn write_frames<W: AsyncWrite + Unpin>(mut write: W, mut up: mpsc::Receiver<Up>) {
    while let Some(message) = up.recv().await {
        // Input comes in chunks of at most 32 KiB, under a frame's 64 KiB: nothing fails here.
        let Ok(bytes) = to_client(&message).encode() else { continue };
        if write.write_all(&bytes).await.is_err() || write.flush().await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// Whether the holder closes after `down`.
pub fn is_last(down: &Down) -> bool {
    matches!(down, Down::Exited(_) | Down::Ended(_) | Down::Refused(_) | Down::Detached)
}

/// The frame for what the client sends.
pub fn to_client(up: &Up) -> ClientMessage {
    match up {
        Up::Input(bytes) => ClientMessage::Input(bytes.clone()),
        Up::Resize(size) => ClientMessage::Resize(*size),
        Up::Eof => ClientMessage::Eof,
        Up::Detach => ClientMessage::Detach,
    }
}

/// What a holder's message is to the client.
pub fn to_down(message: HolderMessage) -> Down {
    match message {
        HolderMessage::Attached(attached) => Down::Joined(joined(attached)),
        HolderMessage::Output(bytes) => Down::Output(bytes),
        HolderMessage::Presence(p) => Down::Presence { attached: p.attached, allow_drive: p.allow_drive },
        HolderMessage::Notice(text) => Down::Notice(text),
        HolderMessage::Exited(exited) => Down::Exited(exited.code),
        HolderMessage::Ended(ended) => Down::Ended(ended_words(&ended)),
        HolderMessage::Refused(why) => Down::Refused(why),
        HolderMessage::Sessions(_) => Down::Nothing,
    }
}

fn joined(attached: Attached) -> Joined {
    Joined {
        id: attached.id,
        resumed: attached.resumed,
        read_only: attached.read_only,
        created: Some(attached.created),
        pid: Some(attached.pid),
        attached: attached.attached,
        allow_drive: attached.allow_drive,
    }
}

/// Why a session ended: the holder's words, else its reason's.
fn ended_words(ended: &Ended) -> String {
    if !ended.message.is_empty() {
        return ended.message.clone();
    }
    match ended.reason {
        EndReason::IdleTtl => "nobody was attached to it for its detached timeout",
        EndReason::Killed => "it was ended",
        EndReason::PodStopping => "the shell's pod is stopping",
        EndReason::Other => "the holder ended it",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use myownshell_session::protocol::{Attendee, Exited, Presence, SessionInfo, Size};

    use super::*;

    #[test]
    fn what_each_holder_message_is_to_the_client() {
        let alice = Attendee { user: "alice".into(), read_only: false, driving: true };
        let attached = Attached {
            id: "ab12cd34".into(),
            created: 1000,
            pid: 42,
            resumed: true,
            attached: vec![alice.clone()],
            ..Attached::default()
        };
        let ended = |reason, message: &str| HolderMessage::Ended(Ended { reason, message: message.into() });
        // (holder's message, what the client hears, whether the holder closes after it)
        let cases = [
            (
                HolderMessage::Attached(attached),
                Down::Joined(Joined {
                    id: "ab12cd34".into(),
                    resumed: true,
                    created: Some(1000),
                    pid: Some(42),
                    attached: vec![alice.clone()],
                    ..Joined::default()
                }),
                false,
            ),
            (HolderMessage::Output(b"hi".to_vec()), Down::Output(b"hi".to_vec()), false),
            (
                HolderMessage::Presence(Presence { attached: vec![alice.clone()], allow_drive: true }),
                Down::Presence { attached: vec![alice], allow_drive: true },
                false,
            ),
            (HolderMessage::Notice("read-only".into()), Down::Notice("read-only".into()), false),
            (HolderMessage::Exited(Exited { code: 130, signal: Some(2) }), Down::Exited(130), true),
            (ended(EndReason::Killed, "killed by bob"), Down::Ended("killed by bob".into()), true),
            (
                ended(EndReason::IdleTtl, ""),
                Down::Ended("nobody was attached to it for its detached timeout".into()),
                true,
            ),
            (ended(EndReason::PodStopping, ""), Down::Ended("the shell's pod is stopping".into()), true),
            (ended(EndReason::Other, ""), Down::Ended("the holder ended it".into()), true),
            (HolderMessage::Refused("no session x".into()), Down::Refused("no session x".into()), true),
            (HolderMessage::Sessions(vec![SessionInfo::default()]), Down::Nothing, false),
        ];
        for (message, expected, last) in cases {
            let what = format!("{message:?}");
            let down = to_down(message);
            assert_eq!(down, expected, "{what}");
            assert_eq!(is_last(&down), last, "{what}");
        }
    }

    #[test]
    fn what_the_client_sends_as_frames() {
        let size = Size { cols: 80, rows: 24 };
        let cases = [
            (Up::Input(b"ls\r".to_vec()), ClientMessage::Input(b"ls\r".to_vec())),
            (Up::Resize(size), ClientMessage::Resize(size)),
            (Up::Eof, ClientMessage::Eof),
            (Up::Detach, ClientMessage::Detach),
        ];
        for (up, expected) in cases {
            assert_eq!(to_client(&up), expected);
        }
    }

    /// Frames split anywhere across reads come out whole; the end is told whether a frame came.
    #[tokio::test]
    async fn frames_across_reads_and_the_end() {
        let mut bytes = HolderMessage::Output(b"one".to_vec()).encode().unwrap();
        bytes.extend(HolderMessage::Notice("two".into()).encode().unwrap());
        let (mut feed, read) = tokio::io::duplex(4);
        let (write, _) = tokio::io::duplex(64);
        let mut link = spawn(read, write, |seen, error| async move { Down::Dropped(format!("{seen} {error:?}")) });
        let writer = tokio::spawn(async move {
            for chunk in bytes.chunks(3) {
                feed.write_all(chunk).await.unwrap();
            }
        });
        assert_eq!(link.recv().await, Down::Output(b"one".to_vec()));
        assert_eq!(link.recv().await, Down::Notice("two".into()));
        writer.await.unwrap();
        assert_eq!(link.recv().await, Down::Dropped("true None".into()));
    }
}
