//! `attach` for a person: with a TTY (`kubectl exec -it`), the terminal goes raw, its window
//! size follows SIGWINCH, and the detach keys leave the session running; through a pipe, stdin
//! is sent as input and its end as the terminal's end-of-file.

use std::io::Write;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::signal::unix::{SignalKind, signal};

use super::connect::{self, Incoming};
use super::{stdin, terminal};
use crate::args::AttachArgs;
use myownshell_session::keys::{self, Detector};
use myownshell_session::protocol::{Attached, ClientMessage, HolderMessage};

/// How the attachment ended, for the exit code.
enum Outcome {
    Exited(i32),
    Detached,
}

/// Attach until the session exits or ends, or the person detaches; the exit code.
pub async fn run(args: &AttachArgs) -> Result<i32, String> {
    let tty = terminal::is_tty();
    let detector = Detector::new(if tty { keys::parse(&args.detach_keys)? } else { Vec::new() });
    let size = if tty { terminal::window() } else { args.size() };
    let (read, mut write) = connect::open(&args.socket_dir).await?.into_split();
    connect::send(&mut write, &ClientMessage::Hello(args.hello(size))).await?;
    let mut incoming = Incoming::new(read);
    let attached = match incoming.next().await? {
        Some(HolderMessage::Attached(attached)) => attached,
        Some(HolderMessage::Refused(why)) => return Err(format!("the holder refused: {why}")),
        other => return Err(format!("the holder answered the hello with {other:?}")),
    };
    let raw = tty.then(terminal::Raw::enter);
    let outcome = relay(tty, detector, &mut incoming, &mut write).await;
    drop(raw);
    match outcome? {
        Outcome::Exited(code) => Ok(code),
        Outcome::Detached => {
            say(&detached(&attached));
            Ok(0)
        }
    }
}

fn detached(attached: &Attached) -> String {
    format!(
        "detached from session {id}, which goes on; back to it with `{binary} attach --id {id}`",
        id = attached.id,
        binary = myownshell_session::BINARY
    )
}

/// A line for the person, on stderr (in raw mode a line needs its carriage return).
fn say(line: &str) {
    let _ = write!(std::io::stderr(), "\r\n[myownshell-session] {line}\r\n");
}

async fn relay(
    tty: bool,
    mut detector: Detector,
    incoming: &mut Incoming,
    write: &mut OwnedWriteHalf,
) -> Result<Outcome, String> {
    let mut input = stdin::chunks();
    // Stops at stdin's end, or when the holder stops taking frames (its last word is still to
    // be read: the session may have just exited).
    let mut sending = true;
    let mut resized = signal(SignalKind::window_change()).map_err(|e| format!("listening for SIGWINCH: {e}"))?;
    let mut stdout = tokio::io::stdout();
    loop {
        tokio::select! {
            chunk = input.recv(), if sending => {
                let (passed, detach) = match &chunk {
                    Some(chunk) => detector.feed(chunk),
                    None => (Vec::new(), false),
                };
                let mut sent = passed.is_empty() || connect::send(write, &ClientMessage::Input(passed)).await.is_ok();
                if detach {
                    connect::send(write, &ClientMessage::Detach).await?;
                    return Ok(Outcome::Detached);
                }
                if chunk.is_none() {
                    sent = tty || connect::send(write, &ClientMessage::Eof).await.is_ok();
                    sending = false;
                }
                sending &= sent;
            }
            _ = resized.recv(), if tty && sending => {
                if let Some(size) = terminal::window() {
                    sending = connect::send(write, &ClientMessage::Resize(size)).await.is_ok();
                }
            }
            message = incoming.next() => {
                if let Some(outcome) = show(message?, &mut stdout).await? {
                    return Ok(outcome);
                }
            }
        }
    }
}

/// Show one message from the holder; the outcome once there is one.
async fn show(message: Option<HolderMessage>, stdout: &mut tokio::io::Stdout) -> Result<Option<Outcome>, String> {
    match message {
        Some(HolderMessage::Output(bytes)) => {
            stdout.write_all(&bytes).await.map_err(|e| format!("writing to stdout: {e}"))?;
            stdout.flush().await.map_err(|e| format!("writing to stdout: {e}"))?;
            Ok(None)
        }
        Some(HolderMessage::Notice(text)) => {
            say(&text);
            Ok(None)
        }
        Some(HolderMessage::Exited(exited)) => Ok(Some(Outcome::Exited(exited.code))),
        Some(HolderMessage::Ended(ended)) => Err(format!("the session ended: {}", ended.message)),
        Some(HolderMessage::Refused(why)) => Err(format!("the holder refused: {why}")),
        Some(HolderMessage::Presence(_) | HolderMessage::Attached(_) | HolderMessage::Sessions(_)) => Ok(None),
        None => Err("the holder closed the connection".into()),
    }
}
