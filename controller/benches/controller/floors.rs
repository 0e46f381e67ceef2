//! The floors the controller is measured against: Deployments created directly, and the very
//! requests the controller path makes, sent by a plain client; and each kind of write alone.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{Home, Lifetime, MyOwnShell, MyOwnShellSpec, names};
use myownshell_controller::events::actions;
use myownshell_controller::{deployment, write::status};
use myownshell_envtest::create_shell_namespace;

use crate::*;

/// Object `i`: one shell pod, and a lifetime (an idle timeout with a warning) that runs its
/// clocks, its `nextStop` and its `Stopping` condition without stopping it during the run; with
/// `--homes`, a home of the benchmark's class ([`crate::homes`]).
pub(crate) fn shell(i: usize) -> MyOwnShell {
    let lifetime = Lifetime { idle_timeout: Some("1h".into()), warn_before: Some("5m".into()), ..Lifetime::default() };
    let home = crate::homes::homes()
        .then(|| Home { storage_class_name: Some(crate::homes::CLASS.to_owned()), ..Home::default() });
    MyOwnShell::new(
        &format!("shell-{i:05}"),
        MyOwnShellSpec { size: Some(1), lifetime: Some(lifetime), home, ..MyOwnShellSpec::default() },
    )
}

/// Create `n` objects, `concurrency` at a time.
pub(crate) async fn create_all<K, F>(api: &Api<K>, n: usize, concurrency: usize, make: F)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    F: Fn(usize) -> K,
{
    futures::stream::iter((0..n).map(|i| {
        let object = make(i);
        async move { api.create(&PostParams::default(), &object).await.map(|_| ()) }
    }))
    .buffer_unordered(concurrency)
    .try_collect::<Vec<()>>()
    .await
    .unwrap();
}

/// The requests the controller path makes for one object, in order: writes, and the one read
/// (a new object's Deployment is not in the cache, so the controller looks for a foreign one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    Create,
    Finalizer,
    /// Its home's claim (`--homes`).
    Claim,
    Lookup,
    Apply,
    Status,
    Event,
}

/// The requests of this run, in the controller's order (the claim before the Deployment that
/// mounts it).
pub(crate) fn requests() -> Vec<Request> {
    let claim = crate::homes::homes().then_some(Request::Claim);
    [Some(Request::Create), Some(Request::Finalizer), claim]
        .into_iter()
        .chain([Request::Lookup, Request::Apply, Request::Status, Request::Event].map(Some))
        .flatten()
        .collect()
}

/// The writes that follow the create of an object.
pub(crate) fn follow_ups() -> Vec<Request> {
    requests().split_off(1)
}

impl Request {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Request::Create => "create MyOwnShell",
            Request::Finalizer => "add the finalizer (JSON patch)",
            Request::Claim => "create the home's claim",
            Request::Lookup => "look the Deployment up (GET, not found)",
            Request::Apply => "apply the Deployment (server-side apply)",
            Request::Status => "write the status (merge patch)",
            Request::Event => "record the Created event",
        }
    }
}

/// The same requests the controller makes, for the `MyOwnShell` `shell` already created.
pub(crate) async fn send(
    kind: Request,
    client: &Client,
    recorder: &Recorder,
    shell: &MyOwnShell,
) -> Result<(), kube::Error> {
    let ns = shell.namespace().unwrap_or_default();
    let name = shell.name_any();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    match kind {
        Request::Create => shells.create(&PostParams::default(), shell).await.map(|_| ()),
        Request::Finalizer => {
            // What kube's finalizer helper sends.
            let patch = serde_json::json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [names::FINALIZER]},
            ]);
            let patch: json_patch::Patch = serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
            shells.patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch)).await.map(|_| ())
        }
        Request::Claim => {
            let claim = myownshell_controller::home::claim::desired(shell)
                .map_err(|e| kube::Error::Service(e.to_string().into()))?;
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns)
                .create(&PostParams::default(), &claim)
                .await
                .map(|_| ())
        }
        Request::Lookup => Api::<Deployment>::namespaced(client.clone(), &ns).get_opt(&name).await.map(|_| ()),
        Request::Apply => {
            let desired = deployment::desired(shell, None).map_err(|e| kube::Error::Service(e.to_string().into()))?;
            Api::<Deployment>::namespaced(client.clone(), &ns)
                .patch(&name, &PatchParams::apply(names::FIELD_MANAGER).force(), &Patch::Apply(&desired))
                .await
                .map(|_| ())
        }
        Request::Status => {
            let status = status::compute(shell, None, &status::Inputs::default(), &Time(Timestamp::now()));
            let patch = Patch::Merge(serde_json::json!({ "status": status }));
            shells.patch_status(&name, &PatchParams::default(), &patch).await.map(|_| ())
        }
        Request::Event => {
            let event = Event {
                type_: EventType::Normal,
                reason: reasons::CREATED.into(),
                note: Some(format!("Created Deployment {name} with 1 shell pod(s)")),
                action: actions::APPLY.into(),
                secondary: None,
            };
            recorder.publish(&event, &shell.object_ref(&())).await
        }
    }
}

