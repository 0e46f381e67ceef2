//! The loop that keeps [`super::desired`]'s policies in every namespace opened to shells: a
//! controller of namespaces, triggered by the namespaces' watch, by the watch of the operator's
//! own policies (one edited or deleted is put back at once) and by the classes' (a class's
//! `spec.network` changed: every namespace), that applies the policies
//! server-side as the controller's field manager and deletes its own where a namespace was
//! closed. It never writes or deletes a policy that is not the operator's ([`super::desired::is_ours`]),
//! and asks the apiserver about one only when its own watch does not hold it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use myownshell_api::MyOwnShellClass;
use myownshell_api::names::{self, SHELLS_NAMESPACE_LABEL, SHELLS_NAMESPACE_LABEL_VALUE, reasons};
use myownshell_runtime::events::{EventType, Occurrence, Reporter};
use tracing::{info, warn};

use super::desired::{ClassView, Settings, desired, is_ours, owned_selector};

/// How soon a namespace whose policies could not be written is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Why a namespace's policies could not be made right.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A policy of the operator's name exists and is not the operator's: it is left alone.
    #[error(
        "NetworkPolicy {namespace}/{name} is not the operator's (it lacks the labels {labels}): the operator writes \
         no policy it does not own, so shells there are not isolated until it is renamed or deleted"
    )]
    NotOurs {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The labels that make a policy the operator's.
        labels: String,
    },
    /// The apiserver refused or failed a request.
    #[error("{what} NetworkPolicy {namespace}/{name}: {source}")]
    Api {
        /// What was asked.
        what: &'static str,
        /// The policy's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The apiserver's answer.
        source: kube::Error,
    },
}

/// What every reconcile of a namespace shares.
struct Context {
    client: Client,
    settings: Settings,
    /// The operator's policies, as its watch last saw them.
    policies: Store<NetworkPolicy>,
    /// The shell classes, as their watch last saw them.
    classes: Store<MyOwnShellClass>,
}

/// Whether `ns` is opened to shells (`myownshell.io/shells: enabled`).
fn is_opened(ns: &Namespace) -> bool {
    ns.labels().get(SHELLS_NAMESPACE_LABEL).map(String::as_str) == Some(SHELLS_NAMESPACE_LABEL_VALUE)
}

