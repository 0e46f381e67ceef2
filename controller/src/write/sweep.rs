//! The standing sweep: a shell's Deployments, ReplicaSets and pods never outlive it.
//!
//! A shell's owner is what keeps strangers out of its pods (the connect gate looks the shell up by
//! the pod's name), so a pod whose MyOwnShell is gone runs with no gate at all, and a new shell of
//! the same name would make its creator their "owner". Cleanup (the finalizer) and the garbage
//! collector remove them on every ordinary path, and the admission policies refuse orphaning a
//! shell or stripping its finalizer; the sweep is what catches whatever still slips through (an
//! administrator's `--cascade=orphan`, a finalizer removed by hand, a controller that was down):
//! every `--sweep-interval`, objects labelled as a shell's (`app.kubernetes.io/name=myownshell`,
//! `app.kubernetes.io/managed-by=myownshell-operator`) whose shell does not exist are deleted,
//! each with a uid precondition.
//!
//! Which shell an object is: a Deployment has its shell's name; a ReplicaSet or a pod has its
//! shell's instance label (the name, or a shortened form of a long one, see
//! [`crate::labels::instance_value`]; also the value an existing Deployment of the shell selects on,
//! for labels made by an earlier release). The objects are listed before the shells: an object
//! listed first whose shell is missing from the later list had its shell gone by then (a shell
//! exists before anything of it is made), so a shell being created is never swept.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use kube::{Api, Client, Resource};
use myownshell_api::MyOwnShell;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{info, warn};

use crate::labels;
use crate::metrics::Metrics;
use crate::write::sweep_list::{Listed, PAGE, list_all};

/// The kinds the sweep looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Named as its shell.
    Deployment,
    /// Labelled with its shell's instance.
    ReplicaSet,
    /// Labelled with its shell's instance.
    Pod,
}

/// An object labelled as a shell's, as the sweep sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// What it is.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid, the precondition of its deletion.
    pub uid: String,
    /// Its `app.kubernetes.io/instance` label.
    pub instance: Option<String>,
    /// Being deleted already.
    pub terminating: bool,
}

/// The objects of `objects` whose shell is not among `shells` (`(namespace, name)`), which
/// are not being deleted already.
pub fn strays<'a>(objects: &'a [Labelled], shells: &[(String, String)]) -> Vec<&'a Labelled> {
    let names: HashSet<(&str, &str)> = shells.iter().map(|(ns, n)| (ns.as_str(), n.as_str())).collect();
    // Every instance a live shell's objects may carry: its own, and the one its live Deployment
    // was made with (kept by an earlier release's naming of long names).
    let mut instances: HashSet<(String, String)> =
        shells.iter().map(|(ns, n)| (ns.clone(), labels::instance_value(n))).collect();
    for d in objects.iter().filter(|o| o.kind == Kind::Deployment) {
        if let (true, Some(instance)) = (names.contains(&(d.namespace.as_str(), d.name.as_str())), &d.instance) {
            instances.insert((d.namespace.clone(), instance.clone()));
        }
    }
    objects
        .iter()
        .filter(|o| !o.terminating)
        .filter(|o| match o.kind {
            Kind::Deployment => !names.contains(&(o.namespace.as_str(), o.name.as_str())),
            Kind::ReplicaSet | Kind::Pod => match &o.instance {
                Some(instance) => !instances.contains(&(o.namespace.clone(), instance.clone())),
                None => false,
            },
        })
        .collect()
}

/// Start sweeping, until the guard is dropped: the Controller's loop holds it, so the sweep runs
/// while this replica leads and stops with it.
pub fn start(client: Client, namespace: Option<String>, interval: Duration, metrics: Metrics) -> DropGuard {
    let stop = CancellationToken::new();
    tokio::spawn(run(client, namespace, interval, metrics, stop.clone()));
    stop.drop_guard()
}

