//! The local terminal: raw mode while attached (restored on every way out, by drop), and its
//! window size.

use std::io::IsTerminal;

use rustix::termios::{OptionalActions, Termios, tcgetattr, tcgetwinsize, tcsetattr};

use myownshell_session::protocol::Size;

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

/// The window's size, if stdin or stdout is a terminal that knows it.
pub fn window() -> Option<Size> {
    let size = tcgetwinsize(std::io::stdin()).or_else(|_| tcgetwinsize(std::io::stdout())).ok()?;
    let size = Size { cols: size.ws_col, rows: size.ws_row };
    size.is_valid().then_some(size)
}

/// Whether a person is at a terminal.
pub fn is_tty() -> bool {
    std::io::stdin().is_terminal()
}
