//! A stopping gateway hands its held terminals over to the next replica a few at a time, each
//! page moving before it lets go (issue 39: a rollout under open terminals).
//!
//! Telling every page at once to reattach made each of them open a new exec at the same moment:
//! `cargo xtask bench sessions` saw 375 pages of one replica do so, the node's runtime start 375
//! `attach` processes in one pod, and reattaching take 29.6 s at p99, past the holder's answer
//! timeout for 208 of them. An exec costs the node the same whenever it is made, so the way out
//! is not a faster burst but none: from the moment the gateway stops serving, at most
//! `--handover-concurrency` pages are told `handover` at once; such a page opens its session
//! through another replica while this one still relays it, and closes this socket once the new
//! one is attached, which frees the turn for the next page. The user sees no gap: output and
//! keys go through the old socket until the new one has the session.
//!
//! A page that does not move within [`MOVE_WITHIN`] of its turn (a page from before
//! `handover`) is told to reattach as before, and so is every page still waiting when
//! `--handover-within` has passed since the gateway stopped serving, so that the pod's
//! termination grace is never the one to end a page. Plain terminals (pods without the holder)
//! cannot move: they are told at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a page told `handover` has to attach elsewhere and close this socket.
pub const MOVE_WITHIN: Duration = Duration::from_secs(5);

/// The turns of a stopping gateway's pages.
#[derive(Clone)]
pub struct Handover {
    turns: Arc<Semaphore>,
    stopping: CancellationToken,
    within: Duration,
    move_within: Duration,
}

/// A page's turn to move.
enum Turn {
    /// Its turn among the paced ones, held until the page's socket ends.
    Paced(OwnedSemaphorePermit),
    /// Go now: a plain terminal, or the pacing's time is up.
    Now,
}

/// What the page's bridge does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Leave {
    /// Tell the page `handover`, and go on relaying.
    Tell,
    /// Tell the page to reattach (or, for a plain terminal, that it ends), and close.
    Go,
}

impl Handover {
    /// Turns for `concurrency` pages at a time once `stopping` is cancelled, for up to `within`;
    /// a page told has `move_within` ([`MOVE_WITHIN`]) to move.
    pub fn new(concurrency: usize, (within, move_within): (Duration, Duration), stopping: CancellationToken) -> Self {
        Handover { turns: Arc::new(Semaphore::new(concurrency.max(1))), stopping, within, move_within }
    }

    /// The leaving of one page's terminal (`held`: its session stays in the pod and can move).
    pub fn leaving(&self, held: bool) -> Leaving {
        let handover = self.clone();
        let turn = async move {
            handover.stopping.cancelled().await;
            if !held {
                return Turn::Now;
            }
            // Fair: the semaphore hands turns out in the order they were asked for.
            match tokio::time::timeout(handover.within, handover.turns.acquire_owned()).await {
                Ok(Ok(permit)) => Turn::Paced(permit),
                _ => Turn::Now,
            }
        };
        Leaving { turn: Box::pin(turn), told: None, move_within: self.move_within }
    }
}

/// One page's way out of a stopping gateway, polled in its bridge's loop. Cancel-safe: the wait
/// for a turn lives here, not in the future [`Leaving::next`] returns.
pub struct Leaving {
    turn: Pin<Box<dyn Future<Output = Turn> + Send>>,
    /// The turn taken (kept until the page's socket ends) and when the page must have moved.
    told: Option<(Option<OwnedSemaphorePermit>, Instant)>,
    move_within: Duration,
}

impl Leaving {
    /// The next step: [`Leave::Tell`] once at the page's turn, [`Leave::Go`] when it is to go now
    /// or did not move in time. Pending forever while the gateway serves.
    pub async fn next(&mut self) -> Leave {
        if let Some((_, deadline)) = &self.told {
            tokio::time::sleep_until(*deadline).await;
            return Leave::Go;
        }
        let turn = (&mut self.turn).await;
        match turn {
            Turn::Paced(permit) => {
                self.told = Some((Some(permit), Instant::now() + self.move_within));
                Leave::Tell
            }
            Turn::Now => {
                self.told = Some((None, Instant::now()));
                Leave::Go
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    /// Whether `next` is ready now, and with what (a pending step is dropped, which is safe).
    async fn now(leaving: &mut Leaving) -> Option<Leave> {
        tokio::time::timeout(Duration::from_millis(1), leaving.next()).await.ok()
    }

    #[tokio::test]
    async fn pages_move_a_few_at_a_time_each_turn_freed_by_the_page_that_moved() {
        let stopping = CancellationToken::new();
        let handover = Handover::new(2, (LONG, LONG), stopping.clone());
        let mut pages: Vec<Leaving> = (0..4).map(|_| handover.leaving(true)).collect();
        let mut plain = handover.leaving(false);
        assert_eq!(now(&mut pages[0]).await, None, "serving: nobody moves");
        assert_eq!(now(&mut plain).await, None, "serving: not even a plain terminal");
        stopping.cancel();
        assert_eq!(now(&mut plain).await, Some(Leave::Go), "a plain terminal goes at once");
        assert_eq!(now(&mut pages[0]).await, Some(Leave::Tell));
        assert_eq!(now(&mut pages[1]).await, Some(Leave::Tell));
        assert_eq!(now(&mut pages[2]).await, None, "two at a time");
        assert_eq!(now(&mut pages[0]).await, None, "told, and given time to move");
        // The first page moved: its socket ended, its turn is the next page's.
        drop(pages.remove(0));
        assert_eq!(now(&mut pages[1]).await, Some(Leave::Tell), "the freed turn is the next page's");
        assert_eq!(now(&mut pages[2]).await, None);
    }

    #[tokio::test]
    async fn a_page_that_does_not_move_and_pages_left_when_time_is_up_go_at_once() {
        let stopping = CancellationToken::new();
        let handover = Handover::new(1, (Duration::ZERO, Duration::ZERO), stopping.clone());
        let (mut first, mut second) = (handover.leaving(true), handover.leaving(true));
        stopping.cancel();
        assert_eq!(now(&mut first).await, Some(Leave::Tell), "a free turn is taken before time is up");
        assert_eq!(now(&mut second).await, Some(Leave::Go), "no turn free, and the pacing's time is up");
        assert_eq!(now(&mut first).await, Some(Leave::Go), "told, and did not move in time");
    }
}
