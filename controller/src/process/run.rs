//! `run`: the controller process minus `main` — servers, leader election, the Controller loop and
//! an orderly shutdown.

use std::future::Future;
use std::sync::Arc;

use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::{Api, Client, ResourceExt};
use myownshell_api::MyOwnShell;
use myownshell_runtime::client::ClientError;
use myownshell_runtime::flags::BindAddress;
use myownshell_runtime::probes::{self, BindError, Readiness, ReadyFlag};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::cache::cached_deployment::CachedDeployment;
use crate::cache::cached_shell::{CachedShell, retype};
use crate::cache::classes::ClassIndex;
use crate::cache::memo::{DeploymentCache, StatusMemo};
use crate::cache::namespaces::TerminatingNamespaces;
use crate::cache::open_namespaces::OpenNamespaces;
use crate::cache::pending_events::PendingEvents;
use crate::cache::synced::Synced;
use crate::cache::watch;
use crate::context::{Caches, Context};
use crate::events::Reporter;
use crate::health::nodes::NodeIndex;
use crate::health::pods::{CachedPod, PodIndex};
use crate::home::cached::{CachedClaim, ClaimIndex};
use crate::metrics::Metrics;
use crate::process::args::Args;
use crate::process::leader::{HoldOutcome, LeaderConfig, LeaderElector, default_identity};
use crate::reconcile;
use crate::write::sweep;

use crate::events::REPORTER;

