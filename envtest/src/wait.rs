//! Polling with a deadline: the only way tests wait for state. On timeout the error says what
//! was awaited and what was seen last.

use std::future::Future;
use std::time::{Duration, Instant};

/// The least time between two checks: what a cheap check (a request through the kube client,
/// a few milliseconds) waits before it asks again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The most time between two checks, whatever a check costs: a state reached is seen within
/// this.
pub const POLL_INTERVAL_MAX: Duration = Duration::from_secs(1);

/// How long to wait after a check that took `check_took`, `waited` into the wait: twice as long
/// as the check took, or a tenth of the wait so far if that is longer, within [`POLL_INTERVAL`]
/// and [`POLL_INTERVAL_MAX`]. So polling spends at most a third of a wait checking, and a state
/// is seen at most a tenth of the wait (or [`POLL_INTERVAL_MAX`]) after it was reached.
///
/// Why the check's own time: most checks run `kubectl`, a process of about 110 to 140 ms of a
/// core; polled every 100 ms they kept a core busy for as long as a test waited. Over a whole
/// `cargo xtask test` (process accounting, `accton`/`sa`, 2026-11-30) kubectl's 3,397 runs took
/// 7.9 of the 27.7 CPU-minutes the tests' processes used, second only to the kube-apiservers
/// (8.8) that answered them.
///
/// Why the wait so far: with the e2e's two clusters beside the workspace's tests (2026-12-02),
/// the machine's 2 cores were busy (1.8 of 2) and kubectl was still the first process by CPU.
/// Most of its runs were polls of waits of many seconds (a pod started, a node lost, a renewal),
/// which a third of a core each polled at twice kubectl's time; a wait of a minute now asks about
/// 60 times, not 130, and still sees its state within a second.
pub fn next_poll(check_took: Duration, waited: Duration) -> Duration {
    check_took.saturating_mul(2).max(waited / 10).clamp(POLL_INTERVAL, POLL_INTERVAL_MAX)
}

/// Call `check` until it returns `Ok`, or fail after `timeout` with the last `Err` it gave.
/// Between checks it waits [`next_poll`] of the check's own time and the wait so far.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        let checked = Instant::now();
        let last = match check().await {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if start.elapsed() >= timeout {
            return Err(format!("timed out after {:.1?} waiting for {what}; last seen: {last}", start.elapsed()));
        }
        tokio::time::sleep(next_poll(checked.elapsed(), start.elapsed())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_waits_twice_its_own_time_or_a_tenth_of_the_wait_within_the_bounds() {
        let ms = Duration::from_millis;
        for (took, waited, waits) in [
            (ms(0), ms(0), ms(100)),
            (ms(3), ms(3), ms(100)),
            (ms(50), ms(50), ms(100)),
            (ms(51), ms(51), ms(102)),
            (ms(150), ms(150), ms(300)),
            (ms(499), ms(499), ms(998)),
            (ms(500), ms(500), ms(1000)),
            (Duration::from_secs(30), Duration::from_secs(30), ms(1000)),
            (Duration::MAX, Duration::MAX, ms(1000)),
            // A cheap check, a second into its wait: still every 100 ms.
            (ms(3), ms(1000), ms(100)),
            // kubectl, 5 s into a wait: half a second, not 300 ms.
            (ms(150), ms(5000), ms(500)),
            (ms(150), ms(3000), ms(300)),
            // A long wait: once a second, whatever the check costs.
            (ms(3), Duration::from_secs(60), ms(1000)),
        ] {
            assert_eq!(next_poll(took, waited), waits, "a check that took {took:?}, {waited:?} into the wait");
        }
    }

    #[tokio::test]
    async fn the_timeout_says_what_was_awaited_and_seen_last() {
        let mut calls = 0;
        let err = eventually("the answer", Duration::ZERO, || {
            calls += 1;
            let seen = format!("call {calls}");
            async move { Err::<(), _>(seen) }
        })
        .await
        .unwrap_err();
        assert!(err.contains("waiting for the answer; last seen: call 1"), "{err}");
    }

    #[tokio::test]
    async fn the_first_ok_is_returned() {
        let mut calls = 0;
        let got = eventually("the third call", Duration::from_secs(10), || {
            calls += 1;
            let n = calls;
            async move { if n == 3 { Ok(n) } else { Err(format!("call {n}")) } }
        })
        .await;
        assert_eq!(got, Ok(3));
    }
}
