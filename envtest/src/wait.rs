//! Polling with a deadline: the only way tests wait for state. On timeout the error says what
//! was awaited and what was seen last.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] asks again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Call `check` until it returns `Ok`, or fail after `timeout` with the last `Err` it gave.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        let last = match check().await {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if start.elapsed() >= timeout {
            return Err(format!("timed out after {:.1?} waiting for {what}; last seen: {last}", start.elapsed()));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