/// Why the controller process stops with a failure (`main` logs it and exits non-zero, and
/// Kubernetes restarts the pod).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No Kubernetes client could be configured: the `--kubeconfig` file is unreadable or
    /// unusable, or there is no kubeconfig and the process is not in a cluster.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The leader-election flags are inconsistent (checked at start-up).
    #[error("leader election: {0}")]
    LeaderConfig(#[from] crate::process::leader::ConfigError),
    /// The health-probe port could not be bound.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// This replica could not renew the Lease within the renew deadline (or its renewing task
    /// died) and stopped reconciling at once, before a standby can take over; restarted, it
    /// competes for the Lease again.
    #[error("leadership lost: stopped reconciling so another replica can take over")]
    LeadershipLost,
    /// The metrics endpoint could not start (port, certificate files).
    #[error("metrics endpoint: {0}")]
    Metrics(#[from] myownshell_auth::ServeError),
    /// The controller's own pod could not be read for the session holder's image (give
    /// `--session-image`, or let it `get` its pod).
    #[error("reading this pod for the session holder's image (or set --session-image): {0}")]
    SessionImage(kube::Error),
}

/// Run until `shutdown` is cancelled (then finish in-flight reconciles, release the lease and
/// return `Ok`) or leadership is lost (then stop at once and return `Err`).
pub async fn run(args: Args, shutdown: CancellationToken) -> Result<(), RunError> {
    // Bad flags fail before anything connects.
    if args.leader_elect {
        leader_config(&args)?;
    }
    let client = args.client.client().await?;
    run_with_client(args, client, shutdown).await
}

/// The leader-election settings from the flags, checked.
fn leader_config(args: &Args) -> Result<LeaderConfig, RunError> {
    let config = LeaderConfig {
        lease_name: args.leader_election_id.clone(),
        namespace: args.lease_namespace(),
        identity: default_identity(),
        lease_duration: args.lease_duration,
        renew_deadline: args.renew_deadline,
        retry_period: args.retry_period,
    };
    config.validate()?;
    Ok(config)
}

/// [`run`] with a ready client (tests and `cargo xtask dev` pass their own).
pub async fn run_with_client(args: Args, client: Client, shutdown: CancellationToken) -> Result<(), RunError> {
    let metrics = Metrics::new();
    let readiness = ReadyFlag::default();
    let servers = CancellationToken::new();
    let mut tasks = Vec::new();
    if let BindAddress::At(addr) = args.probes.health_probe_bind_address {
        let probes = probes::router(Readiness::from_flag(readiness.clone(), "caches not synced yet"));
        tasks.push(probes::serve_plain("health probes", addr, probes, servers.clone()).await?);
    }
    let service = args.metrics_service();
    if let Some(task) = args.metrics_auth.serve(client.clone(), metrics.router(), &service, servers.clone()).await? {
        tasks.push(task);
    }

    let session_image = crate::process::own_image::session_image(args.session_image.as_deref(), &client)
        .await
        .map_err(RunError::SessionImage)?;
    let settings = args.settings(session_image);
    let result = elect_and_reconcile(&args, &settings, client, metrics, readiness, shutdown).await;

    servers.cancel();
    for task in tasks {
        let _ = task.await;
    }
    info!(ok = result.is_ok(), "controller stopped");
    result
}

async fn elect_and_reconcile(
    args: &Args,
    settings: &crate::context::Settings,
    client: Client,
    metrics: Metrics,
    readiness: ReadyFlag,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    if !args.leader_elect {
        metrics.leader.set(1);
        reconcile_until(args, settings, client, metrics, readiness, shutdown.clone().cancelled_owned()).await;
        return Ok(());
    }
    let config = leader_config(args)?;
    let mut elector = LeaderElector::new(client.clone(), config);
    // A standby is ready: it serves its purpose by waiting.
    readiness.set(true);
    if !elector.acquire(&shutdown).await {
        return Ok(());
    }
    readiness.set(false);
    metrics.leader.set(1);

    let stop_holding = CancellationToken::new();
    let lost = CancellationToken::new();
    let holder = {
        let (stop_holding, lost) = (stop_holding.clone(), lost.clone());
        tokio::spawn(async move {
            let outcome = elector.hold(&stop_holding).await;
            if outcome == HoldOutcome::Lost {
                lost.cancel();
            }
            (elector, outcome)
        })
    };
    let graceful = shutdown.clone().cancelled_owned();
    tokio::select! {
        () = reconcile_until(args, settings, client, metrics.clone(), readiness.clone(), graceful) => {}
        // A leader that cannot renew must stop before its lease can expire: in-flight
        // reconciles are dropped, not awaited.
        () = lost.cancelled() => {}
    }
    metrics.leader.set(0);
    readiness.set(false);
    stop_holding.cancel();
    match holder.await {
        Ok((_, HoldOutcome::Lost)) => {
            error!("leadership lost");
            Err(RunError::LeadershipLost)
        }
        Ok((mut elector, HoldOutcome::Stopped)) => {
            elector.release().await;
            Ok(())
        }
        Err(e) => {
            error!(error = %e, "the lease holder task failed");
            Err(RunError::LeadershipLost)
        }
    }
}

/// Run the shells' Controller and the network isolation loop until `stop` resolves; in-flight
/// reconciles finish first.
async fn reconcile_until(
    args: &Args,
    settings: &crate::context::Settings,
    client: Client,
    metrics: Metrics,
    readiness: ReadyFlag,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    // One stop for both loops: the shells' and the namespaces' network isolation.
    let done = CancellationToken::new();
    let network = network_isolation(args, client.clone(), done.clone());
    let shells = reconcile_shells_until(args, settings, client, metrics, readiness, done.clone().cancelled_owned());
    tokio::join!(shells, network, relay(stop, done));
}

/// The shells' Controller until `stop` resolves; in-flight reconciles finish first.
async fn reconcile_shells_until(
    args: &Args,
    settings: &crate::context::Settings,
    client: Client,
    metrics: Metrics,
    readiness: ReadyFlag,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let namespace = args.namespace.as_deref();
    let (shells_api, deployments_api) = (scoped::<CachedShell>(&client, namespace), scoped(&client, namespace));
    let (shells, shell_writer) = reflector::store();
    let (deployments, deployment_writer) = reflector::store();
    let (shells_synced_tx, shells_synced) = Synced::new();
    let (deployments_synced_tx, deployments_synced) = Synced::new();
    let deployment_cache = DeploymentCache::new(deployments, deployments_synced.clone());
    let statuses = StatusMemo::new(shells.clone());
    let pending_events = PendingEvents::default();
    let (pods, nodes, terminating, open): (
        Arc<PodIndex>,
        Arc<NodeIndex>,
        Arc<TerminatingNamespaces>,
        Arc<OpenNamespaces>,
    ) = Default::default();
    let claims = Arc::<ClaimIndex>::default();
    let classes = Arc::<ClassIndex>::default();
    let recorder = crate::events::Publisher::new(client.clone(), Reporter::new(REPORTER), Arc::clone(&terminating));
    let _sweeping = sweep::start(client.clone(), args.namespace.clone(), args.sweep_interval, metrics.clone());
    let (deployments, shells_cache) = (deployment_cache.clone(), shells.clone());
    let caches = Caches { deployments, shells: shells_cache, pods, nodes, terminating, open, claims, classes };
    let triggers = triggers(&client, args.namespace.clone(), &caches, pending_events.clone());
    let ctx = Arc::new(Context::new(
        client,
        caches,
        settings.clone(),
        recorder,
        metrics,
        statuses.clone(),
        pending_events.clone(),
    ));
    let synced = [shells_synced, deployments_synced];
    let ready_when_synced =
        ready_when_synced(readiness, synced, ctx.open.clone(), shells.clone(), deployment_cache.clone());

    // Every event that will trigger a reconcile is noted for the queue-latency metric; a
    // Deployment's only if a `MyOwnShell` of its name exists (else no reconcile takes the note).
    let shell_events = {
        let pending = pending_events.clone();
        watch::shell_stream(shells_api, shell_writer, shells_synced_tx, statuses)
            .inspect_ok(move |s| pending.arrived(retype(&ObjectRef::from_obj(s)), Instant::now()))
    };
    let deployment_events = {
        let (pending, shells) = (pending_events.clone(), shells.clone());
        watch::deployment_stream(deployments_api, deployment_cache, deployment_writer, deployments_synced_tx)
            .inspect_ok(move |d| {
                let shell = shell_of(d);
                if shells.get(&shell).is_some() {
                    pending.arrived(retype(&shell), Instant::now());
                }
            })
    };
    Controller::for_stream(shell_events, shells)
        // A Deployment event goes to the `MyOwnShell` of the same name, not through the
        // ownerReference: one whose reference was removed is still ours to repair (`ownership`).
        .watches_stream(deployment_events, |d| Some(shell_of(&d)))
        // Pods' and nodes' health (told in the status), and namespaces opened or closed to shells.
        .reconcile_on(triggers.map(|shell| retype(&shell)))
        // The Controller backs its trigger streams off on errors too, by default up to 30 s.
        .trigger_backoff(watch::watch_backoff())
        .with_config(controller::Config::default().concurrency(args.concurrency))
        .graceful_shutdown_on(stop)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| {
            if let Err(e) = &result {
                on_controller_error(e, &pending_events);
            }
            std::future::ready(())
        })
        .await;
    ready_when_synced.abort();
}