/// Keep the policies of every namespace (or only `scope`, with `--namespace`) until `stop`
/// resolves.
pub async fn run(
    client: Client,
    settings: Settings,
    scope: Option<String>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (namespaces_config, policies): (_, Api<NetworkPolicy>) = match &scope {
        Some(ns) => {
            (watcher::Config::default().fields(&format!("metadata.name={ns}")), Api::namespaced(client.clone(), ns))
        }
        None => (watcher::Config::default(), Api::all(client.clone())),
    };
    let (store, writer) = reflector::store();
    let policy_events =
        reflector::reflector(writer, watcher(policies, watcher::Config::default().labels(&owned_selector())))
            .default_backoff()
            .touched_objects();
    let (classes, classes_writer) = reflector::store();
    let class_events = reflector::reflector(
        classes_writer,
        watcher(Api::<MyOwnShellClass>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .touched_objects();
    let ctx = Arc::new(Context { client: client.clone(), settings, policies: store, classes });
    info!(gateway_namespace = %ctx.settings.gateway_namespace, "keeping shells' NetworkPolicies");
    let controller = Controller::new(Api::<Namespace>::all(client), namespaces_config);
    let namespaces = controller.store();
    let loop_ = controller
        .watches_stream(policy_events, |p: NetworkPolicy| p.namespace().map(|ns| ObjectRef::new(&ns)))
        // A class changed: every namespace opened to shells (its policies may name the class).
        .watches_stream(class_events, move |_: MyOwnShellClass| {
            namespaces
                .state()
                .iter()
                .filter(|ns| is_opened(ns))
                .map(|ns| ObjectRef::from_obj(&**ns))
                .collect::<Vec<_>>()
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            if let Err(e) = result {
                match e {
                    kube::runtime::controller::Error::ReconcilerFailed(..) => {}
                    other => tracing::debug!(error = %other, "network isolation"),
                }
            }
            std::future::ready(())
        });
    // Dropped at the stop, not drained: a reconcile cut short is a server-side apply or a
    // delete that the next leader makes again (the shells' loop is the one that drains). With a
    // graceful stop here, a controller signalled 0.1 s after its start, a reconcile of shells in
    // flight, once never exited (tests/tests/controller_lifecycle.rs, run with its neighbours).
    tokio::select! {
        () = loop_ => {}
        () = stop => {}
    }
}

fn error_policy(ns: Arc<Namespace>, error: &Error, _: Arc<Context>) -> Action {
    warn!(namespace = %ns.name_any(), %error, "shells' NetworkPolicies");
    Action::requeue(RETRY)
}

/// Make `ns`'s policies what [`desired`] says: every one applied (unless the watch shows it
/// already so), and every other one of the operator's deleted.
async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = ns.name_any();
    if ns.metadata.deletion_timestamp.is_some() {
        // Namespace deletion takes the policies with it, and the namespace's shells go first.
        return Ok(Action::await_change());
    }
    let want = if is_opened(&ns) {
        let classes = ctx.classes.state();
        let views: Vec<ClassView<'_>> = classes
            .iter()
            .filter_map(|c| Some(ClassView { name: c.metadata.name.as_deref()?, network: c.spec.network.as_ref()? }))
            .collect();
        let (policies, refused) = desired(&namespace, &ctx.settings, &views);
        for why in refused {
            warn!(%namespace, "a class's network not opened: {why}");
        }
        policies
    } else {
        Vec::new()
    };
    let api: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &namespace);
    for policy in &want {
        let name = policy.name_any();
        let live = ctx.policies.get(&ObjectRef::new(&name).within(&namespace));
        match live {
            Some(live) if is_ours(&live) && live.spec == policy.spec => continue,
            Some(_) => {}
            None => {
                // Not in the watch of ours: a policy of that name may still be someone else's.
                let other = api.get_opt(&name).await.map_err(|source| Error::Api {
                    what: "reading",
                    namespace: namespace.clone(),
                    name: name.clone(),
                    source,
                })?;
                if other.as_ref().is_some_and(|p| !is_ours(p)) {
                    return Err(Error::NotOurs { namespace, name, labels: owned_selector() });
                }
            }
        }
        let params = PatchParams::apply(names::FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(policy)).await.map_err(|source| Error::Api {
            what: "applying",
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        })?;
        info!(%namespace, %name, "shells' NetworkPolicy applied");
    }
    if !want.is_empty() {
        tell_foreign(&ctx.client, &api, &namespace).await;
    }
    let stale = ctx.policies.state().into_iter().filter(|p| {
        p.namespace().as_deref() == Some(namespace.as_str())
            && is_ours(p)
            && !want.iter().any(|w| w.metadata.name == p.metadata.name)
    });
    for policy in stale {
        let name = policy.name_any();
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: policy.uid(), resource_version: None }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => info!(%namespace, %name, "shells' NetworkPolicy deleted: the namespace is closed to shells"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(source) => return Err(Error::Api { what: "deleting", namespace, name, source }),
        }
    }
    Ok(Action::await_change())
}

/// Tell of every policy of someone else's in `namespace` that opens shells anyway
/// ([`super::foreign`]): a Warning Event on it, and a log line. Best effort, as every Event.
async fn tell_foreign(client: &Client, api: &Api<NetworkPolicy>, namespace: &str) {
    let list = match api.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(error) => {
            warn!(%namespace, %error, "listing NetworkPolicies to find those that open shells");
            return;
        }
    };
    let reporter = Reporter::new(crate::events::REPORTER);
    for policy in list.items.iter().filter(|p| !is_ours(p) && super::foreign::opens_shells(p)) {
        let name = policy.name_any();
        let note = format!(
            "NetworkPolicy {namespace}/{name} allows traffic and its podSelector can select shell pods: it opens them \
             past the operator's isolation (NetworkPolicies add up). Rule shell pods out of spec.podSelector, or \
             delete it; the operator does not change what it does not own"
        );
        warn!(%namespace, %name, "a NetworkPolicy opens shells past the operator's isolation");
        let occurrence = Occurrence {
            regarding: policy.object_ref(&()),
            related: None,
            type_: EventType::Warning,
            reason: reasons::NETWORK_POLICY_OPENS_SHELLS,
            action: "Isolate",
            note,
        };
        if let Err(error) = myownshell_runtime::events::publish(client, occurrence, &reporter).await {
            warn!(%namespace, %name, %error, "could not publish an event");
        }
    }
}
