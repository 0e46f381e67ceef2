//! Sending requests at a fixed rate, as churn and stops do: the ticks, and the count of failures
//! once every request sent has answered.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::{Interval, MissedTickBehavior};

/// Ticks `rate` times a second; ticks missed while the sender was held up come at once, so the
/// rate is kept on average.
pub(crate) fn ticks(rate: u32) -> Interval {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    ticks
}

/// Wait for every request in `sent`; how many failed (or panicked).
pub(crate) async fn failures(mut sent: JoinSet<Result<(), kube::Error>>) -> usize {
    let mut failed = 0;
    while let Some(result) = sent.join_next().await {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                failed += 1;
                eprintln!("    (a request failed: {e})");
            }
            Err(e) => {
                failed += 1;
                eprintln!("    (a request's task failed: {e})");
            }
        }
    }
    failed
}
