//! Standard input, read on a thread of its own: a blocking read cannot be cancelled, and the
//! process must be able to exit while one is pending (tokio's own stdin would hold the runtime's
//! shutdown until the next keystroke).

use std::io::Read;

use tokio::sync::mpsc;

/// Chunks of stdin as they come; the channel closes at its end (or an error).
pub fn chunks() -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    });
    rx
}
