//! The signal that a watch cache holds its first full list.

use tokio::sync::watch;

/// Whether a watch cache holds its first full list. kube's `Store::wait_until_ready` wakes only
/// one waiter (the Controller already is one), so the controller keeps its own signal.
#[derive(Clone)]
pub struct Synced(watch::Receiver<bool>);

impl Synced {
    /// A signal not yet synced, and the sender the watch marks it synced with (`true`, at its
    /// first `InitDone`). Dropping the sender unsynced makes [`Synced::wait`] return `false`.
    pub fn new() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Self(rx))
    }

    /// Resolves once synced (`true`), or `false` if the watch was dropped before that.
    pub async fn wait(&self) -> bool {
        let mut rx = self.0.clone();
        rx.wait_for(|synced| *synced).await.is_ok()
    }

    /// Whether the first list is in, without waiting.
    pub fn is_synced(&self) -> bool {
        *self.0.borrow()
    }
}
