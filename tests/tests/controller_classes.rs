//! A class's caps on running shells, against the real apiserver and the controller process:
//! five shells of one owner created at once under `maxRunningPerUser: 2` give exactly two
//! running and three waiting (never scaled up), each saying which shells count; another owner's
//! runs; stopping one lets exactly one waiting shell start; a raised cap lets the rest start.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::future::join_all;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use myownshell_api::names::conditions::DEGRADED;
use myownshell_api::{MyOwnShell, MyOwnShellClass, MyOwnShellClassSpec, MyOwnShellSpec};
use myownshell_envtest::eventually;
use myownshell_tests::controller::ControllerTest;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(60);

fn shell(name: &str, class: &str, owner: &str) -> MyOwnShell {
    MyOwnShell::new(
        name,
        MyOwnShellSpec {
            size: Some(1),
            class_name: Some(class.into()),
            owner: Some(owner.into()),
            ..MyOwnShellSpec::default()
        },
    )
}

/// Each shell's Deployment replicas (absent: none yet), in order of `names`.
async fn replicas(t: &ControllerTest, names: &[&str]) -> Vec<Option<i32>> {
    let mut out = Vec::new();
    for name in names {
        let d = t.deployments.get_opt(name).await.unwrap();
        out.push(d.and_then(|d| d.spec.and_then(|s| s.replicas)));
    }
    out
}

