//! Following a watch of every object of a kind into one of the webhook's indexes (the shells,
//! the shell classes) until shutdown, retried with backoff, each error logged.

use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// Hand every event of a watch of `api` to `apply` until `shutdown`; `what` names the objects
/// in the log.
pub async fn follow<K>(api: Api<K>, what: &'static str, apply: impl Fn(&watcher::Event<K>), shutdown: CancellationToken)
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let events = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    let mut events = std::pin::pin!(events);
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            Some(Ok(event)) => apply(&event),
            Some(Err(e)) => tracing::warn!(error = %e, "watching {what} (retrying)"),
            None => return,
        }
    }
}
