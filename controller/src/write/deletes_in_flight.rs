//! Deletes first: while a Deployment delete is on its way to the apiserver, a stop's record (the
//! status that says the shell stopped) waits, at most [`RECORD_WAIT_AT_MOST`], so a burst of stops
//! (a class's shells all due at the same second) has every Deployment deleted before its statuses
//! are written.
//!
//! Why: the delete is what the deadline promises (the pods go, the session ends, the node's
//! room is freed); the record is read later, by `kubectl describe`. A stop's record is already
//! written by the reconcile after the delete's (`stop_deployment::Removal::Deleted`), but in a
//! burst the first stops' records reach the apiserver beside the last stops' deletes and slow
//! them: `cargo xtask bench controller --objects 1000 --churn-seconds 0 --stops 500 --stop-rate
//! 100` saw the apiserver's deletes at p99 289 ms beside 500 status writes, against p99 96 ms for
//! the same deletes alone (the bench's delete-only floor).
//!
//! A count of deletes in flight in a `tokio::sync::watch` (the waiters see it reach 0 without a
//! poll), not a lock: deletes never wait for one another, only records wait for deletes.

use std::time::Duration;

use tokio::sync::watch;

/// The longest a stop's record waits for deletes in flight: a burst of stops at 100 a second
/// on a 2-core cluster deletes within a few hundred milliseconds; a status a second late still
/// says why the shell stopped, and a delete that hangs does not hold the records for longer.
pub const RECORD_WAIT_AT_MOST: Duration = Duration::from_secs(1);

/// How many Deployment deletes this controller has in flight.
#[derive(Debug)]
pub struct DeletesInFlight(watch::Sender<usize>);

impl Default for DeletesInFlight {
    fn default() -> Self {
        Self(watch::Sender::new(0))
    }
}

/// One delete in flight, counted until dropped (a reconcile cancelled mid-delete included).
#[derive(Debug)]
pub struct InFlight<'a>(&'a watch::Sender<usize>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl DeletesInFlight {
    /// Count a delete about to be sent, until the returned guard drops.
    pub fn begin(&self) -> InFlight<'_> {
        self.0.send_modify(|n| *n += 1);
        InFlight(&self.0)
    }

    /// Wait until no delete is in flight, at most `at_most`: whether none was at the end.
    pub async fn settled(&self, at_most: Duration) -> bool {
        let mut deletes = self.0.subscribe();
        matches!(tokio::time::timeout(at_most, deletes.wait_for(|n| *n == 0)).await, Ok(Ok(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_record_waits_while_a_delete_is_in_flight_and_not_after() {
        let deletes = DeletesInFlight::default();
        assert!(deletes.settled(Duration::ZERO).await, "none in flight: no wait");
        let first = deletes.begin();
        let second = deletes.begin();
        assert!(!deletes.settled(Duration::from_millis(20)).await, "two in flight: waits out its bound");
        drop(first);
        assert!(!deletes.settled(Duration::from_millis(20)).await, "one still in flight");
        let waiter = deletes.settled(Duration::from_secs(30));
        let (settled, ()) = tokio::join!(waiter, async { drop(second) });
        assert!(settled, "the last delete done: the waiter goes on at once");
    }
}