/// Sweep every `interval` until `stop`. Runs on the leader only (it is started with the
/// Controller); the first sweep one interval after the start, when the shells have settled.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    interval: Duration,
    metrics: Metrics,
    stop: CancellationToken,
) {
    if interval.is_zero() {
        return;
    }
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if let Err(e) = sweep(&client, namespace.as_deref(), &metrics).await {
            warn!(error = %e, "the sweep of strays could not read what it needs; trying again next interval");
        }
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What the sweep keeps of a listed object of `kind`.
fn labelled(kind: Kind, listed: Listed) -> Labelled {
    Labelled {
        kind,
        instance: listed.instance().map(str::to_owned),
        terminating: listed.terminating(),
        namespace: listed.namespace,
        name: listed.name,
        uid: listed.uid,
    }
}

/// One sweep: list the labelled objects, then the shells, and delete the strays.
async fn sweep(client: &Client, namespace: Option<&str>, metrics: &Metrics) -> Result<(), kube::Error> {
    let selector = labels::shell_objects_selector();
    let mut objects = Vec::new();
    let deployments = list_all(client, &api::<Deployment>(client, namespace), Some(&selector), PAGE).await?;
    objects.extend(deployments.into_iter().map(|d| labelled(Kind::Deployment, d)));
    let replica_sets = list_all(client, &api::<ReplicaSet>(client, namespace), Some(&selector), PAGE).await?;
    objects.extend(replica_sets.into_iter().map(|r| labelled(Kind::ReplicaSet, r)));
    let pods = list_all(client, &api::<Pod>(client, namespace), Some(&selector), PAGE).await?;
    objects.extend(pods.into_iter().map(|p| labelled(Kind::Pod, p)));
    if objects.is_empty() {
        return Ok(());
    }
    let shells = list_all(client, &api::<MyOwnShell>(client, namespace), None, PAGE).await?;
    let shells: Vec<(String, String)> = shells.into_iter().map(|s| (s.namespace, s.name)).collect();
    let strays = strays(&objects, &shells);
    let namespaces: BTreeSet<&str> = strays.iter().map(|s| s.namespace.as_str()).collect();
    for stray in &strays {
        delete(client, stray, metrics).await;
    }
    if !strays.is_empty() {
        info!(strays = strays.len(), namespaces = ?namespaces, "swept objects of shells that are gone");
    }
    Ok(())
}

/// Delete one stray, if it is still the object that was listed (uid precondition); its
/// dependents go with it (background propagation).
async fn delete(client: &Client, stray: &Labelled, metrics: &Metrics) {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions { uid: Some(stray.uid.clone()), resource_version: None }),
        ..DeleteParams::default()
    };
    let ns = stray.namespace.as_str();
    let result = match stray.kind {
        Kind::Deployment => {
            Api::<Deployment>::namespaced(client.clone(), ns).delete(&stray.name, &params).await.map(drop)
        }
        Kind::ReplicaSet => {
            Api::<ReplicaSet>::namespaced(client.clone(), ns).delete(&stray.name, &params).await.map(drop)
        }
        Kind::Pod => Api::<Pod>::namespaced(client.clone(), ns).delete(&stray.name, &params).await.map(drop),
    };
    metrics.wrote("sweep_delete");
    match result {
        Ok(()) => info!(kind = ?stray.kind, namespace = ns, name = %stray.name, "deleted: its shell is gone"),
        // Gone already, or replaced by a newer object of the name.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => warn!(kind = ?stray.kind, namespace = ns, name = %stray.name, error = %e, "could not delete a stray"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: Kind, ns: &str, name: &str, instance: Option<&str>) -> Labelled {
        Labelled {
            kind,
            namespace: ns.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            instance: instance.map(Into::into),
            terminating: false,
        }
    }

    #[test]
    fn what_outlived_its_shell() {
        let long = "l".repeat(70);
        let long_instance = labels::instance_value(&long);
        let shells = vec![
            ("a".to_owned(), "web".to_owned()),
            ("a".to_owned(), long.clone()),
            ("a".to_owned(), "legacy".to_owned()),
        ];
        let mut terminating = object(Kind::Pod, "a", "gone-7d9f8c6b4-x2x4z", Some("gone"));
        terminating.terminating = true;
        let cases: Vec<(&str, Labelled, bool)> = vec![
            ("the shell's Deployment", object(Kind::Deployment, "a", "web", Some("web")), false),
            ("its ReplicaSet", object(Kind::ReplicaSet, "a", "web-7d9f8c6b4", Some("web")), false),
            ("its pod", object(Kind::Pod, "a", "web-7d9f8c6b4-x2x4z", Some("web")), false),
            ("a long name's pod", object(Kind::Pod, "a", "l-1", Some(&long_instance)), false),
            (
                "a pod with the instance the live Deployment selects on",
                object(Kind::Pod, "a", "legacy-1", Some("legacy-old-form")),
                false,
            ),
            ("a Deployment of a gone shell", object(Kind::Deployment, "a", "gone", Some("gone")), true),
            ("a ReplicaSet of a gone shell", object(Kind::ReplicaSet, "a", "gone-7d9f8c6b4", Some("gone")), true),
            ("a pod of a gone shell", object(Kind::Pod, "a", "gone-7d9f8c6b4-x2x4z", Some("gone")), true),
            ("the same name in another namespace", object(Kind::Pod, "b", "web-7d9f8c6b4-x2x4z", Some("web")), true),
            ("being deleted already", terminating, false),
            ("no instance label: no shell's", object(Kind::Pod, "a", "x", None), false),
        ];
        // Each case its own uid: some share a name on purpose.
        let cases: Vec<(&str, Labelled, bool)> = cases
            .into_iter()
            .enumerate()
            .map(|(i, (what, mut o, want))| {
                o.uid = format!("case-{i}");
                (what, o, want)
            })
            .collect();
        let mut objects: Vec<Labelled> = cases.iter().map(|(_, o, _)| o.clone()).collect();
        // The live Deployment of `legacy`, made with an earlier form of its instance label.
        objects.push(object(Kind::Deployment, "a", "legacy", Some("legacy-old-form")));
        let swept: Vec<&str> = strays(&objects, &shells).iter().map(|o| o.uid.as_str()).collect();
        for (what, o, want) in &cases {
            assert_eq!(swept.contains(&o.uid.as_str()), *want, "{what}");
        }
        assert!(!swept.contains(&"uid-legacy"));
    }
}
