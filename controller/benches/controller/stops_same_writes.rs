//! The stops' same-writes floor: the two writes a stop through the controller makes, made by this
//! benchmark at each deadline with no controller, timer, queue or reconcile in between: the
//! Deployment's delete, then the status that says the shell stopped (the very status the
//! controller computes for it, as a merge patch of the same fields).
//!
//! Why a second floor: the delete-only floor (`stops::stops_floor`) makes one write per deadline
//! where a stop through the controller makes two, so at 100 stops a second its figure holds the
//! apiserver at half the controller's writes, and the ratio against it mixes the controller's
//! lateness with the status write's cost at the apiserver. Against this one the ratio is the
//! controller's own: its timers, its queue, its reconcile and the order of its writes.
//!
//! The shells it writes live in the floor's namespace, named as its Deployments, which the
//! controller (`--namespace` its own) never reconciles.

use std::collections::HashMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use myownshell_api::MyOwnShell;
use myownshell_controller::life::lifetime;
use myownshell_controller::life::rollout::Decision;
use myownshell_controller::write::status;

use crate::stops::{Lateness, at_deadlines, delete_in_background};

/// Create the shells of the first `m` of the floor's Deployments in `ns`, each with the status the
/// controller writes for a shell whose pod is ready (its run started now): what the same-writes
/// floor's stops write over. Returned as stored, status and all.
pub(crate) async fn prepare(client: &Client, ns: &str, m: usize) -> Vec<MyOwnShell> {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let live: HashMap<String, Deployment> =
        deployments.list(&ListParams::default()).await.unwrap().items.into_iter().map(|d| (d.name_any(), d)).collect();
    let mut prepared = Vec::with_capacity(m);
    for i in 0..m {
        let created = shells.create(&PostParams::default(), &crate::shell(i)).await.unwrap();
        let name = created.name_any();
        let deployment = live.get(&name).unwrap_or_else(|| panic!("the floor's Deployment {name} is missing"));
        let now = Timestamp::now();
        let plan = lifetime::plan(&created, None, now);
        let inputs = status::Inputs {
            deployment: Some(deployment),
            plan: Some(&plan),
            template: Some(&Decision::Current),
            ..status::Inputs::default()
        };
        let running = status::compute(&created, None, &inputs, &Time(now));
        let patch = Patch::Merge(status::merge_patch(&running));
        prepared.push(shells.patch_status(&name, &PatchParams::default(), &patch).await.unwrap());
    }
    prepared
}

/// The floor: `rate` a second, each of `shells` (from [`prepare`]) given a deadline 20 s ahead
/// (`stops::at_deadlines`); when it comes, its Deployment deleted, and then its status patched to
/// the stop's (its run time reached). How late the watch saw each Deployment go.
pub(crate) async fn stops_same_writes_floor(client: &Client, ns: &str, shells: Vec<MyOwnShell>, rate: u32) -> Lateness {
    let m = shells.len();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let statuses: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let items = shells.into_iter().map(|shell| (shell.name_any(), shell)).collect();
    let (late, failed) = at_deadlines(client, ns, items, rate, |name, shell, deadline| {
        let (deployments, statuses) = (deployments.clone(), statuses.clone());
        async move {
            delete_in_background(&deployments, &name).await?;
            let patch = Patch::Merge(status::merge_patch(&stopped_status(shell, deadline)));
            statuses.patch_status(&name, &PatchParams::default(), &patch).await.map(drop)
        }
    })
    .await;
    println!(
        "  stops same-writes floor: {m} Deployments deleted and their shells' statuses written by this benchmark at their deadlines, {rate}/s, no controller ({failed} failed): each seen after its deadline: {late}"
    );
    late
}

/// The status the controller writes for `shell` once its run time, ending at `deadline`, is
/// reached and its Deployment is gone.
fn stopped_status(mut shell: MyOwnShell, deadline: Timestamp) -> myownshell_api::MyOwnShellStatus {
    let started_at = shell.status.as_ref().and_then(|s| s.started_at.as_ref()).map_or(deadline, |t| t.0);
    let run_time = deadline.as_second() - started_at.as_second();
    shell.spec.lifetime.get_or_insert_default().max_run_time = Some(format!("{run_time}s"));
    let now = Timestamp::now();
    let previous = shell.status.clone();
    let plan = lifetime::plan(&shell, previous.as_ref(), now);
    let inputs = status::Inputs {
        deployment: None,
        plan: Some(&plan),
        template: Some(&Decision::Current),
        ..status::Inputs::default()
    };
    status::compute(&shell, previous.as_ref(), &inputs, &Time(now))
}
