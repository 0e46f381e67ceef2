//! A watch that lists afresh after any error.
//!
//! kube's watcher keeps polling the same stream after a failed read ("error reading a body from
//! connection"), and under `--objects 10000 --homes` one such stream never yielded again: the
//! floor's phase waited with every Deployment ready, the benchmark idle, until its deadline
//! (the floor that "did not converge" in issue 30's attempt at homes). A new watcher, with a
//! new list, cannot miss what the broken one would have said.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The events of a watch of `api`, started again with a new list after any error (logged).
pub(crate) fn afresh<K>(api: Api<K>) -> BoxStream<'static, watcher::Event<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let start = |api: &Api<K>| -> Events<K> { watcher(api.clone(), watcher::Config::default()).boxed() };
    futures::stream::unfold((api, None::<Events<K>>), move |(api, current)| async move {
        let mut events = current.unwrap_or_else(|| start(&api));
        loop {
            match events.next().await {
                Some(Ok(event)) => return Some((event, (api, Some(events)))),
                Some(Err(e)) => {
                    eprintln!("(watch interrupted: {e}; listing afresh)");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    events = start(&api);
                }
                None => return None,
            }
        }
    })
    .boxed()
}
