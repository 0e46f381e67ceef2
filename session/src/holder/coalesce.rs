//! When gathered output becomes a frame: a pure decision, taken after every read of the PTY.
//!
//! A PTY hands its reader what the program wrote since the last read: a keystroke's echo alone,
//! or, while a program prints fast, a few lines or a few KiB at a time. Sending each read as a
//! frame would send a million short lines as hundreds of thousands of frames (each a WebSocket
//! message, a syscall and a repaint in the page). So reads are gathered while output keeps
//! coming, up to [`FRAME_MAX`] bytes or [`WINDOW`] after the first byte, whichever comes first;
//! and a lone small read after a quiet moment, which is what typing produces, goes out at once.
//! A program that writes line by line (stdio flushes a terminal at every newline) gives a small
//! read each time, and the one after a frame is no echo: it is gathered like the rest (`cargo
//! xtask bench sessions` saw a million short lines go as 28,677 frames of ~105 bytes before).

use std::time::Duration;

/// The most output in one frame. Half the protocol's data bound; large enough that a fast
/// producer costs one frame per 32 KiB (a million 7-byte lines: some 220 frames), small enough
/// that one frame is a few milliseconds on a slow link and the per-client queues stay small.
pub const FRAME_MAX: usize = 32 * 1024;

/// How long gathered output may wait for more. Invisible to a person (a screen refreshes every
/// 16 ms) and long enough for a fast producer to fill a frame. It is 1 ms, not a fraction of
/// one, because that is the resolution of tokio's timer: a shorter wait would fire at the next
/// millisecond anyway, and waiting finer would mean spinning.
pub const WINDOW: Duration = Duration::from_millis(1);

/// The largest first read that is sent at once without waiting for more: an echo, a prompt, a
/// line or two. Above it, output is arriving in bulk and more is likely within the window.
pub const LONE_READ: usize = 512;

/// What has been gathered since the last frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gathered {
    pub bytes: usize,
    /// Reads that returned output since the last frame.
    pub reads: usize,
    /// Since the first of those reads.
    pub age: Duration,
    /// Whether the PTY has more to read right now.
    pub more_ready: bool,
    /// Whether output was flowing when the first of those reads came: the last frame went out
    /// less than [`WINDOW`] before it.
    pub flowing: bool,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send what was gathered as one frame.
    Flush,
    /// Read again: output is waiting.
    ReadMore,
    /// Wait for more output at most this long, then send.
    Wait(Duration),
    /// Nothing gathered.
    Idle,
}

/// The decision.
pub fn next(g: Gathered) -> Next {
    if g.bytes == 0 {
        return Next::Idle;
    }
    if g.bytes >= FRAME_MAX {
        return Next::Flush;
    }
    if g.more_ready {
        return Next::ReadMore;
    }
    if g.reads == 1 && g.bytes <= LONE_READ && !g.flowing {
        return Next::Flush;
    }
    match WINDOW.checked_sub(g.age) {
        Some(left) if !left.is_zero() => Next::Wait(left),
        _ => Next::Flush,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathering_decisions() {
        let us = Duration::from_micros;
        // (what, bytes, reads, age, more ready, flowing, next)
        let cases: &[(&str, usize, usize, Duration, bool, bool, Next)] = &[
            ("nothing", 0, 0, us(0), false, false, Next::Idle),
            ("a keystroke's echo goes at once", 1, 1, us(0), false, false, Next::Flush),
            ("a prompt goes at once", 120, 1, us(0), false, false, Next::Flush),
            ("the largest lone read goes at once", LONE_READ, 1, us(0), false, false, Next::Flush),
            ("a bulk first read waits for more", LONE_READ + 1, 1, us(0), false, false, Next::Wait(us(1000))),
            ("a line right after a frame waits for more", 105, 1, us(0), false, true, Next::Wait(us(1000))),
            ("small reads that keep coming wait", 300, 3, us(200), false, false, Next::Wait(us(800))),
            ("more ready is read first", 40, 1, us(0), true, false, Next::ReadMore),
            ("more ready, even late", 4000, 5, us(5000), true, false, Next::ReadMore),
            ("the window is over", 4000, 5, us(1000), false, false, Next::Flush),
            ("the window is over, flowing", 105, 1, us(1000), false, true, Next::Flush),
            ("long over", 4000, 5, us(90_000), false, false, Next::Flush),
            ("a full frame goes even with more ready", FRAME_MAX, 9, us(10), true, false, Next::Flush),
            ("past a full frame", FRAME_MAX + 100, 9, us(10), false, true, Next::Flush),
        ];
        for &(what, bytes, reads, age, more_ready, flowing, expected) in cases {
            assert_eq!(next(Gathered { bytes, reads, age, more_ready, flowing }), expected, "{what}");
        }
    }
}
