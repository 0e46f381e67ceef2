//! The controller binary against a real kube-apiserver: Deployment, resize, drift, status,
//! deletion, idempotence, long names, failures, probes and metrics. Each test runs its own
//! controller process limited to its own namespace (`--namespace`).

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use myownshell_api::names::reasons;
use myownshell_api::{MyOwnShell, MyOwnShellSpec, names};
use myownshell_envtest::{create_namespace, eventually};
use myownshell_tests::controller::{ControllerTest, TIMEOUT, cond, condition, report_ready};
use serde_json::json;

async fn setup(prefix: &str) -> ControllerTest {
    ControllerTest::start(prefix).await
}

fn shell(name: &str, spec: MyOwnShellSpec) -> MyOwnShell {
    MyOwnShell::new(name, spec)
}

fn sized(size: i32) -> MyOwnShellSpec {
    MyOwnShellSpec { size: Some(size), ..MyOwnShellSpec::default() }
}

#[tokio::test]
async fn creating_a_shell_makes_exactly_the_expected_deployment() {
    let t = setup("ctrl-create").await;
    let created = t.shells.create(&PostParams::default(), &shell("alpha", sized(2))).await.unwrap();
    let d = t.replicas_become("alpha", 2).await;
    let d = serde_json::to_value(&d).unwrap();

    let labels = json!({
        "app.kubernetes.io/name": "myownshell",
        "app.kubernetes.io/instance": "alpha",
        "app.kubernetes.io/managed-by": "myownshell-operator",
    });
    assert_eq!(d["metadata"]["labels"], labels);
    assert_eq!(
        d["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "myownshell.io/v1alpha1",
            "kind": "MyOwnShell",
            "name": "alpha",
            "uid": created.metadata.uid.clone().unwrap(),
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    );
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": "alpha"}})
    );
    assert_eq!(d["spec"]["template"]["metadata"]["labels"], labels);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], json!(false));
    assert_eq!(pod["enableServiceLinks"], json!(false));
    assert_eq!(pod["terminationGracePeriodSeconds"], json!(5));
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "{containers:?}");
    let c = &containers[0];
    assert_eq!(c["name"], json!("shell"));
    assert_eq!(c["image"], json!(myownshell_api::defaults::IMAGE));
    assert_eq!(c["command"], json!(myownshell_api::defaults::command()));
    assert_eq!(
        c["resources"],
        json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}})
    );
    assert_eq!(
        c["securityContext"],
        json!({
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        })
    );
    // Only the controller's field manager applied it.
    let managers: Vec<String> = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}/{}", m["manager"].as_str().unwrap_or(""), m["operation"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(managers, vec![format!("{}/Apply", names::FIELD_MANAGER)]);

    // The controller added its finalizer itself (no webhook here) and reported status.
    let s = t
        .shell_where("alpha", "status with selector and conditions", |s| {
            let st = s.status.as_ref().ok_or("no status")?;
            if st.selector.is_some() && st.conditions.len() == 4 { Ok(()) } else { Err(format!("{st:?}")) }
        })
        .await;
    assert_eq!(s.finalizers(), [names::FINALIZER.to_owned()]);
    let st = s.status.clone().unwrap();
    assert_eq!(st.selector.as_deref(), Some("app.kubernetes.io/instance=alpha,app.kubernetes.io/name=myownshell"));
    assert_eq!(st.observed_generation, s.metadata.generation);
    assert_eq!(condition(&s, "Available"), cond("False", reasons::SHELLS_NOT_READY));
    assert_eq!(condition(&s, "Progressing"), cond("True", reasons::ROLLING_OUT));
    assert_eq!(condition(&s, "Degraded"), cond("False", reasons::AS_EXPECTED));
    assert_eq!(condition(&s, "UpToDate"), cond("True", reasons::TEMPLATE_CURRENT));
    t.event_with_reason("alpha", "Created").await;
}