pub(crate) fn recorder(client: &Client) -> Recorder {
    Recorder::new(client.clone(), Reporter { controller: "myownshell-bench".into(), instance: None })
}

/// One object through every kind of write, in a namespace of its own.
pub(crate) async fn warm_up(client: &Client) {
    let ns = create_shell_namespace(client, "bench-warmup").await.unwrap();
    let recorder = recorder(client);
    let mut shell = shell(0);
    shell.metadata.namespace = Some(ns.clone());
    send(Request::Create, client, &recorder, &shell).await.unwrap();
    let shell = Api::<MyOwnShell>::namespaced(client.clone(), &ns).get(&shell.name_any()).await.unwrap();
    for kind in follow_ups() {
        send(kind, client, &recorder, &shell).await.unwrap();
    }
}

/// The same-writes floor (see the crate docs): how long it takes.
pub(crate) async fn same_writes_floor(client: Client, ns: &str, options: &Options) -> Duration {
    let recorder = recorder(&client);
    // Unbounded: it never holds more than the N objects anyway.
    let (created_tx, created_rx) = futures::channel::mpsc::unbounded::<MyOwnShell>();
    let start = Instant::now();
    // The same watcher stops this clock as the controller's: it loads the apiserver alike.
    let done = tokio::spawn(converged(client.clone(), ns.to_owned(), options.objects, Goal::ShellsReady));
    // The controller writes the status again as the Deployment reports its pods: so does this.
    let reports = tokio::spawn(statuses_as_deployments_report(client.clone(), ns.to_owned()));
    let creates = {
        let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
        let (objects, concurrency) = (options.objects, options.concurrency);
        tokio::spawn(async move {
            futures::stream::iter((0..objects).map(|i| {
                let (shells, created_tx) = (shells.clone(), created_tx.clone());
                async move {
                    let created = shells.create(&PostParams::default(), &shell(i)).await?;
                    // The follow-up writes need the created object (uid, generation).
                    let _ = created_tx.unbounded_send(created);
                    Ok::<(), kube::Error>(())
                }
            }))
            .buffer_unordered(concurrency)
            .try_collect::<Vec<()>>()
            .await
        })
    };
    let follow_ups = created_rx
        .map(|created| {
            let (client, recorder) = (client.clone(), recorder.clone());
            async move {
                for kind in follow_ups() {
                    send(kind, &client, &recorder, &created).await?;
                }
                Ok::<(), kube::Error>(())
            }
        })
        .buffer_unordered(options.concurrency)
        .try_collect::<Vec<()>>();
    follow_ups.await.unwrap();
    creates.await.unwrap().unwrap();
    tokio::time::timeout(DEADLINE, done).await.expect("the same-writes floor did not converge").unwrap();
    let took = start.elapsed();
    reports.abort();
    took
}

/// Each kind of write alone, for N objects C at a time (each needs the ones before it).
pub(crate) async fn breakdown(client: Client, ns: &str, options: &Options) -> Vec<(Request, Duration)> {
    let recorder = recorder(&client);
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let mut times = Vec::new();
    for kind in requests() {
        let objects: Vec<MyOwnShell> = if kind == Request::Create {
            (0..options.objects)
                .map(|i| {
                    let mut s = shell(i);
                    s.metadata.namespace = Some(ns.to_owned());
                    s
                })
                .collect()
        } else {
            shells.list(&Default::default()).await.unwrap().items
        };
        let start = Instant::now();
        futures::stream::iter(objects.iter().map(|s| send(kind, &client, &recorder, s)))
            .buffer_unordered(options.concurrency)
            .try_collect::<Vec<()>>()
            .await
            .unwrap();
        times.push((kind, start.elapsed()));
    }
    times
}

