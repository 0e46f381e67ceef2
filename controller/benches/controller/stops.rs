//! How late the lifetime's stops fire: M shells are given, at a fixed rate, a `maxRunTime` that
//! runs out 20 s later (each at its own second), and a watch of their Deployments sees each one
//! go (a stopped shell has no Deployment; one scaled to 0 counts too). Lateness is the moment
//! seen minus the deadline the shell's own status implies (`startedAt + maxRunTime`): the
//! controller's wake-up, its reconcile and the delete together.
//!
//! Its floor, measured first on the floor's Deployments: the same number of deadlines at the
//! same rate, each met by this benchmark itself with a timer and a delete, seen by the same kind
//! of watch. What a timer, one write and a watch cost on this cluster under the load the stops
//! cause (the garbage collector removing their ReplicaSets and pods), with no controller.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use myownshell_api::MyOwnShell;

use crate::{DEADLINE, WritesPer};

/// How far ahead of its patch each stop is due: longer than a reconcile takes under the load.
const LEAD: Duration = Duration::from_secs(20);

/// Give the first `m` shells of `ns` a run time ending [`LEAD`] after their patch, `rate` patches
/// a second; print how late the stops were (p50, p99, max) against the 1 s target.
///
/// Each patch is answered by a status write before the stop (the new `nextStop`, and the
/// warning: the run time left is under the shells' `warnBefore`) and a `StoppingSoon` Event. Once
/// those are written and before the first stop is due, `warnings` (counted from before the
/// patches) is printed as the writes per warning, and the writes of the stops themselves are
/// counted from then on, in the [`WritesPer`] returned; if the cluster is not quiet by the first
/// deadline (more patches than fit in [`LEAD`]), one count goes on over both, and says so. With
/// it, how many of the benchmark's own requests it holds (to be left out), and the lateness.
pub(crate) async fn stops(
    client: &Client,
    ns: &str,
    m: usize,
    rate: u32,
    quiet: &crate::Quiet,
    warnings: WritesPer,
) -> (WritesPer, usize, Lateness) {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let mut list = shells.list(&ListParams::default()).await.unwrap().items;
    list.sort_by_key(ResourceExt::name_any);
    let started: Vec<(String, Timestamp)> =
        list.iter().filter_map(|s| Some((s.name_any(), s.status.as_ref()?.started_at.as_ref()?.0))).take(m).collect();
    let m = started.len();
    let seen =
        tokio::spawn(stopped_seen(client.clone(), ns.to_owned(), started.iter().map(|(n, _)| n.clone()).collect()));

    let mut deadlines = HashMap::new();
    let mut ticks = crate::pace::ticks(rate);
    let mut sent = tokio::task::JoinSet::new();
    let start = Instant::now();
    for (name, started_at) in &started {
        ticks.tick().await;
        // Whole seconds, as the spec writes them: the stop is due at the first second at least
        // LEAD from now.
        let due_in = Timestamp::now().as_second() + LEAD.as_secs() as i64 + 1 - started_at.as_second();
        let deadline = Timestamp::from_second(started_at.as_second() + due_in).unwrap();
        deadlines.insert(name.clone(), deadline);
        let patch = Patch::Merge(serde_json::json!({"spec": {"lifetime": {"maxRunTime": format!("{due_in}s")}}}));
        let (shells, name) = (shells.clone(), name.clone());
        sent.spawn(async move { shells.patch(&name, &PatchParams::default(), &patch).await.map(drop) });
    }
    let sending = start.elapsed();
    let failed = crate::pace::failures(sent).await;
    let first_due = deadlines.values().min().copied().unwrap_or_else(Timestamp::now);
    let first_due_in = Duration::try_from(first_due.duration_since(Timestamp::now())).unwrap_or_default();
    let (writes, own) =
        if quiet.settled_before(Instant::now() + first_due_in.saturating_sub(Duration::from_secs(1))).await {
            println!("    {}", warnings.line(client, "warning", m, m).await);
            (WritesPer::start(client).await, 0)
        } else {
            println!("    (the warnings' writes still going a second before the first stop: counted with the stops)");
            (warnings, m)
        };
    let seen = tokio::time::timeout(DEADLINE + LEAD, seen).await.expect("not every stop was seen").unwrap();
    let late = Lateness::of(&seen, &deadlines);
    println!(
        "  stops: {m} shells given a run time ending {LEAD:?} after their patch, {:.0} patches/s ({failed} failed); each stop seen after its deadline: {late} ({} the target p99 <= 1 s)",
        m as f64 / sending.as_secs_f64(),
        if late.p99 <= 1.0 { "within" } else { "OVER" },
    );
    (writes, own, late)
}