#[tokio::test]
async fn resizing_by_spec_and_by_kubectl_scale() {
    let t = setup("ctrl-resize").await;
    t.shells.create(&PostParams::default(), &shell("beta", sized(1))).await.unwrap();
    t.replicas_become("beta", 1).await;

    t.shells.patch("beta", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 3}}))).await.unwrap();
    t.replicas_become("beta", 3).await;
    t.event_with_reason("beta", "Scaled").await;

    let out = t.cp.kubectl().run(&["scale", "mos/beta", "-n", &t.ns, "--replicas=5"]).await.unwrap().ok().unwrap();
    assert!(out.contains("scaled"), "{out}");
    t.replicas_become("beta", 5).await;
    // The scale subresource reads status.replicas and status.selector from us.
    let scale = t.shells.get_scale("beta").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("app.kubernetes.io/instance=beta,app.kubernetes.io/name=myownshell")
    );

    // Paused: size 0 is a valid size, not "unset".
    t.shells.patch("beta", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 0}}))).await.unwrap();
    t.replicas_become("beta", 0).await;
    t.shell_where("beta", "Available=False/Paused", |s| {
        if condition(s, "Available") == cond("False", reasons::PAUSED) {
            Ok(())
        } else {
            Err(format!("{:?}", s.status))
        }
    })
    .await;
}

#[tokio::test]
async fn hand_edits_of_the_deployment_are_reverted() {
    let t = setup("ctrl-drift").await;
    t.shells.create(&PostParams::default(), &shell("gamma", sized(2))).await.unwrap();
    t.replicas_become("gamma", 2).await;

    let by_hand = PatchParams { field_manager: Some("someone".into()), ..PatchParams::default() };
    t.deployments.patch("gamma", &by_hand, &Patch::Merge(json!({"spec": {"replicas": 9}}))).await.unwrap();
    t.replicas_become("gamma", 2).await;

    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "shell", "image": "evil:latest"}]}}}});
    t.deployments.patch("gamma", &by_hand, &Patch::Strategic(image)).await.unwrap();
    t.deployment_where("gamma", "the image to be reverted", |d| {
        let v = serde_json::to_value(d).unwrap();
        let image = &v["spec"]["template"]["spec"]["containers"][0]["image"];
        if *image == json!(myownshell_api::defaults::IMAGE) { Ok(()) } else { Err(format!("image {image}")) }
    })
    .await;

    // Deleted by hand: created again.
    let uid = t.deployments.get("gamma").await.unwrap().metadata.uid;
    t.deployments.delete("gamma", &DeleteParams::default()).await.unwrap();
    t.deployment_where("gamma", "a new Deployment", |d| {
        if d.metadata.uid != uid { Ok(()) } else { Err("still the old one".into()) }
    })
    .await;
}

#[tokio::test]
async fn status_and_conditions_follow_the_deployment() {
    let t = setup("ctrl-status").await;
    t.shells.create(&PostParams::default(), &shell("delta", sized(2))).await.unwrap();
    t.replicas_become("delta", 2).await;
    let before = t
        .shell_where("delta", "Available=False", |s| {
            if condition(s, "Available") == cond("False", reasons::SHELLS_NOT_READY) {
                Ok(())
            } else {
                Err(format!("{:?}", s.status))
            }
        })
        .await;
    let available_since = |s: &MyOwnShell| {
        s.status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.type_ == "Available")
            .unwrap()
            .last_transition_time
            .clone()
    };
    let degraded_since = |s: &MyOwnShell| {
        s.status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .unwrap()
            .last_transition_time
            .clone()
    };

    report_ready(&t.deployments, "delta", 1).await;
    t.shell_where("delta", "readyReplicas = 1", |s| {
        let st = s.status.as_ref().ok_or("no status")?;
        if st.ready_replicas == 1 && st.replicas == 2 { Ok(()) } else { Err(format!("{st:?}")) }
    })
    .await;

    // The apiserver stores times with second precision: make the transition land later.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    report_ready(&t.deployments, "delta", 2).await;
    let after = t
        .shell_where("delta", "Available=True, Progressing=False", |s| {
            let ok = condition(s, "Available") == cond("True", reasons::SHELLS_READY)
                && condition(s, "Progressing") == cond("False", reasons::ROLLOUT_COMPLETE)
                && s.status.as_ref().is_some_and(|st| st.ready_replicas == 2);
            if ok { Ok(()) } else { Err(format!("{:?}", s.status)) }
        })
        .await;
    assert_ne!(available_since(&after), available_since(&before), "Available flipped: its lastTransitionTime moves");
    assert_eq!(degraded_since(&after), degraded_since(&before), "Degraded did not flip: its lastTransitionTime stays");

    let table = t.cp.kubectl().run(&["get", "mos", "delta", "-n", &t.ns]).await.unwrap().ok().unwrap();
    let row: Vec<&str> = table.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row[..4], ["delta", "2", "2", "True"], "{table}");
}

