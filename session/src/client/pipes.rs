//! Standard input and output as epoll-driven pipe ends where they are pipes, as they are in the
//! exec of `attach --framed` (no TTY). A keystroke then goes from stdin to the holder's socket,
//! and its echo from the socket to stdout, on the one thread of the client's runtime: tokio's
//! `Stdout` hands every write to its blocking pool, and the stdin thread ([`super::stdin`]) hands
//! every read to the runtime, one thread wake-up each way per keystroke, which is most of what
//! the client adds to an echo (`cargo xtask bench sessions`, keystroke to echo). Anything else
//! (a terminal, a file) keeps those.

use std::os::fd::AsFd;

use tokio::net::unix::pipe;

/// Standard input as a pipe's reading end, when it is a pipe.
pub fn stdin() -> Option<pipe::Receiver> {
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    pipe::Receiver::from_owned_fd(fd).ok()
}

/// Standard output as a pipe's writing end, when it is a pipe.
pub fn stdout() -> Option<pipe::Sender> {
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    pipe::Sender::from_owned_fd(fd).ok()
}
