//! A shell's home on the real kube-apiserver: the claim `myownshell-home-<shell>` made and owned
//! by the shell, mounted as `$HOME` by a Deployment that rolls by `Recreate`, its state in
//! `HomeReady`; kept (`onDelete: Retain`) and taken up again by a new shell of the same name
//! and owner, deleted otherwise; a claim of the name that is not the shell's never written,
//! deleted or mounted. (No volume is ever provisioned on this plane: the claim's status is
//! written here as a provisioner would. The real node's e2e provisions and mounts for real.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use myownshell_api::names::reasons;
use myownshell_api::{Home, HomeOnDelete, MyOwnShell, MyOwnShellSpec};
use myownshell_envtest::eventually;
use myownshell_tests::controller::{ControllerTest, TIMEOUT, cond, condition};
use serde_json::json;

fn shell_with_home(name: &str, owner: &str, home: Home) -> MyOwnShell {
    MyOwnShell::new(
        name,
        MyOwnShellSpec { size: Some(1), owner: Some(owner.into()), home: Some(home), ..MyOwnShellSpec::default() },
    )
}

fn claims(t: &ControllerTest) -> Api<PersistentVolumeClaim> {
    Api::namespaced(t.client.clone(), &t.ns)
}

/// Wait until the claim `name` satisfies `check`.
async fn claim_where(
    t: &ControllerTest,
    name: &str,
    what: &str,
    check: impl Fn(&PersistentVolumeClaim) -> Result<(), String>,
) -> PersistentVolumeClaim {
    eventually(what, TIMEOUT, || async {
        let c = claims(t).get_opt(name).await.map_err(|e| e.to_string())?.ok_or("no claim")?;
        check(&c).map(|()| c)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- controller log ---\n{}", t.controller.log_tail(30)))
}

/// Wait until `HomeReady` of `name` has `status` and `reason`.
async fn home_ready(t: &ControllerTest, name: &str, status: &str, reason: &str) -> MyOwnShell {
    t.shell_where(name, &format!("HomeReady={status} {reason}"), |s| {
        if condition(s, "HomeReady") == cond(status, reason) { Ok(()) } else { Err(format!("{:?}", s.status)) }
    })
    .await
}

/// Delete shell `name` and wait until it is gone (its finalizer done).
async fn delete_and_wait(t: &ControllerTest, name: &str) {
    t.shells.delete(name, &DeleteParams::default()).await.unwrap();
    eventually(&format!("shell {name} gone"), TIMEOUT, || async {
        match t.shells.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(s) => Err(format!("still there: {:?}", s.metadata.finalizers)),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
}

/// What a provisioner and the scheduler do to a claim: a volume on `node`, bound.
async fn bind(t: &ControllerTest, claim: &str, node: &str, capacity: &str) {
    let annotate = json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": node}}});
    claims(t).patch(claim, &PatchParams::default(), &Patch::Merge(&annotate)).await.unwrap();
    let status =
        json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": capacity}}});
    claims(t).patch_status(claim, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

#[tokio::test]
async fn a_home_is_a_claim_of_the_shell_mounted_as_home_and_told_in_the_status() {
    let t = ControllerTest::start("ctrl-home").await;
    // No StorageClass exists on this plane, so an unset class stays unset: said so.
    t.shells.create(&PostParams::default(), &shell_with_home("classless", "alice", Home::default())).await.unwrap();
    let s = home_ready(&t, "classless", "False", reasons::HOME_NO_STORAGE_CLASS).await;
    assert_eq!(condition(&s, "Degraded"), cond("True", reasons::HOME_NO_STORAGE_CLASS));

    let home = Home {
        size: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into())),
        storage_class_name: Some("fast".into()),
        on_delete: None,
    };
    let created = t.shells.create(&PostParams::default(), &shell_with_home("notes", "alice", home)).await.unwrap();
    let claim = claim_where(&t, "myownshell-home-notes", "the claim made", |_| Ok(())).await;
    // The shell's by its uid, not by an ownerReference (the garbage collector would take it
    // ahead of the finalizer on a foreground deletion, onDelete: Retain or not).
    assert!(claim.owner_references().is_empty(), "{:?}", claim.metadata);
    assert_eq!(claim.annotations().get("myownshell.io/shell-uid").map(String::as_str), created.meta().uid.as_deref());
    assert_eq!(claim.annotations().get("myownshell.io/owner").map(String::as_str), Some("alice"));
    let spec = claim.spec.clone().unwrap();
    assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
    home_ready(&t, "notes", "False", reasons::HOME_PENDING).await;

    // The pod mounts it as $HOME, seeded first, and the Deployment never has two pods on it.
    let d = t.deployment_where("notes", "the Deployment", |_| Ok(())).await;
    let d = serde_json::to_value(&d).unwrap();
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    let pod = &d["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "home", "persistentVolumeClaim": {"claimName": "myownshell-home-notes"}})),
        "{pod}"
    );
    assert!(
        pod["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "home", "mountPath": "/home/shell"})),
        "{pod}"
    );
    assert!(
        pod["containers"][0]["env"].as_array().unwrap().contains(&json!({"name": "HOME", "value": "/home/shell"})),
        "{pod}"
    );
    assert_eq!(pod["initContainers"][0]["name"], "seed-home");

    // Bound on a node: ready, with its size and node.
    bind(&t, "myownshell-home-notes", "node-a", "1Gi").await;
    let s = home_ready(&t, "notes", "True", reasons::HOME_BOUND).await;
    let status = s.status.unwrap().home.unwrap();
    assert_eq!((status.phase.as_str(), status.node.as_deref()), ("Bound", Some("node-a")));

    // Two pods on one home: refused by the schema, also through the scale subresource.
    let scale = json!({"spec": {"replicas": 2}});
    let refused = t.shells.patch_scale("notes", &PatchParams::default(), &Patch::Merge(&scale)).await.unwrap_err();
    assert!(refused.to_string().contains("must be 0 or 1 when spec.home is set"), "{refused}");

    // Growing on a class that cannot: the apiserver's refusal is the Degraded reason; the claim
    // keeps its size, the shell keeps running.
    let grow = json!({"spec": {"home": {"size": "2Gi"}}});
    t.shells.patch("notes", &PatchParams::default(), &Patch::Merge(&grow)).await.unwrap();
    t.shell_where("notes", "Degraded=True HomeWriteFailed", |s| {
        if condition(s, "Degraded") == cond("True", reasons::HOME_WRITE_FAILED) {
            Ok(())
        } else {
            Err(format!("{:?}", s.status))
        }
    })
    .await;
    let kept = claims(&t).get("myownshell-home-notes").await.unwrap();
    assert_eq!(kept.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0, "1Gi");

    // Deleted with the shell (onDelete defaults to Delete).
    t.shells.delete("notes", &DeleteParams::default()).await.unwrap();
    eventually("the home deleted with its shell", TIMEOUT, || async {
        match claims(&t).get_opt("myownshell-home-notes").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(c) if c.meta().deletion_timestamp.is_some() => Ok(()),
            Some(_) => Err("still there, not being deleted".to_owned()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
}

#[tokio::test]
async fn a_kept_home_goes_to_the_next_shell_of_its_owner_and_a_claim_of_someone_else_is_left_alone() {
    let t = ControllerTest::start("ctrl-home-kept").await;
    let kept =
        Home { storage_class_name: Some("fast".into()), on_delete: Some(HomeOnDelete::Retain), ..Home::default() };
    t.shells.create(&PostParams::default(), &shell_with_home("kept", "alice", kept.clone())).await.unwrap();
    let first = claim_where(&t, "myownshell-home-kept", "the claim made", |_| Ok(())).await;
    delete_and_wait(&t, "kept").await;
    let released = claims(&t).get("myownshell-home-kept").await.unwrap();
    assert_eq!(released.uid(), first.uid(), "the same claim, kept");
    assert!(released.owner_references().is_empty(), "{:?}", released.metadata);
    assert!(!released.annotations().contains_key("myownshell.io/shell-uid"), "{:?}", released.metadata);
    assert_eq!(released.labels().get("myownshell.io/retained-home").map(String::as_str), Some("true"));

    // Another owner's shell of the name does not get it, and runs nothing.
    t.shells.create(&PostParams::default(), &shell_with_home("kept", "mallory", kept.clone())).await.unwrap();
    let s = home_ready(&t, "kept", "False", reasons::HOME_CLAIM_CONFLICT).await;
    assert_eq!(condition(&s, "Degraded"), cond("True", reasons::HOME_CLAIM_CONFLICT));
    let d = t.replicas_become("kept", 0).await;
    assert!(
        !serde_json::to_string(&d.spec).unwrap().contains("myownshell-home-kept"),
        "a claim not its own is never mounted"
    );
    let untouched = claims(&t).get("myownshell-home-kept").await.unwrap();
    assert_eq!(untouched.resource_version(), released.resource_version(), "never written");
    delete_and_wait(&t, "kept").await;
    assert!(claims(&t).get_opt("myownshell-home-kept").await.unwrap().is_some(), "not deleted with a shell it was not");

    // Its owner's next shell of the name takes it up.
    let again = t.shells.create(&PostParams::default(), &shell_with_home("kept", "alice", kept)).await.unwrap();
    let adopted = claim_where(&t, "myownshell-home-kept", "the claim taken up", |c| {
        let shell = c.annotations().get("myownshell.io/shell-uid").cloned();
        if shell.as_deref() == again.meta().uid.as_deref() { Ok(()) } else { Err(format!("{:?}", c.metadata)) }
    })
    .await;
    assert_eq!(adopted.uid(), first.uid());
    assert!(!adopted.labels().contains_key("myownshell.io/retained-home"));
    t.event_with_reason("kept", reasons::HOME_REUSED).await;

    // A user's own claim of a home's name: never taken, written or mounted.
    let foreign: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "myownshell-home-taken"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "fast"}
    }))
    .unwrap();
    let foreign = claims(&t).create(&PostParams::default(), &foreign).await.unwrap();
    t.shells.create(&PostParams::default(), &shell_with_home("taken", "alice", Home::default())).await.unwrap();
    home_ready(&t, "taken", "False", reasons::HOME_CLAIM_CONFLICT).await;
    t.replicas_become("taken", 0).await;
    let after = claims(&t).get("myownshell-home-taken").await.unwrap();
    assert_eq!(after.resource_version(), foreign.resource_version());
}

#[tokio::test]
async fn a_home_grows_where_its_class_allows_and_a_lost_or_deleted_claim_is_told() {
    let t = ControllerTest::start("ctrl-home-grow").await;
    let class = format!("growable-{}", t.ns);
    let storage_class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": class},
        "provisioner": "example.com/none", "allowVolumeExpansion": true, "volumeBindingMode": "WaitForFirstConsumer"});
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(t.client.clone());
    classes.create(&PostParams::default(), &serde_json::from_value(storage_class).unwrap()).await.unwrap();
    let one_gi = k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into());
    let home = Home { size: Some(one_gi), storage_class_name: Some(class.clone()), on_delete: None };
    t.shells.create(&PostParams::default(), &shell_with_home("big", "alice", home)).await.unwrap();
    let claim = "myownshell-home-big";
    claim_where(&t, claim, "the claim made", |_| Ok(())).await;
    // As the volume controller binds it: a volume named, then Bound.
    let volume = json!({"spec": {"volumeName": format!("pv-{}", t.ns)}});
    claims(&t).patch(claim, &PatchParams::default(), &Patch::Merge(&volume)).await.unwrap();
    bind(&t, claim, "node-a", "1Gi").await;
    home_ready(&t, "big", "True", reasons::HOME_BOUND).await;

    // Grown: the claim asks for more; once the volume grew, the pod must restart to finish it.
    let grow = json!({"spec": {"home": {"size": "2Gi"}}});
    t.shells.patch("big", &PatchParams::default(), &Patch::Merge(&grow)).await.unwrap();
    claim_where(&t, claim, "the claim asking for 2Gi", |c| {
        let asked = c.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref());
        let asked = asked.and_then(|r| r.get("storage")).map(|q| q.0.clone());
        if asked.as_deref() == Some("2Gi") { Ok(()) } else { Err(format!("{asked:?}")) }
    })
    .await;
    let grown = json!({"status": {"capacity": {"storage": "2Gi"},
        "conditions": [{"type": "FileSystemResizePending", "status": "True", "lastTransitionTime": "2026-11-28T00:00:00Z"}]}});
    claims(&t).patch_status(claim, &PatchParams::default(), &Patch::Merge(&grown)).await.unwrap();
    let s = home_ready(&t, "big", "True", reasons::HOME_RESIZE_PENDING).await;
    let ready = s.status.unwrap().conditions.into_iter().find(|c| c.type_ == "HomeReady").unwrap();
    assert!(ready.message.contains("kubectl myownshell update big"), "{}", ready.message);

    // Lost: said, and the shell's Degraded reason.
    let lost = json!({"status": {"phase": "Lost"}});
    claims(&t).patch_status(claim, &PatchParams::default(), &Patch::Merge(&lost)).await.unwrap();
    let s = home_ready(&t, "big", "False", reasons::HOME_LOST).await;
    assert_eq!(condition(&s, "Degraded"), cond("True", reasons::HOME_LOST));

    // Deleted by someone while a finalizer holds it: said, and not made again meanwhile.
    let hold = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    claims(&t).patch(claim, &PatchParams::default(), &Patch::Merge(&hold)).await.unwrap();
    claims(&t).delete(claim, &DeleteParams::default()).await.unwrap();
    home_ready(&t, "big", "False", reasons::HOME_TERMINATING).await;
    let release = json!({"metadata": {"finalizers": null}});
    claims(&t).patch(claim, &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
    // Gone: a new, empty home is made.
    claim_where(&t, claim, "a new claim made", |c| {
        if c.meta().deletion_timestamp.is_none() { Ok(()) } else { Err("still the deleted one".to_owned()) }
    })
    .await;
    classes.delete(&class, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_shell_deleted_after_a_long_stop_takes_its_home_and_says_so() {
    let t = ControllerTest::start("ctrl-home-paused").await;
    let mut idle =
        shell_with_home("idle", "alice", Home { storage_class_name: Some("fast".into()), ..Home::default() });
    idle.spec.stopped = Some(true);
    idle.spec.lifetime =
        Some(myownshell_api::Lifetime { delete_paused_after: Some("3s".into()), ..Default::default() });
    t.shells.create(&PostParams::default(), &idle).await.unwrap();
    claim_where(&t, "myownshell-home-idle", "the claim made", |_| Ok(())).await;
    eventually("the shell deleted after its stop, and its home with it", TIMEOUT, || async {
        let shell = t.shells.get_opt("idle").await.map_err(|e| e.to_string())?;
        let claim = claims(&t).get_opt("myownshell-home-idle").await.map_err(|e| e.to_string())?;
        let claim_going = claim.as_ref().is_none_or(|c| c.meta().deletion_timestamp.is_some());
        if shell.is_none() && claim_going {
            Ok(())
        } else {
            Err(format!("shell {}, claim going {claim_going}", shell.is_some()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(t.client.clone(), &t.ns);
    let notes: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reasons::DELETED_AFTER_STOP))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("its home and the files in it go too")),
        "the Event says the files go: {notes:?}"
    );
}

/// A home the previous release made (controlled by its shell through an ownerReference) is
/// moved to the shell's uid and loses the reference, so that a foreground deletion can no longer
/// have the garbage collector take it ahead of the finalizer.
#[tokio::test]
async fn a_home_made_by_the_previous_release_loses_its_owner_reference() {
    let t = ControllerTest::start("ctrl-home-legacy").await;
    let home = Home { storage_class_name: Some("fast".into()), ..Home::default() };
    // The shell without its home first, its claim as the previous release made it, then the home
    // in its spec: the controller finds the claim already there.
    let mut shell = shell_with_home("old", "alice", home.clone());
    (shell.spec.size, shell.spec.home) = (Some(0), None);
    let created = t.shells.create(&PostParams::default(), &shell).await.unwrap();
    let uid = created.meta().uid.clone().unwrap();
    let legacy: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "myownshell-home-old",
                     "labels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": "old",
                                "app.kubernetes.io/managed-by": "myownshell-operator"},
                     "annotations": {"myownshell.io/owner": "alice"},
                     "ownerReferences": [{"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "name": "old",
                                          "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "fast"}
    }))
    .unwrap();
    let made = claims(&t).create(&PostParams::default(), &legacy).await.unwrap();
    let with_home = json!({"spec": {"home": serde_json::to_value(&home).unwrap()}});
    t.shells.patch("old", &PatchParams::default(), &Patch::Merge(with_home)).await.unwrap();
    let moved = claim_where(&t, "myownshell-home-old", "the home moved to the shell's uid", |c| {
        let marked = c.annotations().get("myownshell.io/shell-uid") == Some(&uid);
        if marked && c.owner_references().is_empty() { Ok(()) } else { Err(format!("{:?}", c.metadata)) }
    })
    .await;
    assert_eq!(moved.uid(), made.uid(), "the same claim, files and all");
}

/// A shell with a home, at rest, writes nothing when reconciled again: its desired Deployment
/// (`Recreate`) matches the cached one. The cache once pruned the strategy, and every reconcile
/// of such a shell applied its Deployment again and told an `Updated` Event
/// (`cargo xtask bench controller --homes`).
#[tokio::test]
async fn a_shell_with_a_home_at_rest_writes_nothing() {
    let t = ControllerTest::start("ctrl-home-rest").await;
    let home = Home { storage_class_name: Some("fast".into()), ..Home::default() };
    t.shells.create(&PostParams::default(), &shell_with_home("rest", "alice", home)).await.unwrap();
    home_ready(&t, "rest", "False", reasons::HOME_PENDING).await;
    let settled = t.settled_writes().await;
    let success = "myownshell_controller_reconciles_total{result=\"success\"}";
    let reconciles_before = t.controller.metric(success).await.unwrap();
    let deployment_rv = t.deployments.get("rest").await.unwrap().resource_version();

    // An annotation change is a reconcile that changes nothing the controller owns.
    let poke = Patch::Merge(json!({"metadata": {"annotations": {"poke": "1"}}}));
    t.shells.patch("rest", &PatchParams::default(), &poke).await.unwrap();
    eventually("another successful reconcile", TIMEOUT, || async {
        let now = t.controller.metric(success).await?;
        if now > reconciles_before { Ok(()) } else { Err(format!("reconciles {now}")) }
    })
    .await
    .unwrap();
    assert_eq!(t.settled_writes().await, settled, "a reconcile at rest wrote\n{}", t.controller.log_tail(20));
    assert_eq!(t.deployments.get("rest").await.unwrap().resource_version(), deployment_rv);
    assert!(!t.event_reasons("rest").await.iter().any(|r| r == "Updated"), "an Updated Event at rest");
}

/// A pod the scheduler holds only because the shell's home, of a class that binds at once, is not
/// bound yet is no `Degraded` reason: `HomeReady` tells the wait. The same pod unschedulable for
/// another reason is `Degraded` (which also shows the controller sees the pod).
#[tokio::test]
async fn a_pod_waiting_for_its_home_to_bind_is_not_degraded() {
    use k8s_openapi::api::core::v1::Pod;
    use myownshell_tests::shell_pods;

    let t = ControllerTest::start("ctrl-home-wait").await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.ns);
    let home = Home { storage_class_name: Some("fast".into()), ..Home::default() };
    t.shells.create(&PostParams::default(), &shell_with_home("wait", "alice", home)).await.unwrap();
    home_ready(&t, "wait", "False", reasons::HOME_PENDING).await;
    t.replicas_become("wait", 1).await;
    let degraded = |status: &'static str, reason: &'static str| {
        move |s: &MyOwnShell| {
            let d = condition(s, "Degraded");
            if d == cond(status, reason) { Ok(()) } else { Err(format!("{d:?}")) }
        }
    };

    let full = "0/3 nodes are available: 3 Too many pods. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
    let pod = shell_pods::create(&pods, "wait", "h1", None, shell_pods::unschedulable(full)).await.unwrap();
    t.shell_where("wait", "Degraded: no room", degraded("True", "Unschedulable")).await;

    let waits = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
    shell_pods::report(&pods, &pod, shell_pods::unschedulable(waits)).await.unwrap();
    let s = t.shell_where("wait", "not Degraded while the home binds", degraded("False", "AsExpected")).await;
    assert_eq!(condition(&s, "HomeReady"), cond("False", reasons::HOME_PENDING));
    // Bound, and the scheduler not at the pod again yet: still only the wait.
    bind(&t, "myownshell-home-wait", "node-a", "1Gi").await;
    let s = home_ready(&t, "wait", "True", reasons::HOME_BOUND).await;
    assert_eq!(condition(&s, "Degraded"), cond("False", "AsExpected"), "{:?}", s.status);
}