#[tokio::test]
async fn deleting_a_shell_deletes_its_deployment_then_the_shell() {
    let t = setup("ctrl-delete").await;
    t.shells.create(&PostParams::default(), &shell("eps", sized(1))).await.unwrap();
    t.replicas_become("eps", 1).await;
    t.shell_where("eps", "the finalizer", |s| {
        if s.finalizers().iter().any(|f| f == names::FINALIZER) { Ok(()) } else { Err(format!("{:?}", s.finalizers())) }
    })
    .await;

    t.shells.delete("eps", &DeleteParams::default()).await.unwrap();
    // Deleting twice is harmless.
    let _ = t.shells.delete("eps", &DeleteParams::default()).await;
    eventually("Deployment and MyOwnShell gone", TIMEOUT, || async {
        let d = t.deployments.get_opt("eps").await.map_err(|e| e.to_string())?;
        let s = t.shells.get_opt("eps").await.map_err(|e| e.to_string())?;
        match (d, s) {
            (None, None) => Ok(()),
            (Some(_), None) => Err("the MyOwnShell went before its Deployment".to_owned()),
            (d, s) => Err(format!("deployment present: {}, shell present: {}", d.is_some(), s.is_some())),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    t.event_with_reason("eps", "Deleted").await;
}

#[tokio::test]
async fn a_reconcile_with_nothing_changed_writes_nothing() {
    let t = setup("ctrl-idle").await;
    t.shells.create(&PostParams::default(), &shell("zeta", sized(2))).await.unwrap();
    t.replicas_become("zeta", 2).await;
    report_ready(&t.deployments, "zeta", 2).await;
    t.shell_where("zeta", "Available=True", |s| {
        if condition(s, "Available") == cond("True", reasons::SHELLS_READY) {
            Ok(())
        } else {
            Err(format!("{:?}", s.status))
        }
    })
    .await;

    // Let the controller settle: nothing in flight and the write counters stop moving.
    let settled = t.settled_writes().await;
    let success = "myownshell_controller_reconciles_total{result=\"success\"}";
    let reconciles_before = t.controller.metric(success).await.unwrap();
    let deployment_rv = t.deployments.get("zeta").await.unwrap().resource_version();
    let status_before = t.shells.get("zeta").await.unwrap().status;

    // An annotation change is a watch event (a reconcile) but changes nothing the controller owns.
    t.shells
        .patch("zeta", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"poke": "1"}}})))
        .await
        .unwrap();
    eventually("another successful reconcile", TIMEOUT, || async {
        let now = t.controller.metric(success).await?;
        if now > reconciles_before { Ok(()) } else { Err(format!("reconciles {now}")) }
    })
    .await
    .unwrap();

    assert_eq!(t.writes().await.unwrap(), settled, "no write requests were sent");
    assert_eq!(t.deployments.get("zeta").await.unwrap().resource_version(), deployment_rv);
    assert_eq!(t.shells.get("zeta").await.unwrap().status, status_before);
}

