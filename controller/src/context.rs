//! [`Context`]: what every reconcile shares (the client, the caches, the operator's settings,
//! the event publisher, the metrics), with [`Caches`] and [`Settings`], the parts `run` hands it.

use std::sync::Arc;

use kube::Client;
use kube::runtime::reflector::Store;
use myownshell_api::MyOwnShell;

use crate::cache::cached_shell::CachedShell;
use crate::cache::classes::ClassIndex;
use crate::cache::memo::{DeploymentCache, StatusMemo};
use crate::cache::namespaces::TerminatingNamespaces;
use crate::cache::object_map::ObjectMap;
use crate::cache::open_namespaces::OpenNamespaces;
use crate::cache::pending_events::PendingEvents;
use crate::deployment::TemplateSettings;
use crate::events;
use crate::health::nodes::NodeIndex;
use crate::health::pods::PodIndex;
use crate::home::cached::ClaimIndex;
use crate::life::rollout;
use crate::life::slots::Slots;
use crate::metrics::Metrics;
use crate::write::deletes_in_flight::DeletesInFlight;

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    /// For every API call: applies, status patches, reads past the cache, deletes.
    pub(crate) client: Client,
    /// Our Deployments as last seen (watch cache plus our own recent applies).
    pub(crate) deployments: DeploymentCache,
    /// The `MyOwnShell` watch cache: its size is the `managed_objects` gauge.
    pub(crate) shells: Store<CachedShell>,
    /// The health of the shells' pods.
    pub(crate) pods: Arc<PodIndex>,
    /// Which nodes are not ready.
    pub(crate) nodes: Arc<NodeIndex>,
    /// Which namespaces are being deleted (nothing is written there).
    pub(crate) terminating: Arc<TerminatingNamespaces>,
    /// Which namespaces are opened to shells (elsewhere a shell runs no pods).
    pub(crate) open: Arc<OpenNamespaces>,
    /// The shells' home claims.
    pub(crate) claims: Arc<ClaimIndex>,
    /// The shell classes (their caps on running shells, what they put in a shell's pods).
    pub(crate) classes: Arc<ClassIndex>,
    /// The shells this controller let start, by class (see [`crate::life::slots`]).
    pub(crate) slots: Slots,
    /// What the operator's flags ask of every shell's pods, and how template changes roll out.
    pub(crate) settings: Settings,
    /// Publishes the events on `MyOwnShell` objects.
    pub(crate) recorder: events::Publisher,
    /// The controller's metrics (reconciles, writes, managed objects).
    pub(crate) metrics: Metrics,
    /// Status writes the `MyOwnShell` watch has not delivered yet.
    pub(crate) statuses: StatusMemo,
    /// When each object's oldest event not yet reconciled arrived (the queue-latency metric).
    pub(crate) pending_events: PendingEvents,
    /// Consecutive failures per object, for the per-object exponential backoff.
    pub(crate) failures: ObjectMap<MyOwnShell, u32>,
    /// Deployment deletes in flight, which stops' records wait for.
    pub(crate) deletes: DeletesInFlight,
}

/// What the operator's flags ask of every shell.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// What goes into every shell pod's template (`--pod-annotations`).
    pub template: TemplateSettings,
    /// How a template the operator changed rolls out (`--template-updates`,
    /// `--template-update-quiet-after`).
    pub rollout: rollout::Policy,
}

/// What the watches keep, as reconciles read it.
#[derive(Clone)]
pub struct Caches {
    /// Our Deployments (watch cache plus our own recent applies).
    pub deployments: DeploymentCache,
    /// The `MyOwnShell`s, packed.
    pub shells: Store<CachedShell>,
    /// The health of the shells' pods.
    pub pods: Arc<PodIndex>,
    /// Which nodes are not ready.
    pub nodes: Arc<NodeIndex>,
    /// Which namespaces are being deleted.
    pub terminating: Arc<TerminatingNamespaces>,
    /// Which namespaces are opened to shells.
    pub open: Arc<OpenNamespaces>,
    /// The shells' home claims.
    pub claims: Arc<ClaimIndex>,
    /// The shell classes.
    pub classes: Arc<ClassIndex>,
}

impl Context {
    /// The shared state of all reconciles, with no failures counted yet.
    pub fn new(
        client: Client,
        caches: Caches,
        settings: Settings,
        recorder: events::Publisher,
        metrics: Metrics,
        statuses: StatusMemo,
        pending_events: PendingEvents,
    ) -> Self {
        let Caches { deployments, shells, pods, nodes, terminating, open, claims, classes } = caches;
        Self {
            client,
            deployments,
            shells,
            pods,
            nodes,
            terminating,
            open,
            claims,
            classes,
            slots: Slots::default(),
            settings,
            recorder,
            metrics,
            statuses,
            pending_events,
            failures: ObjectMap::default(),
            deletes: DeletesInFlight::default(),
        }
    }
}
