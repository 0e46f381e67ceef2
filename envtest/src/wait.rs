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

/// How long to wait after a check that took `check_took` before asking again: twice as long as
/// it took, within [`POLL_INTERVAL`] and [`POLL_INTERVAL_MAX`], so that polling spends at most a
/// third of a wait checking. Why: most checks run `kubectl`, a process of about 140 ms of a core;
/// polled every 100 ms they kept a core busy for as long as a test waited. Over a whole
/// `cargo xtask test` (process accounting, `accton`/`sa`, 2026-11-30) kubectl's 3,397 runs took
/// 7.9 of the 27.7 CPU-minutes the tests' processes used, second only to the kube-apiservers
/// (8.8) that answered them.
pub fn next_poll(check_took: Duration) -> Duration {
    check_took.saturating_mul(2).clamp(POLL_INTERVAL, POLL_INTERVAL_MAX)
}

/// Call `check` until it returns `Ok`, or fail after `timeout` with the last `Err` it gave.
/// Between checks it waits [`next_poll`] of the check's own time.
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
        tokio::time::sleep(next_poll(checked.elapsed())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_waits_twice_its_own_time_within_the_bounds() {
        let ms = Duration::from_millis;
        for (took, waits) in [
            (ms(0), ms(100)),
            (ms(3), ms(100)),
            (ms(50), ms(100)),
            (ms(51), ms(102)),
            (ms(150), ms(300)),
            (ms(499), ms(998)),
            (ms(500), ms(1000)),
            (Duration::from_secs(30), ms(1000)),
            (Duration::MAX, ms(1000)),
        ] {
            assert_eq!(next_poll(took), waits, "a check that took {took:?}");
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