#[tokio::test]
async fn names_too_long_for_a_label_still_work() {
    let t = setup("ctrl-long").await;
    let name = format!("team-{}", "x".repeat(90));
    t.shells.create(&PostParams::default(), &shell(&name, sized(1))).await.unwrap();
    let d = t.replicas_become(&name, 1).await;
    let instance = d.labels().get("app.kubernetes.io/instance").cloned().unwrap();
    assert_eq!(instance.len(), 63, "{instance}");
    assert!(name.starts_with(&instance[..52]), "{instance}");
    let s = t
        .shell_where(&name, "status.selector", |s| {
            if s.status.as_ref().is_some_and(|st| st.selector.is_some()) { Ok(()) } else { Err("no selector".into()) }
        })
        .await;
    assert_eq!(
        s.status.unwrap().selector,
        Some(format!("app.kubernetes.io/instance={instance},app.kubernetes.io/name=myownshell"))
    );
}

#[tokio::test]
async fn a_deployment_the_apiserver_rejects_shows_as_degraded() {
    let t = setup("ctrl-degraded").await;
    // Requests above limits: the webhook would deny it, but it may not be installed, and then
    // the apiserver refuses the Deployment.
    let spec: MyOwnShellSpec = serde_json::from_value(json!({
        "size": 1,
        "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
    }))
    .unwrap();
    t.shells.create(&PostParams::default(), &shell("eta", spec)).await.unwrap();
    let s = t
        .shell_where("eta", "Degraded=True", |s| {
            if condition(s, "Degraded") == cond("True", reasons::DEPLOYMENT_APPLY_FAILED) {
                Ok(())
            } else {
                Err(format!("{:?}", s.status))
            }
        })
        .await;
    let message = s.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Degraded").unwrap().message;
    assert!(
        message.contains("Deployment eta") && message.contains("must be less than or equal to cpu limit"),
        "{message}"
    );
    t.event_with_reason("eta", reasons::RECONCILE_FAILED).await;
    assert!(t.deployments.get_opt("eta").await.unwrap().is_none());

    // Fixed: the next reconcile succeeds and Degraded clears.
    t.shells
        .patch("eta", &PatchParams::default(), &Patch::Merge(json!({"spec": {"resources": {"limits": {"cpu": "2"}}}})))
        .await
        .unwrap();
    t.replicas_become("eta", 1).await;
    t.shell_where("eta", "Degraded=False", |s| {
        if condition(s, "Degraded") == cond("False", reasons::AS_EXPECTED) {
            Ok(())
        } else {
            Err(format!("{:?}", s.status))
        }
    })
    .await;
}

