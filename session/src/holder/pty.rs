//! A session's terminal: the PTY pair opened and the command spawned on it by `pty-process`
//! (a new session with the PTY as its controlling terminal, `TERM=xterm-256color`, the holder's
//! environment, `$HOME` as working directory), its exit registered with the reaper; then the
//! master side, non-blocking, read and written through tokio.
//!
//! `pty-process`'s blocking API, not its `async` one: the latter spawns through tokio::process,
//! whose waiting for its children fights the holder's `waitpid(-1)` (`crate::procs::reaper`).
//! Without it, and with `unsafe` forbidden, tokio's `AsyncFd` cannot be had for the master (its
//! safe constructors are deprecated as unsound); tokio's pipe ends can, from an `OwnedFd`, and a
//! PTY master is driven exactly as a pipe is: non-blocking read(2) and write(2) woken by epoll.
//! The master is duplicated so that one end reads and the other writes.

use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use rustix::process::{Signal, kill_process_group};
use rustix::termios::{SpecialCodeIndex, Winsize, tcgetattr, tcgetpgrp, tcsetwinsize};
use tokio::net::unix::pipe;
use tokio::sync::oneshot;

use crate::procs::reaper::{Reaper, Status};
use myownshell_session::protocol::Size;

/// The master side of a session's PTY.
#[derive(Debug)]
pub struct Pty {
    reader: pipe::Receiver,
    writer: pipe::Sender,
}

/// A command started on a new PTY.
#[derive(Debug)]
pub struct Spawned {
    pub pty: Pty,
    /// The command's pid, which is also its session id.
    pub pid: i32,
    pub exit: oneshot::Receiver<Status>,
}

/// What a read of the PTY found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    Bytes(usize),
    /// Nothing more for now (readiness cleared).
    WouldBlock,
    /// Every process closed the terminal: there will be no more output.
    Closed,
}

/// Start `command` on a new PTY of `size`.
pub fn spawn(command: &[String], size: Size, reaper: &Reaper) -> Result<Spawned, String> {
    let (program, args) = command.split_first().ok_or("an empty command")?;
    let (pty, pts) = pty_process::blocking::open().map_err(|e| format!("opening a PTY: {e}"))?;
    pty.resize(pty_process::Size::new(size.rows, size.cols)).map_err(|e| format!("sizing the PTY: {e}"))?;
    let command =
        pty_process::blocking::Command::new(program).args(args).env("TERM", "xterm-256color").current_dir(home());
    let (pid, exit) = reaper
        .spawn(|| command.spawn(pts).map_err(io::Error::other))
        .map_err(|e| format!("starting {program:?}: {e}"))?;
    let fd = OwnedFd::from(pty);
    rustix::io::ioctl_fionbio(&fd, true).map_err(|e| format!("making the PTY non-blocking: {e}"))?;
    let dup = fd.try_clone().map_err(|e| format!("duplicating the PTY: {e}"))?;
    let reader = pipe::Receiver::from_owned_fd_unchecked(fd).map_err(|e| format!("registering the PTY: {e}"))?;
    let writer = pipe::Sender::from_owned_fd_unchecked(dup).map_err(|e| format!("registering the PTY: {e}"))?;
    Ok(Spawned { pty: Pty { reader, writer }, pid, exit })
}

/// `$HOME` if it is a directory, else `/`.
fn home() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_dir()).unwrap_or_else(|| PathBuf::from("/"))
}

impl Pty {
    /// Wait until output may be read.
    pub async fn readable(&self) -> io::Result<()> {
        self.reader.readable().await
    }

    /// Wait until input may be written.
    pub async fn writable(&self) -> io::Result<()> {
        self.writer.writable().await
    }

    /// Read into `buf` what is there now.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<Read> {
        match self.reader.try_read(buf) {
            Ok(0) => Ok(Read::Closed),
            Ok(n) => Ok(Read::Bytes(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Read::WouldBlock),
            // Linux answers EIO once no process holds the terminal open.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => Ok(Read::Closed),
            Err(e) => Err(e),
        }
    }

    /// Write from `bytes` what the terminal takes now: `None` if it takes nothing yet.
    pub fn write(&self, bytes: &[u8]) -> io::Result<Option<usize>> {
        match self.writer.try_write(bytes) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Give the terminal a new size (the kernel signals SIGWINCH to its foreground if it changed).
    pub fn resize(&self, size: Size) -> io::Result<()> {
        let winsize = Winsize { ws_row: size.rows, ws_col: size.cols, ws_xpixel: 0, ws_ypixel: 0 };
        Ok(tcsetwinsize(&self.reader, winsize)?)
    }

    /// Its size now.
    pub fn size(&self) -> io::Result<Size> {
        let winsize = rustix::termios::tcgetwinsize(&self.reader)?;
        Ok(Size { cols: winsize.ws_col, rows: winsize.ws_row })
    }

    /// The end-of-file character its line discipline has now (Ctrl-D unless changed).
    pub fn eof_char(&self) -> u8 {
        tcgetattr(&self.reader).map_or(0x04, |t| t.special_codes[SpecialCodeIndex::VEOF])
    }

    /// Ask the foreground program to redraw: SIGWINCH to the terminal's foreground process group,
    /// as a resize would. A full-screen program paints its whole screen again; a shell ignores it.
    pub fn redraw(&self) {
        if let Ok(group) = tcgetpgrp(&self.reader) {
            let _ = kill_process_group(group, Signal::WINCH);
        }
    }
}
