//! What the controller may write: never a Deployment that is not its own (one in the way is a
//! `DeploymentConflict`, left untouched and undeleted), never one that would select another
//! Deployment's pods (a `SelectorConflict`), always its own, even one that lost its
//! ownerReference (repaired, and deleted with its `MyOwnShell`). And the status is the
//! controller's: a false one written by someone else is put right.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use myownshell_api::names;
use myownshell_api::names::reasons;
use myownshell_envtest::eventually;
use myownshell_tests::controller::{ControllerProcess, ShellNamespace, sized_shell};
use myownshell_tests::controller::{ControllerTest, TIMEOUT, cond, condition};
use serde_json::json;

/// A Deployment named `name` that someone else made: our selector labels (so it would match
/// the shell Deployment's selector), `labels` on the object, and a container of its own.
fn foreign_deployment(name: &str, labels: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": name}},
                "spec": {"containers": [{"name": "app", "image": "someone/app:1"}]},
            },
        },
    }))
    .unwrap()
}

/// Wait until the `MyOwnShell` `name` is `Degraded=True` with `reason`, with a message naming
/// the Deployment `blocker`.
async fn degraded_by(t: &ControllerTest, name: &str, reason: &str, blocker: &str) {
    let s = t
        .shell_where(name, &format!("Degraded=True {reason}"), |s| {
            if condition(s, "Degraded") == cond("True", reason) { Ok(()) } else { Err(format!("{:?}", s.status)) }
        })
        .await;
    let degraded = s.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Degraded").unwrap();
    assert!(degraded.message.contains(&format!("Deployment {blocker} ")), "names {blocker}: {}", degraded.message);
}

/// Wait for `Degraded=True` with reason `DeploymentConflict`, whose message names `name`.
async fn degraded_by_conflict(t: &ControllerTest, name: &str) {
    degraded_by(t, name, reasons::DEPLOYMENT_CONFLICT, name).await;
}