#[tokio::test]
async fn probes_and_metrics_answer() {
    let t = setup("ctrl-probes").await;
    for path in ["/healthz", "/readyz"] {
        eventually(&format!("{path} 200"), TIMEOUT, || async {
            match t.controller.probe(path).await? {
                (200, body) if body == "ok" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
        .unwrap();
    }
    t.shells.create(&PostParams::default(), &shell("theta", sized(1))).await.unwrap();
    t.replicas_become("theta", 1).await;
    let text = eventually("reconcile metrics", TIMEOUT, || async {
        let text = t.controller.metrics().await?;
        if text.contains("myownshell_controller_reconciles_total{result=\"success\"}") { Ok(text) } else { Err(text) }
    })
    .await
    .unwrap();
    for series in [
        "myownshell_controller_reconcile_duration_seconds_bucket",
        "myownshell_controller_managed_objects",
        "myownshell_controller_leader 1",
        "myownshell_controller_reconciles_in_flight",
        "myownshell_controller_writes_total{kind=\"deployment\"}",
        "myownshell_controller_reconcile_queue_latency_seconds_bucket",
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
    // The create (and the Deployment it led to) were events that waited for their reconciles.
    let waited = myownshell_tests::controller::metric_value(
        &text,
        "myownshell_controller_reconcile_queue_latency_seconds_count",
    );
    assert!(waited.is_some_and(|n| n >= 1.0), "queue latency observed {waited:?} times:\n{text}");
    assert_eq!(t.controller.probe("/nope").await.unwrap().0, 404);
}

#[tokio::test]
async fn a_namespaced_controller_leaves_other_namespaces_alone() {
    let t = setup("ctrl-scope").await;
    let other = create_namespace(&t.client, "ctrl-scope-other").await.unwrap();
    let other_shells: Api<MyOwnShell> = Api::namespaced(t.client.clone(), &other);
    let other_deployments: Api<Deployment> = Api::namespaced(t.client.clone(), &other);
    other_shells.create(&PostParams::default(), &shell("outside", sized(1))).await.unwrap();
    // Created second: once it is reconciled, the first had every chance to be.
    t.shells.create(&PostParams::default(), &shell("inside", sized(1))).await.unwrap();
    t.replicas_become("inside", 1).await;
    t.shell_where("inside", "status", |s| s.status.as_ref().map(|_| ()).ok_or_else(|| "no status".to_owned())).await;

    let outside = other_shells.get("outside").await.unwrap();
    assert!(outside.finalizers().is_empty(), "{:?}", outside.finalizers());
    assert!(outside.status.is_none(), "{:?}", outside.status);
    assert!(other_deployments.get_opt("outside").await.unwrap().is_none());
}

/// A shell runs only where the connect gate looks: in a namespace opened to shells. One whose
/// namespace an administrator closes (or never opened, from before the rule) is held at no pods
/// and says why, with an Event; opened again, it runs again.
#[tokio::test]
async fn a_shell_in_a_namespace_not_opened_to_shells_runs_no_pods() {
    let t = setup("ctrl-closed").await;
    t.shells.create(&PostParams::default(), &shell("held", sized(2))).await.unwrap();
    t.replicas_become("held", 2).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(t.client.clone());
    let label = |value: Option<&str>| json!({"metadata": {"labels": {names::SHELLS_NAMESPACE_LABEL: value}}});
    namespaces.patch(&t.ns, &PatchParams::default(), &Patch::Merge(&label(None))).await.unwrap();
    t.replicas_become("held", 0).await;
    let held = t
        .shell_where("held", "Degraded=True NamespaceNotOpen", |s| {
            let want = cond("True", reasons::NAMESPACE_NOT_OPEN);
            if condition(s, "Degraded") == want { Ok(()) } else { Err(format!("{:?}", s.status)) }
        })
        .await;
    let status = held.status.unwrap();
    // Held like a paused shell (no clocks run, nothing deletes it), and saying why.
    assert_eq!(status.state.as_deref(), Some("Paused"));
    let available = status.conditions.iter().find(|c| c.type_ == "Available").unwrap();
    assert_eq!(available.message, "held (see Degraded): no shell pods run");
    let degraded = status.conditions.into_iter().find(|c| c.type_ == "Degraded").unwrap();
    let fix = format!("kubectl label namespace {} {}=enabled", t.ns, names::SHELLS_NAMESPACE_LABEL);
    assert!(degraded.message.contains(&fix), "says how to open it: {}", degraded.message);
    t.event_with_reason("held", reasons::NAMESPACE_NOT_OPEN).await;

    namespaces.patch(&t.ns, &PatchParams::default(), &Patch::Merge(&label(Some("enabled")))).await.unwrap();
    t.replicas_become("held", 2).await;
    t.shell_where("held", "Degraded no longer NamespaceNotOpen", |s| match condition(s, "Degraded") {
        Some((_, reason)) if reason == reasons::NAMESPACE_NOT_OPEN => Err(format!("{:?}", s.status)),
        _ => Ok(()),
    })
    .await;
}