/// The stops' floor: `m` Deployments of `ns` (the floor's, named as the shells), `rate` a
/// second, each given a deadline [`LEAD`] ahead (to the whole second, as the shells' are) and
/// deleted by this benchmark when it comes, as the controller deletes a stopped shell's; prints
/// and returns how late the watch saw each.
pub(crate) async fn stops_floor(client: &Client, ns: &str, m: usize, rate: u32) -> Lateness {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let names = (0..m).map(|i| (crate::shell(i).name_any(), ())).collect();
    let (late, failed) = at_deadlines(client, ns, names, rate, |name, (), _| {
        let deployments = deployments.clone();
        async move { delete_in_background(&deployments, &name).await }
    })
    .await;
    println!(
        "  stops floor: {m} Deployments deleted by this benchmark at their deadlines, {rate}/s, no controller ({failed} failed): each seen after its deadline: {late}"
    );
    late
}

/// A stops floor's run: `rate` a second, each of `items` (a Deployment of `ns` by name, and what
/// `stop` needs of it) given a deadline [`LEAD`] ahead, to the whole second as the shells' are,
/// and `stop`ped by this benchmark when it comes, with no controller. How late the watch saw each
/// Deployment go, and how many stops failed.
pub(crate) async fn at_deadlines<T, F, Fut>(
    client: &Client,
    ns: &str,
    items: Vec<(String, T)>,
    rate: u32,
    stop: F,
) -> (Lateness, usize)
where
    F: Fn(String, T, Timestamp) -> Fut,
    Fut: Future<Output = Result<(), kube::Error>> + Send + 'static,
{
    let names = items.iter().map(|(name, _)| name.clone()).collect();
    let seen = tokio::spawn(stopped_seen(client.clone(), ns.to_owned(), names));
    let mut deadlines = HashMap::new();
    let mut ticks = crate::pace::ticks(rate);
    let mut timers = tokio::task::JoinSet::new();
    for (name, item) in items {
        ticks.tick().await;
        let deadline = Timestamp::from_second(Timestamp::now().as_second() + LEAD.as_secs() as i64 + 1).unwrap();
        deadlines.insert(name.clone(), deadline);
        let wait = Duration::try_from(deadline.duration_since(Timestamp::now())).unwrap_or_default();
        // An async block does nothing until awaited: the stop starts after the wait.
        let stopping = stop(name, item, deadline);
        timers.spawn(async move {
            tokio::time::sleep(wait).await;
            stopping.await
        });
    }
    let failed = crate::pace::failures(timers).await;
    let seen = tokio::time::timeout(DEADLINE + LEAD, seen).await.expect("not every floor stop was seen").unwrap();
    (Lateness::of(&seen, &deadlines), failed)
}

/// Delete Deployment `name` as the controller deletes a stopped shell's: background
/// propagation, its ReplicaSets and pods left to the garbage collector.
pub(crate) async fn delete_in_background(deployments: &Api<Deployment>, name: &str) -> Result<(), kube::Error> {
    let background =
        DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() };
    deployments.delete(name, &background).await.map(drop)
}