#[tokio::test]
async fn a_class_caps_the_shells_one_owner_runs_even_when_started_together() {
    let t = ControllerTest::start("class-caps").await;
    let class_name = format!("{}-capped", t.ns);
    let classes: Api<MyOwnShellClass> = Api::all(t.client.clone());
    let spec = MyOwnShellClassSpec { max_running_per_user: Some(2), ..MyOwnShellClassSpec::default() };
    classes.create(&PostParams::default(), &MyOwnShellClass::new(&class_name, spec)).await.unwrap();

    let names = ["s1", "s2", "s3", "s4", "s5"];
    let creates = names.iter().map(|n| {
        let shells = t.shells.clone();
        let shell = shell(n, &class_name, "alice");
        async move { shells.create(&PostParams::default(), &shell).await.map(|_| ()) }
    });
    for created in join_all(creates).await {
        created.unwrap();
    }
    t.shells.create(&PostParams::default(), &shell("bobs", &class_name, "bob")).await.unwrap();

    // Exactly two of alice's run; the others wait, saying which two count.
    let running = eventually("two of alice's shells run, three wait", SETTLE, || async {
        let got = replicas(&t, &names).await;
        let (up, down) = (got.iter().filter(|r| **r == Some(1)).count(), got.iter().filter(|r| **r == Some(0)).count());
        if (up, down) == (2, 3) { Ok(got) } else { Err(format!("{got:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    let (up, waiting): (Vec<&str>, Vec<&str>) =
        names.iter().partition(|n| running[names.iter().position(|m| m == *n).unwrap()] == Some(1));
    t.replicas_become("bobs", 1).await;
    for name in &waiting {
        // Never scaled up: its Deployment was made at 0 and not changed since.
        let d = t.deployments.get(name).await.unwrap();
        assert_eq!(d.metadata.generation, Some(1), "{name} was never scaled up");
        let degraded = |s: &MyOwnShell| {
            s.status.as_ref().and_then(|st| st.conditions.iter().find(|c| c.type_ == DEGRADED)).cloned()
        };
        let s = t
            .shell_where(name, "waiting, saying why", |s| match degraded(s) {
                Some(c) if c.reason == "RunningLimitReached" => Ok(()),
                other => Err(format!("{other:?}")),
            })
            .await;
        let message = degraded(&s).unwrap().message;
        for words in [
            "alice runs 2 of at most 2 shells",
            &class_name,
            &format!("{}/{}", t.ns, up[0]),
            &format!("{}/{}", t.ns, up[1]),
            "kubectl myownshell stop",
        ] {
            assert!(message.contains(words), "{words}: {message}");
        }
    }

    // Someone scales a waiting shell's Deployment up (an administrator: the shell-workloads
    // policy refuses an editor): its pods are taken away again, and it takes no slot.
    let scale = json!({"spec": {"replicas": 1}});
    t.deployments.patch(waiting[0], &PatchParams::default(), &Patch::Merge(&scale)).await.unwrap();
    eventually("the scaled-up waiting shell back at no pods", SETTLE, || async {
        let got = replicas(&t, &names).await;
        let (up_now, back) = (got.iter().filter(|r| **r == Some(1)).count(), replicas(&t, &[waiting[0]]).await[0]);
        if (up_now, back) == (2, Some(0)) { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));

    // One stops: exactly one waiting shell takes its slot.
    let stop = PatchParams::default();
    t.shells.patch(up[0], &stop, &Patch::Merge(json!({"spec": {"stopped": true}}))).await.unwrap();
    eventually("a waiting shell starts in the freed slot, and only one", SETTLE, || async {
        let got = replicas(&t, &names).await;
        let up_now = got.iter().filter(|r| **r == Some(1)).count();
        let woke = waiting.iter().filter(|n| got[names.iter().position(|m| m == *n).unwrap()] == Some(1)).count();
        if (up_now, woke) == (2, 1) { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));

    // The cap raised: the rest start.
    classes.patch(&class_name, &stop, &Patch::Merge(json!({"spec": {"maxRunningPerUser": 10}}))).await.unwrap();
    eventually("a raised cap lets the others start", SETTLE, || async {
        let got = replicas(&t, &names).await;
        if got.iter().filter(|r| **r == Some(1)).count() == 4 { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    classes.delete(&class_name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_class_with_a_new_default_image_waits_for_a_quiet_moment_and_says_so() {
    let t = ControllerTest::start("class-image").await;
    let class_name = format!("{}-tools", t.ns);
    let classes: Api<MyOwnShellClass> = Api::all(t.client.clone());
    let images = |image: &str| myownshell_api::ClassImages {
        allowed: Some(vec!["busybox:*".into()]),
        default: Some(image.into()),
    };
    let spec = MyOwnShellClassSpec { images: Some(images("busybox:1.37.0")), ..MyOwnShellClassSpec::default() };
    classes.create(&PostParams::default(), &MyOwnShellClass::new(&class_name, spec)).await.unwrap();
    t.shells.create(&PostParams::default(), &shell("follows", &class_name, "alice")).await.unwrap();
    let mut own = shell("own", &class_name, "alice");
    own.spec.image = Some("busybox:1.36.1".into());
    t.shells.create(&PostParams::default(), &own).await.unwrap();
    let image = |d: &k8s_openapi::api::apps::v1::Deployment| {
        d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|p| p.containers[0].image.clone())
    };
    let first = t.replicas_become("follows", 1).await;
    assert_eq!(image(&first).as_deref(), Some("busybox:1.37.0"), "the class's default image");
    t.replicas_become("own", 1).await;

    // The class's default moves on: the running shell keeps its pods and says why.
    let moved = json!({"spec": {"images": {"default": "busybox:1.36.0"}}});
    classes.patch(&class_name, &PatchParams::default(), &Patch::Merge(moved)).await.unwrap();
    let waiting = t
        .shell_where("follows", "UpToDate=False naming the class", |s| {
            let c = s.status.as_ref().and_then(|st| st.conditions.iter().find(|c| c.type_ == "UpToDate")).cloned();
            match c {
                Some(c) if c.status == "False" && c.reason == "ClassChanged" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let message = waiting.status.unwrap().conditions.into_iter().find(|c| c.type_ == "UpToDate").unwrap().message;
    assert!(message.contains(&class_name), "{message}");
    assert_eq!(image(&t.deployments.get("follows").await.unwrap()).as_deref(), Some("busybox:1.37.0"), "not restarted");
    let own_now = t.deployments.get("own").await.unwrap();
    assert_eq!(image(&own_now).as_deref(), Some("busybox:1.36.1"), "a shell's own image is its own");
    assert_eq!(own_now.metadata.generation, Some(1), "and its pods were left alone");

    // Its owner asks (kubectl myownshell update): the new default rolls out.
    let now = k8s_openapi::jiff::Timestamp::now();
    let asked = json!({"spec": {"updateRequestedAt": now.to_string()}});
    t.shells.patch("follows", &PatchParams::default(), &Patch::Merge(asked)).await.unwrap();
    t.deployment_where("follows", "the class's new default image", |d| match image(d).as_deref() {
        Some("busybox:1.36.0") => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;

    // The class stops allowing `own`'s image: it says so, and runs on untouched.
    let narrowed = json!({"spec": {"images": {"allowed": ["busybox:1.36.0"]}}});
    classes.patch(&class_name, &PatchParams::default(), &Patch::Merge(narrowed)).await.unwrap();
    let fits = |want: &'static str, reason: &'static str| {
        move |s: &MyOwnShell| {
            let c = s.status.as_ref().and_then(|st| st.conditions.iter().find(|c| c.type_ == "FitsClass")).cloned();
            match c {
                Some(c) if c.status == want && c.reason == reason => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    };
    let told = t.shell_where("own", "FitsClass=False, ClassForbids", fits("False", "ClassForbids")).await;
    let message = told.status.unwrap().conditions.into_iter().find(|c| c.type_ == "FitsClass").unwrap().message;
    assert!(message.contains("busybox:1.36.1") && message.contains(&class_name), "{message}");
    t.shell_where("follows", "FitsClass=True", fits("True", "ClassFits")).await;
    assert_eq!(t.deployments.get("own").await.unwrap().metadata.generation, Some(1), "left running as it is");

    // The class is deleted: its shells run on, and say so.
    classes.delete(&class_name, &DeleteParams::default()).await.unwrap();
    t.shell_where("follows", "FitsClass=False, ClassMissing", fits("False", "ClassMissing")).await;
    t.replicas_become("follows", 1).await;
}

/// The `Approved` condition of `s`: (status, reason, message).
fn approved(s: &MyOwnShell) -> Option<(String, String, String)> {
    let conditions = s.status.as_ref().map(|st| st.conditions.as_slice()).unwrap_or_default();
    conditions
        .iter()
        .find(|c| c.type_ == myownshell_api::names::conditions::APPROVED)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// `spec.approvals` entries as the webhook records them (no webhook runs here: written as the
/// admin), `ago` seconds ago.
fn approval(by: &str, decision: &str, ago: i64) -> serde_json::Value {
    let at = k8s_openapi::jiff::Timestamp::from_second(k8s_openapi::jiff::Timestamp::now().as_second() - ago).unwrap();
    json!({"by": by, "via": "user", "at": at.to_string(), "decision": decision})
}

/// A class asking for two approvals: a shell of it is held at no pods, saying how many it has
/// of how many; its owner's own approval counts for nothing; the class lowered to one while it
/// waits lets it run; an approval about to run out is warned of and then holds it again; a
/// rejection holds it too. Each change is an Event.
#[tokio::test]
async fn a_shell_of_a_class_that_asks_for_approval_runs_only_while_approved() {
    let t = ControllerTest::start("class-approval").await;
    let class_name = format!("{}-four-eyes", t.ns);
    let classes: Api<MyOwnShellClass> = Api::all(t.client.clone());
    let spec: MyOwnShellClassSpec = serde_json::from_value(json!({
        "approval": {"required": 2, "approvers": {"users": ["bob", "carol", "dave"]}, "validFor": "1h"}
    }))
    .unwrap();
    classes.create(&PostParams::default(), &MyOwnShellClass::new(&class_name, spec)).await.unwrap();
    t.shells.create(&PostParams::default(), &shell("guarded", &class_name, "alice")).await.unwrap();
    t.replicas_become("guarded", 0).await;
    let waiting = |want: &'static str| {
        move |s: &MyOwnShell| match approved(s) {
            Some((status, _, message)) if status == "False" && message.contains(want) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    };
    t.shell_where("guarded", "Approved=False, 0 of 2", waiting("waiting for approval: 0 of 2")).await;

    // Only spec.approvals counts: an annotation or a status saying approved is no approval (the
    // controller writes its own condition back, and the shell stays held).
    let annotated = json!({"metadata": {"annotations": {"myownshell.io/approved-by": "bob"}}});
    t.shells.patch("guarded", &PatchParams::default(), &Patch::Merge(&annotated)).await.unwrap();
    let forged = json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Approved",
        "message": "approved by bob", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    t.shells.patch_status("guarded", &PatchParams::default(), &Patch::Merge(&forged)).await.unwrap();
    t.shell_where("guarded", "the forged condition written over", waiting("waiting for approval: 0 of 2")).await;
    assert_eq!(t.deployments.get("guarded").await.unwrap().spec.unwrap().replicas, Some(0));

    // bob's, and alice's own (counted for nothing): 1 of 2, still held.
    let patch = json!({"spec": {"approvals": [approval("bob", "Approve", 0), approval("alice", "Approve", 0)]}});
    t.shells.patch("guarded", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    t.shell_where("guarded", "1 of 2 (bob), the owner's not counted", waiting("1 of 2 (bob)")).await;
    assert_eq!(t.deployments.get("guarded").await.unwrap().spec.unwrap().replicas, Some(0));

    // The class lowered to one approval while the shell waits: it runs.
    let lowered = json!({"spec": {"approval": {"required": 1}}});
    classes.patch(&class_name, &PatchParams::default(), &Patch::Merge(&lowered)).await.unwrap();
    t.replicas_become("guarded", 1).await;
    t.shell_where("guarded", "Approved=True by bob", |s| match approved(s) {
        Some((status, reason, message)) if status == "True" && reason == "Approved" && message.contains("bob") => {
            Ok(())
        }
        other => Err(format!("{other:?}")),
    })
    .await;
    t.event_with_reason("guarded", "Approved").await;

    // bob's approval about to run out (given 3595 s ago, valid for an hour): warned, then held.
    let patch = json!({"spec": {"approvals": [approval("bob", "Approve", 3595)]}});
    t.shells.patch("guarded", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    t.shell_where("guarded", "Stopping=True: the approval runs out", |s| {
        let conditions = s.status.as_ref().map(|st| st.conditions.clone()).unwrap_or_default();
        match conditions.iter().find(|c| c.type_ == myownshell_api::names::conditions::STOPPING) {
            Some(c) if c.status == "True" && c.reason == "ApprovalExpired" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    t.replicas_become("guarded", 0).await;
    t.shell_where("guarded", "Approved=False, ran out", waiting("an approval ran out")).await;

    // A fresh approval, then dave's rejection: held again, naming him.
    let patch = json!({"spec": {"approvals": [approval("carol", "Approve", 0), approval("dave", "Reject", 0)]}});
    t.shells.patch("guarded", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    t.shell_where("guarded", "Approved=False, rejected by dave", waiting("rejected by dave")).await;
    assert_eq!(t.deployments.get("guarded").await.unwrap().spec.unwrap().replicas, Some(0));
    t.event_with_reason("guarded", "Rejected").await;
    let counted =
        t.controller.metric("myownshell_controller_approval_changes_total{reason=\"Approved\"}").await.unwrap();
    assert!(counted >= 1.0, "approvals counted: {counted}");
    classes.delete(&class_name, &DeleteParams::default()).await.unwrap();
}