/// Cancels `done` once `stop` resolves.
async fn relay(stop: impl Future<Output = ()>, done: CancellationToken) {
    stop.await;
    done.cancel();
}

/// The network isolation loop until `done` (nothing with `--network-isolation=off`).
fn network_isolation(
    args: &Args,
    client: Client,
    done: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    let (settings, scope) = (args.network_settings(), args.namespace.clone());
    async move {
        if let Some(settings) = settings {
            crate::network::isolate::run(client, settings, scope, done.cancelled_owned()).await;
        }
    }
}

/// An Api over `namespace`, or over every namespace.
fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The shells to reconcile because what is wrong with their pods changed, a node under one of
/// their pods came or went (from the watches of the shells' pods and of the nodes), their home
/// claim changed (the claims' watch), or their namespace was opened or closed to shells (the namespaces' watch, which also keeps
/// `caches.terminating`); each noted for the queue-latency metric.
fn triggers(
    client: &Client,
    namespace: Option<String>,
    caches: &Caches,
    pending: PendingEvents,
) -> impl futures::Stream<Item = ObjectRef<MyOwnShell>> + Send + 'static {
    let (pods, nodes) = (caches.pods.clone(), caches.nodes.clone());
    let node_triggers = watch::node_triggers(Api::all(client.clone()), nodes, pods.clone());
    let pod_triggers = watch::pod_triggers(scoped::<CachedPod>(client, namespace.as_deref()), pods);
    let claim_triggers =
        watch::claim_triggers(scoped::<CachedClaim>(client, namespace.as_deref()), caches.claims.clone());
    let (terminating, open) = (caches.terminating.clone(), caches.open.clone());
    let namespace_triggers =
        watch::namespace_triggers(Api::all(client.clone()), namespace, terminating, open, caches.shells.clone());
    let class_triggers = watch::class_triggers(Api::all(client.clone()), caches.classes.clone(), caches.shells.clone());
    let all = [
        pod_triggers.boxed(),
        node_triggers.boxed(),
        namespace_triggers.boxed(),
        claim_triggers.boxed(),
        class_triggers.boxed(),
    ];
    futures::stream::select_all(all).inspect(move |shell| pending.arrived(shell.clone(), Instant::now()))
}

/// Mark the process ready once both watch caches and the namespaces opened to shells hold their
/// first list (reconciles wait for all three).
fn ready_when_synced(
    readiness: ReadyFlag,
    synced: [Synced; 2],
    open: Arc<OpenNamespaces>,
    shells: reflector::Store<CachedShell>,
    deployments: DeploymentCache,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let [shells_synced, deployments_synced] = synced;
        if shells_synced.wait().await && deployments_synced.wait().await {
            open.wait_synced().await;
            readiness.set(true);
            info!(shells = shells.len(), deployments = deployments.len(), "caches synced");
        }
    })
}

/// Log a Controller error; an object gone before its reconcile also drops its queue note
/// (nothing else will take it).
fn on_controller_error(e: &ControllerError, pending_events: &PendingEvents) {
    log_controller_error(e);
    if let controller::Error::ObjectNotFound(obj) = e {
        let gone = ObjectRef::<MyOwnShell>::new(&obj.name);
        let gone = match &obj.namespace {
            Some(ns) => gone.within(ns),
            None => gone,
        };
        pending_events.started(&gone, Instant::now());
    }
}

/// What the Controller's stream yields besides reconcile results.
type ControllerError = controller::Error<crate::error::Error, kube::runtime::watcher::Error>;

/// The `MyOwnShell` a Deployment belongs to, if any: the one of the same name.
fn shell_of(deployment: &CachedDeployment) -> ObjectRef<CachedShell> {
    ObjectRef::new(&deployment.name_any()).within(&deployment.namespace().unwrap_or_default())
}

fn log_controller_error(e: &ControllerError) {
    match e {
        // The reconcile error itself was logged by the error policy.
        controller::Error::ReconcilerFailed(..) => {}
        controller::Error::ObjectNotFound(obj) => tracing::debug!(object = %obj, "object gone before its reconcile"),
        other => warn!(error = %other, "controller"),
    }
}
