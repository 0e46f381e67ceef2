//! `attach --framed`: for the gateway and the plugin, through an exec without a TTY. It sends
//! its own hello (built from its flags), then relays bytes as they are: stdin to the holder
//! (the client's frames; the holder checks each), the holder's frames to stdout. Through pipes,
//! output travels in the holder's frames of up to 32 KiB rather than a TTY's line-sized reads.
//!
//! When stdin ends, the client has gone: the holder is told by the socket's end and detaches it.
//! The relay ends when the holder closes (after `Exited`, `Ended`, `Refused` or a detach), with
//! 0; the frames say why.

use tokio::io::AsyncWriteExt;

use super::{connect, stdin};
use crate::args::AttachArgs;
use myownshell_session::protocol::ClientMessage;

/// Relay until the holder closes.
pub async fn run(args: &AttachArgs) -> Result<i32, String> {
    let (mut read, mut write) = connect::open(&args.socket_dir).await?.into_split();
    connect::send(&mut write, &ClientMessage::Hello(args.hello(args.size()))).await?;
    let mut input = stdin::chunks();
    let up = async move {
        while let Some(chunk) = input.recv().await {
            write.write_all(&chunk).await?;
        }
        write.shutdown().await
    };
    let down = async {
        let mut stdout = tokio::io::stdout();
        tokio::io::copy(&mut read, &mut stdout).await?;
        stdout.flush().await
    };
    tokio::pin!(up, down);
    let mut up_done = false;
    loop {
        tokio::select! {
            sent = &mut up, if !up_done => {
                up_done = true;
                sent.map_err(|e| format!("relaying stdin to the holder: {e}"))?;
            }
            received = &mut down => {
                received.map_err(|e| format!("relaying the holder's frames to stdout: {e}"))?;
                return Ok(0);
            }
        }
    }
}
