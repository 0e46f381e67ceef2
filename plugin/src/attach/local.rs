//! The real terminal: raw mode while attached (restored on every way out, by drop), the window's
//! size and its changes (SIGWINCH), stdin on a thread of its own (a blocking read cannot be
//! cancelled, and the process must be able to exit while one is pending), the signals that stop
//! the client, and lines on stderr that read right in raw mode.

use std::io::{IsTerminal, Read, Write};

use myownshell_session::protocol::Size;
use rustix::termios::{OptionalActions, Termios, tcgetattr, tcgetwinsize, tcsetattr};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::terminal::Terminal;

/// Whether a person is at a terminal: stdin and stdout both are one.
pub fn is_screen() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// The window's size, if stdout or stdin is a terminal that knows it.
pub fn window() -> Option<Size> {
    let size = tcgetwinsize(std::io::stdout()).or_else(|_| tcgetwinsize(std::io::stdin())).ok()?;
    let size = Size { cols: size.ws_col, rows: size.ws_row };
    size.is_valid().then_some(size)
}

/// The terminal on stdin in raw mode until dropped.
pub struct Raw(Option<Termios>);

impl Raw {
    pub fn enter() -> Self {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Self(None);
        }
        let Ok(saved) = tcgetattr(&stdin) else { return Self(None) };
        let mut raw = saved.clone();
        raw.make_raw();
        match tcsetattr(&stdin, OptionalActions::Now, &raw) {
            Ok(()) => Self(Some(saved)),
            Err(_) => Self(None),
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
        }
    }
}

/// The real terminal: stdin, window changes when `screen`, stop signals, stdout and stderr.
/// Started only once a session is joined: from then on this process reads stdin.
pub fn terminal(screen: bool) -> std::io::Result<Terminal<tokio::io::Stdout>> {
    let (resize_tx, resized) = mpsc::channel(4);
    if screen {
        let mut changes = signal(SignalKind::window_change())?;
        tokio::spawn(async move {
            while changes.recv().await.is_some() {
                if let Some(size) = window()
                    && resize_tx.send(size).await.is_err()
                {
                    return;
                }
            }
        });
    }
    let (stop_tx, stop) = mpsc::channel(4);
    for (kind, number) in [(SignalKind::terminate(), 15), (SignalKind::hangup(), 1), (SignalKind::interrupt(), 2)] {
        let mut stops = signal(kind)?;
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            while stops.recv().await.is_some() {
                let _ = stop_tx.send(number).await;
            }
        });
    }
    let lines: Box<dyn FnMut(&str) + Send> = match screen {
        // In raw mode a line needs its carriage return, and may start after output on the line.
        true => Box::new(|line: &str| {
            let _ = write!(std::io::stderr(), "\r\n{line}\r\n");
        }),
        false => Box::new(|line: &str| eprintln!("{line}")),
    };
    Ok(Terminal { input: stdin(), resized, stop, output: tokio::io::stdout(), lines })
}

/// Chunks of stdin as they come; the channel closes at its end (or an error).
fn stdin() -> mpsc::Receiver<Vec<u8>> {
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
