//! A shell says why its pods cannot run, against a real kube-apiserver: the test writes the pod
//! statuses a kubelet and a scheduler would (image pull errors, crash loops, OOM kills, no room
//! on any node, a node that is down), and the shell's conditions name the pod, the container and
//! the reason within seconds, one Event per cause, and clear by themselves once the pod is well.
//! And a shell in a namespace being deleted is left alone: no failed reconcile, no Event.
//! (Real pods failing on a real node: the e2e suite's failures phase.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use myownshell_api::MyOwnShell;
use myownshell_api::names::conditions::{AVAILABLE, DEGRADED};
use myownshell_tests::controller::{ControllerTest, cond, condition, sized_shell};
use myownshell_tests::shell_pods::{self, crash_looping, running, unschedulable, waiting};
use serde_json::json;

fn message(s: &MyOwnShell, type_: &str) -> String {
    s.status
        .as_ref()
        .and_then(|st| st.conditions.iter().find(|c| c.type_ == type_))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Wait until `name` is Degraded (and not Available) for `reason`; its Degraded message.
async fn degraded_by(t: &ControllerTest, name: &str, reason: &str) -> String {
    let s = t
        .shell_where(name, &format!("Degraded and not Available: {reason}"), |s| {
            match (condition(s, DEGRADED), condition(s, AVAILABLE)) {
                (d, a) if d == cond("True", reason) && a == cond("False", reason) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    message(&s, DEGRADED)
}

#[tokio::test]
async fn each_way_a_pod_cannot_run_is_named_once_and_clears_when_fixed() {
    let t = ControllerTest::start("health-pods").await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.ns);
    t.shells.create(&PostParams::default(), &sized_shell("web", 1)).await.unwrap();
    t.replicas_become("web", 1).await;

    let pod =
        shell_pods::create(&pods, "web", "a1", None, waiting("ImagePullBackOff", "Back-off pulling image \"nope:1\""))
            .await
            .unwrap();
    let told = degraded_by(&t, "web", "ImagePullFailed").await;
    assert_eq!(told, format!("pod {pod}, container shell: ImagePullBackOff: Back-off pulling image \"nope:1\""));
    // The kubelet says it again and again: one Event for the cause.
    shell_pods::report(&pods, &pod, waiting("ErrImagePull", "rpc error: not found")).await.unwrap();
    t.shell_where("web", "the newer kubelet message", |s| {
        if message(s, DEGRADED).contains("ErrImagePull") { Ok(()) } else { Err(message(s, DEGRADED)) }
    })
    .await;
    t.settled_writes().await;
    let pulls = t.event_reasons("web").await.into_iter().filter(|r| r == "ImagePullFailed").count();
    assert_eq!(pulls, 1, "one Event per cause");

    shell_pods::report(&pods, &pod, crash_looping("Error", 1, 3)).await.unwrap();
    let told = degraded_by(&t, "web", "CrashLooping").await;
    assert!(told.contains("CrashLoopBackOff: ended Error (exit code 1), restarted 3 times"), "{told}");

    shell_pods::report(&pods, &pod, crash_looping("OOMKilled", 137, 4)).await.unwrap();
    let told = degraded_by(&t, "web", "OOMKilled").await;
    assert!(told.contains("OOMKilled (exit code 137)"), "{told}");

    shell_pods::report(&pods, &pod, waiting("CreateContainerConfigError", "secret \"x\" not found")).await.unwrap();
    degraded_by(&t, "web", "ContainerCreateFailed").await;

    // Fixed: a new pod runs, the failing one goes.
    pods.delete(&pod, &DeleteParams::default().grace_period(0)).await.unwrap();
    shell_pods::create(&pods, "web", "b2", None, running()).await.unwrap();
    t.shell_where("web", "well again", |s| match condition(s, DEGRADED) {
        d if d == cond("False", "AsExpected") => Ok(()),
        d => Err(format!("{d:?}")),
    })
    .await;
    let reasons = t.event_reasons("web").await;
    for reason in ["ImagePullFailed", "CrashLooping", "OOMKilled", "ContainerCreateFailed"] {
        assert!(reasons.iter().any(|r| r == reason), "{reason} in {reasons:?}");
    }
}

#[tokio::test]
async fn no_room_on_any_node_and_a_node_that_is_down_are_said() {
    let t = ControllerTest::start("health-nodes").await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), &t.ns);
    t.shells.create(&PostParams::default(), &sized_shell("big", 1)).await.unwrap();
    t.shells.create(&PostParams::default(), &sized_shell("lost", 1)).await.unwrap();
    t.replicas_become("big", 1).await;
    t.replicas_become("lost", 1).await;

    let why = "0/1 nodes are available: 1 Insufficient memory.";
    let pod = shell_pods::create(&pods, "big", "c3", None, unschedulable(why)).await.unwrap();
    let told = degraded_by(&t, "big", "Unschedulable").await;
    assert_eq!(told, format!("pod {pod} cannot be scheduled: {why}"));

    // A node of its own (nodes are cluster-wide), ready, then gone quiet.
    let node_name = format!("{}-node", t.ns);
    let nodes: Api<Node> = Api::all(t.client.clone());
    nodes
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": node_name}})).unwrap())
        .await
        .unwrap();
    let ready = |status: &str| {
        json!({"status": {"conditions": [{
            "type": "Ready", "status": status, "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.",
        }]}})
    };
    nodes.patch_status(&node_name, &PatchParams::default(), &Patch::Merge(ready("True"))).await.unwrap();
    shell_pods::create(&pods, "lost", "d4", Some(&node_name), running()).await.unwrap();
    t.shell_where("lost", "not degraded while its node is ready", |s| match condition(s, DEGRADED) {
        d if d == cond("False", "AsExpected") => Ok(()),
        d => Err(format!("{d:?}")),
    })
    .await;
    nodes.patch_status(&node_name, &PatchParams::default(), &Patch::Merge(ready("Unknown"))).await.unwrap();
    let told = degraded_by(&t, "lost", "NodeNotReady").await;
    assert!(told.contains(&node_name) && told.contains("Kubelet stopped posting node status."), "{told}");
    nodes.patch_status(&node_name, &PatchParams::default(), &Patch::Merge(ready("True"))).await.unwrap();
    t.shell_where("lost", "well once the node is back", |s| match condition(s, DEGRADED) {
        d if d == cond("False", "AsExpected") => Ok(()),
        d => Err(format!("{d:?}")),
    })
    .await;
    nodes.delete(&node_name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_namespace_being_deleted_gets_no_deployment_and_no_failed_reconcile() {
    let t = ControllerTest::start("health-ns").await;
    for i in 0..5 {
        t.shells.create(&PostParams::default(), &sized_shell(&format!("s{i}"), 1)).await.unwrap();
    }
    for i in 0..5 {
        t.replicas_become(&format!("s{i}"), 1).await;
    }
    t.settled_writes().await;
    let events_before = t.settled_metric("myownshell_controller_writes_total{kind=\"event\"}").await;

    // This control plane runs no namespace controller: the namespace stays Terminating, and
    // the test removes the Deployments first, as the namespace controller may.
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    namespaces.delete(&t.ns, &DeleteParams::default()).await.unwrap();
    for i in 0..5 {
        t.deployments.delete(&format!("s{i}"), &DeleteParams::default()).await.unwrap();
    }
    t.settled_writes().await;
    for i in 0..5 {
        assert!(t.deployments.get_opt(&format!("s{i}")).await.unwrap().is_none(), "s{i}'s Deployment was made again");
    }
    let failed = t.controller.metric("myownshell_controller_reconciles_total{result=\"error\"}").await.unwrap();
    assert_eq!(failed, 0.0, "failed reconciles\n{}", t.controller.log_tail(30));
    let events = t.controller.metric("myownshell_controller_writes_total{kind=\"event\"}").await.unwrap();
    assert_eq!(events, events_before, "Events written into a namespace being deleted");
}
