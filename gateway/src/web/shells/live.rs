//! The list kept live: `GET /api/shells/live` streams the user's shells as server-sent events,
//! from a watch made **as the user** in each namespace the page shows (a list, then the watch
//! from its resourceVersion), so the page changes as the shells do, with no reload and no
//! polling. Events: `reset` (a namespace's shells, listed), `row` (one shell added or changed),
//! `gone` (one deleted), `stale` (a namespace's watch ended early: the page reconnects).
//!
//! The stream ends after [`LIVE_FOR`] (or when the gateway stops); the browser's EventSource then
//! opens it again, signed-in checks and all, so a session that ended sees nothing new.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, TryStreamExt};
use http::{HeaderMap, StatusCode};
use kube::Resource;
use kube::api::{ListParams, ObjectList, WatchParams};
use kube::core::{Request, WatchEvent};
use myownshell_api::MyOwnShell;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;

use super::limit::{Counted, MAX_PER_USER};
use super::row::row;
use super::{api_refusal, bad_request};
use crate::exec::as_user::AsUser;
use crate::gateway::Gateway;
use crate::signin::{Purpose, Refusal};
use crate::web::reply::{Peer, peer, refused};

/// How long one stream lasts before the page opens it again (under the apiserver's 5 minute
/// cap on a watch's `timeoutSeconds`).
pub const LIVE_FOR: Duration = Duration::from_secs(240);

/// Events waiting for a slow page, per stream.
const BUFFERED_EVENTS: usize = 256;

/// The query of `GET /api/shells/live`: one namespace, or every place of the user.
#[derive(Deserialize)]
pub struct LiveQuery {
    #[serde(default)]
    namespace: String,
}

fn event(name: &str, data: serde_json::Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// One namespace's list and watch, sent down `tx` until the watch ends or nobody listens.
async fn follow(as_user: AsUser, namespace: String, tx: mpsc::Sender<Event>) {
    let stale = |why: String| event("stale", json!({ "namespace": namespace, "reason": why }));
    let shells = Request::new(MyOwnShell::url_path(&(), Some(&namespace)));
    let listed = match shells.list(&ListParams::default()).map_err(bad_request) {
        Ok(request) => as_user.request::<ObjectList<MyOwnShell>>(request).await.map_err(api_refusal),
        Err(refusal) => Err(refusal),
    };
    let listed = match listed {
        Ok(listed) => listed,
        Err(refusal) => return drop(tx.send(stale(refusal.message)).await),
    };
    let rows: Vec<_> = listed.items.iter().map(row).collect();
    if tx.send(event("reset", json!({ "namespace": namespace, "shells": rows }))).await.is_err() {
        return;
    }
    let version = listed.metadata.resource_version.unwrap_or_default();
    let params = WatchParams::default().timeout(LIVE_FOR.as_secs() as u32).disable_bookmarks();
    let events = match shells.watch(&params, &version) {
        Ok(request) => as_user.watch::<MyOwnShell>(request).await,
        Err(e) => return drop(tx.send(stale(e.to_string())).await),
    };
    let events = match events {
        Ok(events) => events,
        Err(e) => return drop(tx.send(stale(api_refusal(e).message)).await),
    };
    let mut events = std::pin::pin!(events);
    loop {
        let sent = match events.try_next().await {
            Ok(Some(WatchEvent::Added(shell) | WatchEvent::Modified(shell))) => event("row", json!(row(&shell))),
            Ok(Some(WatchEvent::Deleted(shell))) => {
                event("gone", json!({ "namespace": namespace, "name": shell.metadata.name.unwrap_or_default() }))
            }
            Ok(Some(WatchEvent::Bookmark(_))) => continue,
            Ok(Some(WatchEvent::Error(status))) => return drop(tx.send(stale(status.message)).await),
            Ok(None) => return,
            Err(e) => return drop(tx.send(stale(e.to_string())).await),
        };
        if tx.send(sent).await.is_err() {
            return;
        }
    }
}

/// The events of every namespace, until [`LIVE_FOR`] has passed, every watch has ended, or the
/// gateway stops.
fn merged(
    gw: &Gateway,
    as_user: AsUser,
    namespaces: Vec<String>,
    counted: Counted,
) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
    let (tx, rx) = mpsc::channel(BUFFERED_EVENTS);
    for namespace in namespaces {
        let tx = tx.clone();
        let as_user = as_user.clone();
        // Ends with its watch, or as soon as the page is gone (nobody receives).
        gw.tasks.spawn(async move {
            let watching = tx.clone();
            tokio::select! {
                () = follow(as_user, namespace, tx) => {}
                () = watching.closed() => {}
            }
        });
    }
    drop(tx);
    let until = tokio::time::Instant::now() + LIVE_FOR;
    let shutdown = gw.shutdown.clone();
    futures::stream::unfold((rx, until, shutdown, counted), |(mut rx, until, shutdown, counted)| async move {
        let next = async {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(event)) => Some(event),
                // Every watch ended early (or there were none): the stream stays open, quiet, for
                // its time, so that the page does not open it again at once, and again.
                Ok(None) => {
                    tokio::time::sleep_until(until).await;
                    None
                }
                Err(_) => None,
            }
        };
        let next = tokio::select! {
            next = next => next,
            () = shutdown.cancelled() => None,
        };
        next.map(|event| (Ok(event), (rx, until, shutdown, counted)))
    })
}

/// `GET /api/shells/live?namespace=NS`: the user's shells as they change (every namespace they
/// may list shells in when none is named).
pub async fn live(
    State(gw): State<Arc<Gateway>>,
    info: Peer,
    headers: HeaderMap,
    Query(q): Query<LiveQuery>,
) -> Response {
    let caller = match crate::signin::caller(&gw.gate(), &headers, peer(&info), Purpose::Read).await {
        Ok(caller) => caller,
        Err(refusal) => return refused(refusal),
    };
    let Some(counted) = gw.live.take(&caller.user.name) else {
        let message = format!("you have {MAX_PER_USER} live lists of shells open already: close a tab");
        return refused(Refusal { status: StatusCode::TOO_MANY_REQUESTS, message });
    };
    let as_user = match gw.as_user(&caller.user) {
        Ok(as_user) => as_user,
        Err(e) => return refused(Refusal { status: StatusCode::FORBIDDEN, message: e.to_string() }),
    };
    let namespaces = match super::places::named_or_all(&gw, &as_user, &q.namespace).await {
        Ok(namespaces) => namespaces,
        Err(refusal) => return refused(refusal),
    };
    Sse::new(merged(&gw, as_user, namespaces, counted)).keep_alive(KeepAlive::default()).into_response()
}
