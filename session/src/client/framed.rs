//! `attach --framed`: for the gateway and the plugin, through an exec without a TTY. It sends
//! its own hello (built from its flags), then relays bytes as they are: stdin to the holder
//! (the client's frames; the holder checks each), the holder's frames to stdout. Through pipes,
//! output travels in the holder's frames of up to 32 KiB rather than a TTY's line-sized reads.
//!
//! When stdin ends, the client has gone: the holder is told by the socket's end and detaches it.
//! The relay ends when the holder closes (after `Exited`, `Ended`, `Refused` or a detach), with
//! 0; the frames say why.

use tokio::io::{AsyncWriteExt, BufReader};

use super::{connect, pipes, stdin};
use crate::args::AttachArgs;
use myownshell_session::protocol::ClientMessage;

/// What the client reads of the holder's frames at once: two of its largest frames, so that a
/// frame is one read and one write to stdout.
const READ_BUFFER: usize = 64 * 1024;

/// Relay until the holder closes.
pub async fn run(args: &AttachArgs) -> Result<i32, String> {
    let (read, mut write) = connect::open(&args.socket_dir).await?.into_split();
    connect::send(&mut write, &ClientMessage::Hello(args.hello(args.size()))).await?;
    let up = async move {
        match pipes::stdin() {
            Some(mut pipe) => {
                tokio::io::copy(&mut pipe, &mut write).await?;
            }
            None => {
                let mut input = stdin::chunks();
                while let Some(chunk) = input.recv().await {
                    write.write_all(&chunk).await?;
                }
            }
        }
        write.shutdown().await
    };
    let down = async {
        let mut read = BufReader::with_capacity(READ_BUFFER, read);
        match pipes::stdout() {
            Some(mut pipe) => tokio::io::copy_buf(&mut read, &mut pipe).await.map(drop),
            None => {
                let mut stdout = tokio::io::stdout();
                tokio::io::copy_buf(&mut read, &mut stdout).await?;
                stdout.flush().await
            }
        }
    };
    tokio::pin!(up, down);
    let mut up_done = false;
    let mut up_failed = None;
    loop {
        tokio::select! {
            sent = &mut up, if !up_done => {
                up_done = true;
                // The holder stopped reading: it is closing (the session exited or ended, and
                // input typed meanwhile has nowhere to go). What it sent before it closed, the
                // `Exited` frame above all, is still to be relayed: the relay goes on to its end.
                up_failed = sent.err();
            }
            received = &mut down => {
                return match (received, up_failed) {
                    (Ok(()), _) => Ok(0),
                    // The holder closed with our input unread (input typed after the session
                    // exited): the kernel resets the connection after the frames it sent, which
                    // were all relayed. A holder that died mid-stream ends the same way, and the
                    // missing `Exited` or `Ended` frame tells the reader so.
                    (Err(e), _) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(0),
                    (Err(e), None) => Err(format!("relaying the holder's frames to stdout: {e}")),
                    (Err(e), Some(up)) => Err(format!("relaying stdin to the holder: {up}; and its frames to stdout: {e}")),
                };
            }
        }
    }
}