/// The starts' floor: the first `m` of the floor's Deployments, deleted by [`stops_floor`], made
/// again by this benchmark, `rate` a second (the caller waits for them to be ready): what starting
/// a Deployment costs the apiserver with no controller.
pub(crate) async fn starts_floor(client: &Client, ns: &str, m: usize, rate: u32) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let mut ticks = crate::pace::ticks(rate);
    let mut sent = tokio::task::JoinSet::new();
    for i in 0..m {
        ticks.tick().await;
        let (deployments, made) = (deployments.clone(), crate::floor_deployment(i, ns));
        sent.spawn(async move { deployments.create(&PostParams::default(), &made).await.map(drop) });
    }
    let failed = crate::pace::failures(sent).await;
    assert_eq!(failed, 0, "the floor's start patches failed");
}

/// How late each stop was seen after its deadline, in seconds: p50, p99, max, and how many early.
pub(crate) struct Lateness {
    p50: f64,
    pub(crate) p99: f64,
    max: f64,
    early: usize,
}

impl Lateness {
    fn of(seen: &HashMap<String, Timestamp>, deadlines: &HashMap<String, Timestamp>) -> Self {
        let mut late: Vec<f64> =
            seen.iter().filter_map(|(name, at)| Some(at.duration_since(*deadlines.get(name)?).as_secs_f64())).collect();
        late.sort_by(f64::total_cmp);
        let q =
            |q: f64| late.get(((late.len() as f64 * q).ceil() as usize).saturating_sub(1)).copied().unwrap_or(f64::NAN);
        let early = late.iter().filter(|l| **l < 0.0).count();
        Self { p50: q(0.5), p99: q(0.99), max: late.last().copied().unwrap_or(f64::NAN), early }
    }
}

impl std::fmt::Display for Lateness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {} early",
            self.p50 * 1000.0,
            self.p99 * 1000.0,
            self.max * 1000.0,
            self.early
        )
    }
}

/// When each of `names`' Deployments was first seen gone, or asking for 0 pods.
async fn stopped_seen(client: Client, ns: String, names: Vec<String>) -> HashMap<String, Timestamp> {
    let wanted: std::collections::HashSet<String> = names.into_iter().collect();
    let mut seen = HashMap::new();
    let mut events =
        watcher(Api::<Deployment>::namespaced(client, &ns), watcher::Config::default()).default_backoff().boxed();
    while seen.len() < wanted.len() {
        match events.next().await {
            Some(Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d))) => {
                let zero = d.spec.as_ref().and_then(|s| s.replicas) == Some(0);
                if zero && wanted.contains(&d.name_any()) {
                    seen.entry(d.name_any()).or_insert_with(Timestamp::now);
                }
            }
            Some(Ok(watcher::Event::Delete(d))) if wanted.contains(&d.name_any()) => {
                seen.entry(d.name_any()).or_insert_with(Timestamp::now);
            }
            Some(Ok(_)) => {}
            // The watcher starts over by itself (after a backoff): a dropped connection under load.
            Some(Err(e)) => eprintln!("(watch interrupted: {e}; resuming)"),
            None => panic!("watch ended"),
        }
    }
    seen
}

/// Start the first `m` shells of `ns` (of `n`) again, `rate` a second, their run time taken
/// off (as `kubectl myownshell start` does, and the stop's `maxRunTime` with it); how long until
/// all `n` are Ready.
pub(crate) async fn start_again(client: &Client, ns: &str, m: usize, n: usize, rate: u32) -> Duration {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let done = tokio::spawn(crate::converged(client.clone(), ns.to_owned(), n, crate::Goal::ShellsReady));
    let start = Instant::now();
    let mut ticks = crate::pace::ticks(rate);
    let mut sent = tokio::task::JoinSet::new();
    let now = myownshell_runtime::time::to_second(Timestamp::now());
    for i in 0..m {
        ticks.tick().await;
        let name = crate::shell(i).name_any();
        let patch = Patch::Merge(serde_json::json!({
            "spec": {"stopped": false, "lifetime": {"maxRunTime": null, "restartedAt": now}}
        }));
        let shells = shells.clone();
        sent.spawn(async move { shells.patch(&name, &PatchParams::default(), &patch).await.map(drop) });
    }
    let failed = crate::pace::failures(sent).await;
    assert_eq!(failed, 0, "start patches failed");
    tokio::time::timeout(DEADLINE, done).await.expect("not every shell Ready again").unwrap();
    start.elapsed()
}
