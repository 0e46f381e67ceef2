//! One connection to the holder's socket: its first frame (a hello within [`HELLO_DEADLINE`], or
//! `List` or `Kill`), then, for a hello, the client's frames turned into the session's requests
//! and input, while a writer task sends what the session queued for it.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use super::hello;
use super::members::{self, Shared};
use super::registry::{Handle, Registry};
use super::session::{Control, Join, Typed};
use myownshell_session::protocol::{ClientMessage, Decoder, EndReason, Ended, Hello, HolderMessage};

/// How long a connection may take to say what it wants.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);

/// How long the last frames to a closing client may take (it may not be reading at all).
const LAST_WORD_DEADLINE: Duration = Duration::from_secs(2);

/// A connection's incoming frames.
struct Incoming {
    read: OwnedReadHalf,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl Incoming {
    /// The next message; `None` when the client closed its side.
    async fn next(&mut self) -> Result<Option<ClientMessage>, String> {
        loop {
            if let Some(frame) = self.decoder.next_frame().map_err(|e| e.to_string())? {
                return ClientMessage::decode(frame).map(Some).map_err(|e| e.to_string());
            }
            let n = self.read.read(&mut self.buf).await.map_err(|e| format!("reading from the client: {e}"))?;
            if n == 0 {
                return Ok(None);
            }
            self.decoder.feed(&self.buf[..n]);
        }
    }
}

/// Serve one connection to its end.
pub async fn handle(stream: UnixStream, registry: Arc<Registry>) {
    let (read, mut write) = stream.into_split();
    let mut incoming = Incoming { read, decoder: Decoder::new(), buf: vec![0; 16 * 1024] };
    let answer = match tokio::time::timeout(HELLO_DEADLINE, incoming.next()).await {
        Ok(Ok(Some(ClientMessage::Hello(hello)))) => return attach(hello, incoming, write, &registry).await,
        Ok(Ok(Some(ClientMessage::List))) => HolderMessage::Sessions(registry.list()),
        Ok(Ok(Some(ClientMessage::Kill(kill)))) => kill_session(&registry, &kill.id).await,
        Ok(Ok(Some(other))) => {
            HolderMessage::Refused(format!("the first frame must be a Hello, List or Kill, not {other:?}"))
        }
        Ok(Ok(None)) => return,
        Ok(Err(error)) => HolderMessage::Refused(error),
        Err(_) => HolderMessage::Refused(format!("nothing was asked within {}s", HELLO_DEADLINE.as_secs())),
    };
    say_last(&mut write, &answer).await;
}

/// Write one message and close, within the deadline.
async fn say_last(write: &mut OwnedWriteHalf, message: &HolderMessage) {
    if let Ok(bytes) = message.encode() {
        let _ = tokio::time::timeout(LAST_WORD_DEADLINE, write.write_all(&bytes)).await;
    }
    let _ = write.shutdown().await;
}

async fn kill_session(registry: &Registry, id: &str) -> HolderMessage {
    let Some(handle) = registry.get(id) else {
        return HolderMessage::Refused(format!("there is no session {id:?}; `myownshell-session list` shows them"));
    };
    let ended = Ended { reason: EndReason::Killed, message: "ended by `myownshell-session kill`".into() };
    let _ = handle.control.send(Control::Finish(ended)).await;
    // The answer comes once its processes are gone, so that `kill` returning means they are.
    handle.control.closed().await;
    HolderMessage::Notice(format!("session {id} ended"))
}

/// Join the session `hello` asks for, then relay the client's frames to it.
async fn attach(hello: Hello, mut incoming: Incoming, mut write: OwnedWriteHalf, registry: &Arc<Registry>) {
    let opened = hello::check(&hello).and_then(|()| registry.open(&hello));
    let (handle, resumed) = match opened {
        Ok(opened) => opened,
        Err(refusal) => return say_last(&mut write, &HolderMessage::Refused(refusal)).await,
    };
    let (outlet, frames, last_word) = members::outlet();
    tokio::spawn(writer(write, frames, last_word));
    let (reply, joined) = oneshot::channel();
    let join = Join { user: hello.user, read_only: hello.read_only, size: hello.size, resumed, outlet, reply };
    if let Err(mpsc::error::SendError(Control::Join(join))) = handle.control.send(Control::Join(join)).await {
        let refusal = HolderMessage::Refused("the session ended before it could be joined".into());
        if let Some(word) = members::frame(&refusal) {
            let _ = join.outlet.last_word.send(word);
        }
        return;
    }
    if let Ok(Ok(member)) = joined.await {
        relay(member, &mut incoming, &handle).await;
    }
}

/// The client's frames, as the session's requests, until it goes or the session ends.
async fn relay(member: u64, incoming: &mut Incoming, handle: &Handle) {
    loop {
        let message = tokio::select! {
            message = incoming.next() => message,
            () = handle.control.closed() => return,
        };
        let sent = match message {
            Ok(Some(ClientMessage::Input(bytes))) => handle.typed.send(Typed::Input { member, bytes }).await.is_ok(),
            Ok(Some(ClientMessage::Eof)) => handle.typed.send(Typed::Eof { member }).await.is_ok(),
            Ok(Some(ClientMessage::Resize(size))) if size.is_valid() => {
                handle.control.send(Control::Resize { member, size }).await.is_ok()
            }
            Ok(Some(ClientMessage::AllowDrive(allow))) => {
                handle.control.send(Control::AllowDrive { member, allow: allow.allow }).await.is_ok()
            }
            Ok(Some(ClientMessage::End)) => handle.control.send(Control::End { member }).await.is_ok(),
            Ok(Some(ClientMessage::Detach) | None) => return leave(handle, member, None).await,
            Ok(Some(ClientMessage::Resize(size))) => {
                let refusal = format!("a resize to {}x{} is outside 1..=1000 columns and rows", size.cols, size.rows);
                return leave(handle, member, Some(refusal)).await;
            }
            Ok(Some(other)) => return leave(handle, member, Some(format!("{other:?} after the hello"))).await,
            Err(error) => return leave(handle, member, Some(error)).await,
        };
        if !sent {
            return;
        }
    }
}

async fn leave(handle: &Handle, member: u64, refusal: Option<String>) {
    let word = refusal.map(HolderMessage::Refused);
    let _ = handle.control.send(Control::Leave { member, word }).await;
}

/// Write what the session queues for the client; at the last word (or when the session lets
/// go of the queue), finish the frame in flight and what is queued, write the word, and close,
/// all within [`LAST_WORD_DEADLINE`].
async fn writer(mut write: OwnedWriteHalf, mut frames: mpsc::Receiver<Shared>, mut last: oneshot::Receiver<Shared>) {
    let mut current: Option<(Shared, usize)> = None;
    let word = loop {
        let Some((frame, offset)) = current.as_mut() else {
            tokio::select! {
                biased;
                word = &mut last => break word.ok(),
                frame = frames.recv() => match frame {
                    Some(frame) => current = Some((frame, 0)),
                    None => break (&mut last).await.ok(),
                },
            }
            continue;
        };
        tokio::select! {
            biased;
            word = &mut last => break word.ok(),
            written = write.write(&frame[*offset..]) => match written {
                Ok(0) | Err(_) => return,
                Ok(n) if *offset + n == frame.len() => current = None,
                Ok(n) => *offset += n,
            },
        }
    };
    let finish = async {
        if let Some((frame, offset)) = current {
            write.write_all(&frame[offset..]).await?;
        }
        while let Ok(frame) = frames.try_recv() {
            write.write_all(&frame).await?;
        }
        if let Some(word) = word {
            write.write_all(&word).await?;
        }
        std::io::Result::Ok(())
    };
    let _ = tokio::time::timeout(LAST_WORD_DEADLINE, finish).await;
    let _ = write.shutdown().await;
}
