//! A pod template that changes with the operator (a new release, here a new `--pod-annotations`)
//! waits for a quiet moment instead of restarting every shell at once, against a real
//! kube-apiserver: running shells keep their Deployment as it is and say `UpToDate=False`; a
//! user's own spec change, `kubectl myownshell update`, a stop, a quiet spell and
//! `--template-updates=immediate` each bring the new template. (The same across a real release
//! upgrade on the real node: the e2e suite's upgrade phase.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams, PostParams};
use myownshell_api::names::conditions::UP_TO_DATE;
use myownshell_tests::controller::{ControllerProcess, ControllerTest, cond, condition, sized_shell};
use myownshell_tests::plugin;
use serde_json::json;

const NEW_RELEASE: &str = "--pod-annotations=example.com/release=2";

fn release_of(d: &Deployment) -> Option<String> {
    let template = d.spec.as_ref()?.template.metadata.as_ref()?;
    template.annotations.as_ref()?.get("example.com/release").cloned()
}

/// A test namespace with shells `names` converged under a controller without flags, then that
/// controller replaced by one started with `flags` (a new release). Returns the Deployments as
/// the first controller left them.
async fn upgraded(prefix: &str, names: &[&str], flags: &[&str]) -> (ControllerTest, Vec<Deployment>) {
    let mut t = ControllerTest::start(prefix).await;
    for name in names {
        t.shells.create(&PostParams::default(), &sized_shell(name, 1)).await.unwrap();
    }
    let mut before = Vec::new();
    for name in names {
        before.push(t.replicas_become(name, 1).await);
    }
    t.settled_writes().await;
    t.controller.kill().unwrap();
    let mut args = vec!["--namespace", t.ns.as_str()];
    args.extend_from_slice(flags);
    t.controller = ControllerProcess::start(t.cp, &format!("{prefix}-new"), &args).unwrap();
    (t, before)
}

async fn up_to_date(t: &ControllerTest, name: &str, status: &str, reason: &str) {
    t.shell_where(name, &format!("UpToDate={status} ({reason})"), |s| match condition(s, UP_TO_DATE) {
        c if c == cond(status, reason) => Ok(()),
        c => Err(format!("{c:?}")),
    })
    .await;
}

async fn on_the_new_template(t: &ControllerTest, name: &str) -> Deployment {
    t.deployment_where(name, "the new release's template", |d| match release_of(d).as_deref() {
        Some("2") => Ok(()),
        other => Err(format!("release {other:?}")),
    })
    .await
}

#[tokio::test]
async fn a_new_template_waits_and_each_way_to_bring_it_applies_it() {
    let names = ["busy", "changed", "asked", "stopping"];
    let (t, before) = upgraded("upgrade-wait", &names, &[NEW_RELEASE]).await;
    for name in names {
        up_to_date(&t, name, "False", "OperatorUpgraded").await;
    }
    let deployment_writes = "myownshell_controller_writes_total{kind=\"deployment\"}";
    assert_eq!(t.settled_metric(deployment_writes).await, 0.0, "the upgrade wrote a Deployment");
    for old in &before {
        let now = t.deployments.get(&old.metadata.name.clone().unwrap()).await.unwrap();
        assert_eq!(now.metadata.resource_version, old.metadata.resource_version, "{:?} was written", now.metadata.name);
    }

    // A user's own spec change rolls out at once, with the new template.
    let image = Patch::Merge(json!({"spec": {"image": "busybox:1.36.1"}}));
    t.shells.patch("changed", &PatchParams::default(), &image).await.unwrap();
    let changed = on_the_new_template(&t, "changed").await;
    assert_eq!(changed.spec.unwrap().template.spec.unwrap().containers[0].image.as_deref(), Some("busybox:1.36.1"));
    up_to_date(&t, "changed", "True", "TemplateCurrent").await;

    // The owner asks.
    let kubeconfig = t.cp.kubeconfig_path();
    let said = plugin::ok(&kubeconfig, &t.ns, &["update", "asked"]).unwrap();
    assert!(said.contains("update requested"), "{said}");
    on_the_new_template(&t, "asked").await;
    up_to_date(&t, "asked", "True", "TemplateCurrent").await;
    t.event_with_reason("asked", "TemplateUpdated").await;

    // A stop has no session to cut: the stopped shell has no Deployment, and says its next
    // start runs the new template; the start then does.
    plugin::ok(&kubeconfig, &t.ns, &["stop", "stopping"]).unwrap();
    t.deployment_gone("stopping").await;
    up_to_date(&t, "stopping", "True", "TemplateCurrent").await;
    plugin::ok(&kubeconfig, &t.ns, &["start", "stopping"]).unwrap();
    t.replicas_become("stopping", 1).await;
    assert_eq!(release_of(&t.deployments.get("stopping").await.unwrap()).as_deref(), Some("2"));

    // And the busy one still runs as it was.
    assert_eq!(t.deployments.get("busy").await.unwrap().metadata.resource_version, before[0].metadata.resource_version);
    let listed = plugin::ok(&kubeconfig, &t.ns, &["ls"]).unwrap();
    let row = listed.lines().find(|l| l.starts_with("busy ")).unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains("False") && row.contains("OperatorUpgraded"), "{listed}");
}

#[tokio::test]
async fn a_quiet_shell_takes_the_new_template_by_itself() {
    let (t, _) =
        upgraded("upgrade-quiet", &["quiet", "used"], &[NEW_RELEASE, "--template-update-quiet-after=6s"]).await;
    // `used` is connected to every second (as the webhook records it): it keeps waiting.
    let mut connections = tokio::time::interval(std::time::Duration::from_secs(1));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        connections.tick().await;
        let time = myownshell_runtime::time::now().0.to_string();
        let patch =
            json!({"status": {"lastConnection": {"user": "alice", "time": time, "pod": "used-1", "kind": "exec"}}});
        t.shells.patch_status("used", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
        let quiet = t.deployments.get("quiet").await.unwrap();
        if release_of(&quiet).as_deref() == Some("2") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "quiet never took the new template\n{}",
            t.controller.log_tail(20)
        );
    }
    up_to_date(&t, "quiet", "True", "TemplateCurrent").await;
    t.event_with_reason("quiet", "TemplateUpdated").await;
    assert_eq!(release_of(&t.deployments.get("used").await.unwrap()), None, "a shell in use was restarted");
    up_to_date(&t, "used", "False", "OperatorUpgraded").await;
}

#[tokio::test]
async fn immediate_rolls_every_shell_at_once() {
    let (t, _) = upgraded("upgrade-now", &["one", "two"], &[NEW_RELEASE, "--template-updates=immediate"]).await;
    for name in ["one", "two"] {
        on_the_new_template(&t, name).await;
        up_to_date(&t, name, "True", "TemplateCurrent").await;
    }
}