#[tokio::test]
async fn a_foreign_deployment_in_the_way_is_never_written_or_deleted() {
    let t = ControllerTest::start("ctrl-foreign").await;
    // The worst case: it even carries all of our labels, so it sits in the controller's cache.
    let ours = json!({
        "app.kubernetes.io/name": "myownshell",
        "app.kubernetes.io/instance": "taken",
        "app.kubernetes.io/managed-by": "myownshell-operator",
    });
    let before = t.deployments.create(&PostParams::default(), &foreign_deployment("taken", ours)).await.unwrap();
    t.shells.create(&PostParams::default(), &sized_shell("taken", 1)).await.unwrap();

    degraded_by_conflict(&t, "taken").await;
    t.event_with_reason("taken", reasons::DEPLOYMENT_CONFLICT).await;
    let after = t.deployments.get("taken").await.unwrap();
    assert_eq!(after.resource_version(), before.resource_version(), "not written: {:?}", after.metadata);
    assert!(after.owner_references().is_empty());
    let containers: Vec<String> = after
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(containers, ["app"]);

    // Deleting the MyOwnShell finishes without deleting what is not its own.
    t.shells.delete("taken", &DeleteParams::default()).await.unwrap();
    eventually("the MyOwnShell gone", TIMEOUT, || async {
        match t.shells.get_opt("taken").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(s) => Err(format!("still there: finalizers {:?}", s.finalizers())),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    let kept = t.deployments.get("taken").await.unwrap();
    assert_eq!(kept.resource_version(), before.resource_version(), "the foreign Deployment is untouched");
}

#[tokio::test]
async fn a_name_whose_instance_label_another_deployment_selects_on_gets_no_deployment() {
    let t = ControllerTest::start("ctrl-selector").await;
    // A 63-character name is its own instance label; an earlier release gave a longer name that
    // very label (52 characters, `-`, 10 hex), and such a Deployment keeps its selector for good.
    let name = format!("collide-{}", "a".repeat(55));
    assert_eq!(name.len(), 63);
    let labels = json!({
        "app.kubernetes.io/name": "myownshell",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "myownshell-operator",
    });
    let mut older = foreign_deployment("older-shell", labels.clone());
    let spec = older.spec.as_mut().unwrap();
    spec.selector.match_labels = Some(serde_json::from_value(labels.clone()).unwrap());
    spec.template.metadata = Some(serde_json::from_value(json!({"labels": labels})).unwrap());
    let older = t.deployments.create(&PostParams::default(), &older).await.unwrap();
    t.shells.create(&PostParams::default(), &sized_shell(&name, 1)).await.unwrap();

    degraded_by(&t, &name, reasons::SELECTOR_CONFLICT, "older-shell").await;
    t.event_with_reason(&name, reasons::SELECTOR_CONFLICT).await;
    assert!(t.deployments.get_opt(&name).await.unwrap().is_none(), "a Deployment selecting the same pods was made");
    let kept = t.deployments.get("older-shell").await.unwrap();
    assert_eq!(kept.resource_version(), older.resource_version(), "the holder is untouched");

    // Once the holder is gone, the shell gets its Deployment.
    t.deployments.delete("older-shell", &DeleteParams::default()).await.unwrap();
    t.replicas_become(&name, 1).await;
    t.shell_where(&name, "Degraded=False", |s| {
        if condition(s, "Degraded") == cond("False", reasons::AS_EXPECTED) {
            Ok(())
        } else {
            Err(format!("{:?}", s.status))
        }
    })
    .await;
}

#[tokio::test]
async fn a_conflict_resolves_by_itself_when_the_foreign_deployment_goes() {
    let t = ControllerTest::start("ctrl-unblock").await;
    // No labels at all: outside the controller's Deployment watch, found by a live read.
    let foreign =
        t.deployments.create(&PostParams::default(), &foreign_deployment("blocked", json!({}))).await.unwrap();
    t.shells.create(&PostParams::default(), &sized_shell("blocked", 2)).await.unwrap();
    degraded_by_conflict(&t, "blocked").await;
    assert_eq!(t.deployments.get("blocked").await.unwrap().resource_version(), foreign.resource_version());

    t.deployments.delete("blocked", &DeleteParams::default()).await.unwrap();
    let shell = t.shells.get("blocked").await.unwrap();
    t.deployment_where("blocked", "our own Deployment in its place", |d| {
        let owned = d.owner_references().iter().any(|o| Some(&o.uid) == shell.meta().uid.as_ref());
        if owned && d.spec.as_ref().and_then(|s| s.replicas) == Some(2) {
            Ok(())
        } else {
            Err(format!("owners {:?}", d.owner_references()))
        }
    })
    .await;
    t.shell_where("blocked", "Degraded=False", |s| {
        if condition(s, "Degraded") == cond("False", reasons::AS_EXPECTED) {
            Ok(())
        } else {
            Err(format!("{:?}", s.status))
        }
    })
    .await;
}

#[tokio::test]
async fn a_deployment_that_lost_its_owner_reference_is_repaired_and_deleted_with_its_shell() {
    let t = ControllerTest::start("ctrl-unowned").await;
    let created = t.shells.create(&PostParams::default(), &sized_shell("adrift", 2)).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let deployment = t.replicas_become("adrift", 2).await;
    t.shell_where("adrift", "the Deployment's uid recorded", |s| {
        let recorded = s.status.as_ref().and_then(|st| st.deployment_uid.clone());
        if recorded == deployment.metadata.uid { Ok(()) } else { Err(format!("recorded {recorded:?}")) }
    })
    .await;
    let owned_again = |d: &Deployment| {
        let owned = d.owner_references().iter().any(|o| o.uid == uid && o.controller == Some(true));
        let replicas = d.spec.as_ref().and_then(|s| s.replicas);
        let labelled = d.labels().get(names::LABEL_MANAGED_BY).is_some();
        if owned && replicas == Some(2) && labelled {
            Ok(())
        } else {
            Err(format!("owned {owned}, replicas {replicas:?}, labels {:?}", d.labels()))
        }
    };

    // Cut loose: no ownerReference, and drift on top.
    let by_hand = PatchParams { field_manager: Some("someone".into()), ..PatchParams::default() };
    let cut = json!([
        {"op": "remove", "path": "/metadata/ownerReferences"},
        {"op": "replace", "path": "/spec/replicas", "value": 9},
    ]);
    t.deployments.patch("adrift", &by_hand, &Patch::Json::<()>(serde_json::from_value(cut).unwrap())).await.unwrap();
    t.deployment_where("adrift", "the reference restored and the drift reverted", owned_again).await;

    // Cut loose and unlabelled: gone from the controller's watch, found again by a live read.
    let cut = json!([
        {"op": "remove", "path": "/metadata/ownerReferences"},
        {"op": "remove", "path": "/metadata/labels"},
        {"op": "replace", "path": "/spec/replicas", "value": 7},
    ]);
    t.deployments.patch("adrift", &by_hand, &Patch::Json::<()>(serde_json::from_value(cut).unwrap())).await.unwrap();
    t.deployment_where("adrift", "reference, labels and replicas restored", owned_again).await;

    // Cut loose, then the MyOwnShell is deleted: its Deployment is not left behind.
    let cut = json!([{"op": "remove", "path": "/metadata/ownerReferences"}]);
    t.deployments.patch("adrift", &by_hand, &Patch::Json::<()>(serde_json::from_value(cut).unwrap())).await.unwrap();
    t.shells.delete("adrift", &DeleteParams::default()).await.unwrap();
    eventually("Deployment and MyOwnShell gone", TIMEOUT, || async {
        let d = t.deployments.get_opt("adrift").await.map_err(|e| e.to_string())?;
        let s = t.shells.get_opt("adrift").await.map_err(|e| e.to_string())?;
        match (d, s) {
            (None, None) => Ok(()),
            (d, s) => Err(format!("deployment present: {}, shell present: {}", d.is_some(), s.is_some())),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
}

#[tokio::test]
async fn a_false_status_written_by_someone_else_is_put_right() {
    let t = ControllerTest::start("ctrl-status").await;
    t.shells.create(&PostParams::default(), &sized_shell("truth", 1)).await.unwrap();
    t.replicas_become("truth", 1).await;
    let truth = t
        .shell_where("truth", "a status with a selector", |s| {
            if s.status.as_ref().is_some_and(|st| st.selector.is_some()) {
                Ok(())
            } else {
                Err(format!("{:?}", s.status))
            }
        })
        .await
        .status
        .unwrap();

    let lie = json!({"status": {"readyReplicas": 5, "replicas": 5, "selector": "app=other"}});
    t.shells.patch_status("truth", &PatchParams::default(), &Patch::Merge(lie)).await.unwrap();
    t.shell_where("truth", "the status written back", |s| {
        let st = s.status.as_ref().ok_or("no status")?;
        if st.ready_replicas == truth.ready_replicas && st.replicas == truth.replicas && st.selector == truth.selector {
            Ok(())
        } else {
            Err(format!("{st:?}"))
        }
    })
    .await;
}

#[tokio::test]
async fn deleting_many_shells_counts_no_failed_reconcile() {
    let t = ControllerTest::start("ctrl-mass-delete").await;
    // As many as the delete that first showed the race (89 of 200 finalizer removals failed).
    const N: usize = 200;
    let names: Vec<String> = (0..N).map(|i| format!("m{i}")).collect();
    for name in &names {
        t.shells.create(&PostParams::default(), &sized_shell(name, 1)).await.unwrap();
    }
    for name in &names {
        t.replicas_become(name, 1).await;
    }
    for name in &names {
        t.shells.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("every MyOwnShell gone", TIMEOUT, || async {
        let left = t.shells.list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
        if left == 0 { Ok(()) } else { Err(format!("{left} left")) }
    })
    .await
    .unwrap();
    // A finalizer removal racing the object's disappearance is success, not a failure.
    t.settled_writes().await;
    for result in ["error", "finalizer"] {
        let failed = t
            .controller
            .metric(&format!("myownshell_controller_reconciles_total{{result=\"{result}\"}}"))
            .await
            .unwrap();
        assert_eq!(failed, 0.0, "reconciles counted as {result}\n{}", t.controller.log_tail(40));
    }
    let log = t.controller.log_tail(10_000);
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && (l.contains("finalizer") || l.contains("reconcile failed")))
        .collect();
    assert!(warnings.is_empty(), "{} warnings, e.g. {:?}", warnings.len(), warnings.first());
}

#[tokio::test]
async fn a_deployment_another_controller_took_is_let_go_and_its_uid_forgotten() {
    let t = ControllerTest::start("ctrl-taken").await;
    t.shells.create(&PostParams::default(), &sized_shell("taken-over", 1)).await.unwrap();
    let ours = t.replicas_become("taken-over", 1).await;
    t.shell_where("taken-over", "the Deployment's uid recorded", |s| {
        let recorded = s.status.as_ref().and_then(|st| st.deployment_uid.clone());
        if recorded == ours.metadata.uid { Ok(()) } else { Err(format!("recorded {recorded:?}")) }
    })
    .await;

    // Another controller now controls it: it is no longer ours to write, nor proof of anything.
    let other = json!([{"op": "replace", "path": "/metadata/ownerReferences", "value": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "someone", "uid": "0b1e7c1e-0000-4000-8000-0000000000aa",
        "controller": true,
    }]}]);
    let by_hand = PatchParams { field_manager: Some("someone".into()), ..PatchParams::default() };
    let taken = t
        .deployments
        .patch("taken-over", &by_hand, &Patch::Json::<()>(serde_json::from_value(other).unwrap()))
        .await
        .unwrap();
    degraded_by_conflict(&t, "taken-over").await;
    t.shell_where("taken-over", "the recorded uid cleared", |s| {
        let recorded = s.status.as_ref().and_then(|st| st.deployment_uid.clone());
        if recorded.is_none() { Ok(()) } else { Err(format!("still recorded {recorded:?}")) }
    })
    .await;
    let after = t.deployments.get("taken-over").await.unwrap();
    assert_eq!(after.resource_version(), taken.resource_version(), "not written after it was taken");
}

/// Before shortened instance labels took a `_`, a long name's label had a `-` before the hash.
/// A Deployment's selector cannot change, so such a Deployment must keep its selector, not
/// fail every apply after an upgrade.
#[tokio::test]
async fn a_deployment_made_with_the_old_shortened_label_keeps_working() {
    let ShellNamespace { cp, ns, shells, deployments, .. } = ShellNamespace::create("ctrl-legacy").await.unwrap();
    let name = format!("team-{}", "x".repeat(80));
    let created = shells.create(&PostParams::default(), &sized_shell(&name, 2)).await.unwrap();
    // What the previous controller made: its label layout, its ownerReference.
    let legacy = format!("{}-{}", &name[..52], "0a1b2c3d4e");
    let selector = json!({"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": legacy});
    let mut labels = selector.clone();
    labels["app.kubernetes.io/managed-by"] = json!("myownshell-operator");
    let old: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "ownerReferences": [{
            "apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "name": name,
            "uid": created.metadata.uid, "controller": true, "blockOwnerDeletion": true,
        }]},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "shell", "image": "busybox:1.36"}]}},
        },
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &old).await.unwrap();

    let controller = ControllerProcess::start(cp, "ctrl-legacy", &["--namespace", &ns]).unwrap();
    let deployment = eventually("the old Deployment brought to the spec", TIMEOUT, || async {
        let d = deployments.get(&name).await.map_err(|e| e.to_string())?;
        let replicas = d.spec.as_ref().and_then(|s| s.replicas);
        if replicas == Some(2) { Ok(d) } else { Err(format!("replicas {replicas:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));
    assert_eq!(deployment.spec.unwrap().selector.match_labels.unwrap()["app.kubernetes.io/instance"], legacy);
    let shell = eventually("status with the Deployment's own selector", TIMEOUT, || async {
        let s = shells.get(&name).await.map_err(|e| e.to_string())?;
        let ok = condition(&s, "Degraded") == cond("False", reasons::AS_EXPECTED)
            && s.status.as_ref().and_then(|st| st.selector.as_deref()).is_some_and(|sel| sel.contains(&legacy));
        if ok { Ok(s) } else { Err(format!("{:?}", s.status)) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));
    assert_eq!(
        shell.status.unwrap().selector.as_deref(),
        Some(format!("app.kubernetes.io/instance={legacy},app.kubernetes.io/name=myownshell").as_str())
    );
}

/// The standing sweep: Deployments, ReplicaSets and pods labelled as a shell's (and as the
/// operator's) whose MyOwnShell is gone are deleted, on an interval and not only on the cleanup
/// path; a live shell's are kept, and so is what is labelled as another manager's. (This plane
/// runs no garbage collector, so nothing else would remove them.)
#[tokio::test]
async fn what_outlives_its_shell_is_swept() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;

    let ShellNamespace { cp, client, ns, shells, deployments } = ShellNamespace::create("ctrl-sweep").await.unwrap();
    shells.create(&PostParams::default(), &sized_shell("kept", 1)).await.unwrap();
    let (replica_sets, pods): (Api<ReplicaSet>, Api<Pod>) =
        (Api::namespaced(client.clone(), &ns), Api::namespaced(client.clone(), &ns));
    let labels = |instance: &str, manager: &str| {
        json!({"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": instance,
               "app.kubernetes.io/managed-by": manager})
    };
    let template = |instance: &str| {
        json!({"metadata": {"labels": labels(instance, "myownshell-operator")},
               "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}})
    };
    let selector = |instance: &str| json!({"matchLabels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": instance}});
    let pod = |name: &str, instance: &str, manager: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels(instance, manager)},
            "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}}))
        .unwrap()
    };
    // What a shell `gone` left behind (made as an administrator would have orphaned them).
    let stray_deployment: Deployment = serde_json::from_value(json!({"metadata": {"name": "gone",
        "labels": labels("gone", "myownshell-operator")},
        "spec": {"replicas": 0, "selector": selector("gone"), "template": template("gone")}}))
    .unwrap();
    deployments.create(&PostParams::default(), &stray_deployment).await.unwrap();
    let stray_rs: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": "gone-7d9f8c6b4",
        "labels": labels("gone", "myownshell-operator")},
        "spec": {"replicas": 0, "selector": selector("gone"), "template": template("gone")}}))
    .unwrap();
    replica_sets.create(&PostParams::default(), &stray_rs).await.unwrap();
    pods.create(&PostParams::default(), &pod("gone-7d9f8c6b4-x2x4z", "gone", "myownshell-operator")).await.unwrap();
    // A live shell's pod, and a pod another manager labels alike (the operator's own, say).
    pods.create(&PostParams::default(), &pod("kept-7d9f8c6b4-b2c4d", "kept", "myownshell-operator")).await.unwrap();
    pods.create(&PostParams::default(), &pod("helm-app", "gone", "Helm")).await.unwrap();

    let controller = ControllerProcess::start(cp, "ctrl-sweep", &["--namespace", &ns, "--sweep-interval=1s"]).unwrap();
    let left = eventually("the strays of shell gone deleted", TIMEOUT, || async {
        let d = deployments.get_opt("gone").await.map_err(|e| e.to_string())?;
        let r = replica_sets.get_opt("gone-7d9f8c6b4").await.map_err(|e| e.to_string())?;
        let p = pods.get_opt("gone-7d9f8c6b4-x2x4z").await.map_err(|e| e.to_string())?;
        let left: Vec<&str> = [("Deployment", d.is_some()), ("ReplicaSet", r.is_some()), ("pod", p.is_some())]
            .iter()
            .filter(|(_, there)| *there)
            .map(|(what, _)| *what)
            .collect();
        if left.is_empty() { Ok(()) } else { Err(format!("still there: {left:?}")) }
    })
    .await;
    left.unwrap_or_else(|e| panic!("{e}\n--- controller log ---\n{}", controller.log_tail(30)));
    // Two sweeps later, the live shell's objects and the other manager's pod are all still there.
    let sweeps = |text: String| {
        myownshell_tests::controller::metric_value(&text, "myownshell_controller_writes_total{kind=\"sweep_delete\"}")
    };
    assert_eq!(sweeps(controller.metrics().await.unwrap()), Some(3.0));
    eventually("the kept shell's Deployment", TIMEOUT, || async {
        deployments.get_opt("kept").await.map_err(|e| e.to_string())?.map(drop).ok_or_else(|| "not yet".to_owned())
    })
    .await
    .unwrap();
    // Proving that nothing more goes takes time: three more sweeps (1 s apart) are let run.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    for name in ["kept-7d9f8c6b4-b2c4d", "helm-app"] {
        assert!(pods.get_opt(name).await.unwrap().is_some(), "{name} was swept");
    }
    assert!(deployments.get_opt("kept").await.unwrap().is_some(), "the kept shell's Deployment was swept");
    assert_eq!(sweeps(controller.metrics().await.unwrap()), Some(3.0), "nothing else was deleted");
}
