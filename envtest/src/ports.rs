//! Loopback ports for servers the tests start in child processes.
//!
//! A child binds its own port, so the port is picked here, checked free, and released before
//! the child starts. Two things can take it in between, and both are ruled out:
//! - another pick in this process (tests run in parallel threads): each port is handed out
//!   at most once per process;
//! - an outgoing connection of any process on the machine, whose local port the kernel takes
//!   from the ephemeral range (`ip_local_port_range`): ports are picked below that range, so
//!   only an explicit bind can take one, which is what this module avoids handing out twice.
//!
//! CI once saw the old bind-to-0-and-release pick return the same port twice in a row, and a
//! controller failed to start with "Address already in use".

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::net::TcpListener;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The lowest port picked when the ephemeral range leaves room below it.
const LOWEST: u16 = 20_000;
/// Ports needed below the ephemeral range for the range to be used at all.
const ENOUGH: u16 = 1_000;

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A free TCP port on 127.0.0.1 that no other call in this process has returned.
pub fn free_port() -> io::Result<u16> {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    // The kernel's range is read once: it does not change while tests run.
    static RANGE: OnceLock<Option<(u16, u16)>> = OnceLock::new();
    let port = match *RANGE.get_or_init(|| pick_range(ephemeral_low())) {
        Some((low, high)) => pick_below_ephemeral(low, high, &handed_out)?,
        None => pick_from_kernel(&handed_out)?,
    };
    handed_out.insert(port);
    Ok(port)
}

/// The first port of the kernel's ephemeral range (Linux default 32768).
fn ephemeral_low() -> Option<u16> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// `[low, high)` to pick from, if the ephemeral range leaves enough room below it.
fn pick_range(ephemeral_low: Option<u16>) -> Option<(u16, u16)> {
    let high = ephemeral_low?;
    (high >= LOWEST.saturating_add(ENOUGH)).then_some((LOWEST, high))
}

/// Try ports from a random start (so concurrent test processes rarely race for one port).
fn pick_below_ephemeral(low: u16, high: u16, handed_out: &BTreeSet<u16>) -> io::Result<u16> {
    let span = u32::from(high - low);
    let start = (RandomState::new().hash_one(std::process::id()) % u64::from(span)) as u32;
    for offset in 0..span {
        let port = low + ((start + offset) % span) as u16;
        if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::new(io::ErrorKind::AddrInUse, format!("no free port in {low}..{high}")))
}

/// Fallback when the ephemeral range starts too low: let the kernel choose, skipping repeats.
fn pick_from_kernel(handed_out: &BTreeSet<u16>) -> io::Result<u16> {
    for _ in 0..100 {
        let port = TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port();
        if !handed_out.contains(&port) {
            return Ok(port);
        }
    }
    Err(io::Error::new(io::ErrorKind::AddrInUse, "the kernel kept offering ports already handed out"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_sits_below_the_ephemeral_ports_when_there_is_room() {
        let cases = [
            (Some(32768), Some((LOWEST, 32768))),
            (Some(LOWEST + ENOUGH), Some((LOWEST, LOWEST + ENOUGH))),
            (Some(LOWEST + ENOUGH - 1), None),
            (Some(1024), None),
            (None, None),
        ];
        for (ephemeral, expected) in cases {
            assert_eq!(pick_range(ephemeral), expected, "ephemeral range from {ephemeral:?}");
        }
    }

    #[test]
    fn ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "repeats in {ports:?}");
        if let Some((low, high)) = pick_range(ephemeral_low()) {
            assert!(ports.iter().all(|p| (low..high).contains(p)), "outside {low}..{high}: {ports:?}");
        }
    }

    #[test]
    fn a_port_in_use_is_skipped() {
        let (low, high) = (LOWEST, LOWEST + 2);
        let holders: Vec<TcpListener> = (low..high).filter_map(|p| TcpListener::bind(("127.0.0.1", p)).ok()).collect();
        let result = pick_below_ephemeral(low, high, &BTreeSet::new());
        if holders.len() == 2 {
            assert!(result.is_err(), "both ports are held, got {result:?}");
        }
        let result = pick_below_ephemeral(low, high, &(low..high).collect());
        assert!(result.is_err(), "both ports already handed out, got {result:?}");
    }
}