/// The floor: N Deployments created directly (the very objects the controller would build),
/// until all of them report their pod ready.
pub(crate) async fn floor(client: Client, ns: &str, options: &Options) -> Duration {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let done = tokio::spawn(converged(client.clone(), ns.to_owned(), options.objects, Goal::DeploymentsReady));
    if crate::homes::homes() {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        create_all(&claims, options.objects, options.concurrency, |i| floor_claim(i, ns)).await;
    }
    create_all(&deployments, options.objects, options.concurrency, |i| floor_deployment(i, ns)).await;
    tokio::time::timeout(DEADLINE, done).await.expect("the floor did not converge").unwrap();
    start.elapsed()
}

/// [`shell`] `i` as if stored in `ns`.
fn stored_shell(i: usize, ns: &str) -> MyOwnShell {
    let mut s = shell(i);
    s.metadata.namespace = Some(ns.to_owned());
    s.metadata.uid = Some(format!("00000000-0000-0000-0000-{i:012}"));
    s
}

/// The floor's claim `i` in `ns` (`--homes`): the very object the controller makes for [`shell`]
/// `i`'s home.
fn floor_claim(i: usize, ns: &str) -> PersistentVolumeClaim {
    myownshell_controller::home::claim::desired(&stored_shell(i, ns)).unwrap()
}

/// The floor's Deployment `i` in `ns`: the very object the controller builds for [`shell`] `i`.
pub(crate) fn floor_deployment(i: usize, ns: &str) -> Deployment {
    let mut d = deployment::desired(&stored_shell(i, ns), None).unwrap();
    // No owner: the garbage collector would delete a Deployment whose owner does not exist.
    d.metadata.owner_references = None;
    d
}

/// Write each shell's status as its Deployment reports its pods (replicas, then ready), as the
/// controller does: the status writes of the same-writes floor after the first.
async fn statuses_as_deployments_report(client: Client, ns: String) {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    let mut reported = std::collections::HashMap::<String, (i32, i32)>::new();
    let mut events =
        watcher(Api::<Deployment>::namespaced(client, &ns), watcher::Config::default()).default_backoff().boxed();
    while let Some(event) = events.next().await {
        let Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) = event else { continue };
        let seen =
            d.status.as_ref().map(|s| (s.replicas.unwrap_or(0), s.ready_replicas.unwrap_or(0))).unwrap_or_default();
        if seen == (0, 0) || reported.get(&d.name_any()) == Some(&seen) {
            continue;
        }
        reported.insert(d.name_any(), seen);
        let mut shell = MyOwnShell::new(&d.name_any(), MyOwnShellSpec { size: Some(1), ..MyOwnShellSpec::default() });
        shell.metadata.generation = Some(1);
        let inputs = status::Inputs { deployment: Some(&d), ..status::Inputs::default() };
        let status = status::compute(&shell, None, &inputs, &Time(Timestamp::now()));
        let patch = Patch::Merge(serde_json::json!({ "status": status }));
        let _ = shells.patch_status(&d.name_any(), &PatchParams::default(), &patch).await;
    }
}

/// When a phase has converged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goal {
    /// Every Deployment reports its pod ready (the floor: no MyOwnShell involved).
    DeploymentsReady,
    /// Every MyOwnShell's status shows its current generation and its pod ready.
    ShellsReady,
}

/// Resolves when all `n` objects in `ns` have reached `goal`.
pub(crate) async fn converged(client: Client, ns: String, n: usize, goal: Goal) {
    let mut done = HashSet::new();
    match goal {
        Goal::DeploymentsReady => {
            let mut events = crate::afresh(Api::<Deployment>::namespaced(client, &ns));
            while done.len() < n {
                match events.next().await {
                    Some(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => {
                        if d.status.as_ref().and_then(|s| s.ready_replicas) == Some(1) {
                            done.insert(d.name_any());
                        }
                    }
                    Some(_) => {}
                    None => panic!("watch ended"),
                }
            }
        }
        Goal::ShellsReady => {
            let mut events = crate::afresh(Api::<MyOwnShell>::namespaced(client, &ns));
            while done.len() < n {
                match events.next().await {
                    Some(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => {
                        let status = s.status.as_ref();
                        let current = status.and_then(|st| st.observed_generation) == s.metadata.generation;
                        let ready = status.is_some_and(|st| st.ready_replicas >= 1 && !st.conditions.is_empty());
                        if current && ready {
                            done.insert(s.name_any());
                        }
                    }
                    Some(_) => {}
                    None => panic!("watch ended"),
                }
            }
        }
    }
}
