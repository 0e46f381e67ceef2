//! The upgrade phase: the previous release installed from its own manifests and image (built by
//! `cargo xtask e2e` from a pinned commit, see `xtask/src/previous.rs`), shells created and in
//! use, then this release applied over it. Every shell pod keeps its uid (and its `/tmp`), the
//! shells say they are not up to date, every MyOwnShell applied during the roll-out is admitted
//! (no "failed calling webhook"), and a stop and a start bring a shell to the new template.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use myownshell_api::MyOwnShell;
use myownshell_api::names::conditions::UP_TO_DATE;
use myownshell_envtest::eventually;
use myownshell_tests::plugin;

use super::{E2e, LOCAL_IMAGE, SYSTEM, TIMEOUT, shell, wait_running};

/// The previous release's image, as `cargo xtask e2e` builds and imports it.
const PREVIOUS_IMAGE: &str = "localhost/myownshell:previous";

fn previous_config() -> PathBuf {
    std::env::var_os("MYOWNSHELL_PREVIOUS_CONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("MYOWNSHELL_PREVIOUS_CONFIG is not set: run the suite with `cargo xtask e2e`"))
}

/// The previous release's webhook stops answering at SIGTERM: it has no drain, so the apiserver,
/// which still routes to it for a moment, gets "connection refused" or "broken pipe" and refuses
/// the request. The README's upgrade note tells its users to give its container a `preStop`
/// sleep first (the kubelet then sends SIGTERM only once the pod has left the endpoints), and so
/// does this phase: what is measured below is this release's side of the upgrade.
const PREVIOUS_WEBHOOK_COMMAND: &str = "        command:\n        - /myownshell-webhook\n";
const PREVIOUS_WEBHOOK_PRESTOP: &str =
    "        lifecycle:\n          preStop:\n            sleep:\n              seconds: 10\n";

/// The previous release's local overlay, its image pointed at the previous image, its webhook
/// with the upgrade note's `preStop` sleep (in the same apply, so that this release's apply, by
/// the same field manager, removes it).
pub async fn install_previous(e2e: &E2e) {
    let overlay = previous_config().join("overlays/local");
    let rendered = e2e.run(&["kustomize", &overlay.display().to_string()]).await;
    assert!(rendered.contains(LOCAL_IMAGE), "the previous overlay no longer names the image {LOCAL_IMAGE}");
    assert_eq!(rendered.matches(PREVIOUS_WEBHOOK_COMMAND).count(), 1, "the previous webhook's command moved");
    let manifest = rendered
        .replace(LOCAL_IMAGE, PREVIOUS_IMAGE)
        .replace(PREVIOUS_WEBHOOK_COMMAND, &format!("{PREVIOUS_WEBHOOK_COMMAND}{PREVIOUS_WEBHOOK_PRESTOP}"));
    let args = ["apply", "--server-side", "--force-conflicts", "-f", "-"];
    let out = e2e.kubectl.run_with_stdin(&args, Some(&manifest)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    // The previous release has no gateway.
    for deployment in [super::CONTROLLER, super::WEBHOOK] {
        e2e.rollout(deployment).await;
    }
}

/// Apply a new MyOwnShell (`PREFIX-N`) every 250 ms until `stop`; how many were applied and the
/// errors.
pub async fn keep_applying(
    e2e: &E2e,
    ns: &str,
    prefix: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) -> (usize, Vec<String>) {
    let (applied, errors) = keep_applying_timed(e2e, ns, prefix, stop).await;
    (applied, errors.into_iter().map(|(_, e)| e).collect())
}

/// [`keep_applying`], each error with when it came back.
async fn keep_applying_timed(
    e2e: &E2e,
    ns: &str,
    prefix: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) -> (usize, Vec<(Instant, String)>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(250));
    let (mut applied, mut errors) = (0, Vec::new());
    while !*stop.borrow() {
        ticks.tick().await;
        match e2e.apply(ns, &shell(&format!("{prefix}-{applied}"), 0)).await {
            Ok(_) => {}
            Err(e) => errors.push((Instant::now(), e)),
        }
        applied += 1;
    }
    (applied, errors)
}

/// Whether an apply's error is a connection to the webhook closed under the review (the
/// apiserver does not retry a POST whose connection ended): what the previous release's webhook,
/// which has no drain, does to a connection the apiserver still uses when it exits. Go's client
/// says it one of several ways, by when it saw the close: before its request was written ("http:
/// server closed idle connection", the pooled connection picked up as it closed), while writing
/// ("broken pipe", "connection reset by peer"), or before the answer (": EOF").
fn connection_closed(error: &str) -> bool {
    const CLOSED: [&str; 5] =
        [": EOF", "connection reset by peer", "broken pipe", "connection refused", "server closed idle connection"];
    error.contains("failed calling webhook") && CLOSED.iter().any(|m| error.contains(m))
}

/// The restarts of this release's webhook containers: none, if every connection it closed was
/// one it drained.
async fn webhook_restarts(e2e: &E2e) -> String {
    e2e.run(&[
        "get",
        "pods",
        "-n",
        SYSTEM,
        "-l",
        "app.kubernetes.io/component=webhook",
        "-o",
        "jsonpath={range .items[*]}{.spec.containers[0].image} {.status.containerStatuses[0].restartCount}{\"\\n\"}{end}",
    ])
    .await
}

async fn pod_uids(e2e: &E2e, ns: &str) -> Vec<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(e2e.cluster.control_plane().client().unwrap(), ns);
    let list = pods.list(&ListParams::default().labels("app.kubernetes.io/name=myownshell")).await.unwrap();
    let mut uids: Vec<(String, String)> = list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p.metadata.name.unwrap_or_default(), p.metadata.uid.unwrap_or_default()))
        .collect();
    uids.sort();
    uids
}

/// From the previous release to this one, with shells in use.
pub async fn upgrade(e2e: &E2e) {
    let ns = e2e.namespace("e2e-upgrade").await;
    for name in ["kept", "restarted"] {
        e2e.apply(&ns, &shell(name, 1)).await.unwrap();
    }
    let kept_pod = wait_running(e2e, &ns, "kept", 1).await.remove(0);
    wait_running(e2e, &ns, "restarted", 1).await;
    e2e.run(&["exec", "-n", &ns, &kept_pod, "--", "sh", "-c", "echo before-the-upgrade > /tmp/marker"]).await;
    let before = pod_uids(e2e, &ns).await;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let applying = keep_applying_timed(e2e, &ns, "during", stop_rx);
    let upgrading = async {
        let started = Instant::now();
        e2e.run(&["apply", "--server-side", "--force-conflicts", "-k", &E2e::overlay("local")]).await;
        // The README's upgrade note: the connect policy this release replaced, which an apply
        // does not delete.
        let dropped = "validatingadmissionpolicybinding,validatingadmissionpolicy";
        e2e.run(&["delete", dropped, "myownshell-connect", "--ignore-not-found"]).await;
        e2e.rollout_operator().await;
        // The old pods are gone too, not only the new ones ready.
        e2e.wait_for(
            "only this release's operator pods",
            &["get", "pods", "-n", SYSTEM, "-o", "jsonpath={.items[*].spec.containers[0].image}"],
            |images| !images.contains(PREVIOUS_IMAGE) && images.contains(LOCAL_IMAGE),
        )
        .await;
        let previous_gone = Instant::now();
        let took = started.elapsed();
        // A few more applies against the new webhook alone.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = stop_tx.send(true);
        (took, previous_gone)
    };
    let ((applied, errors), (took, previous_gone)) = tokio::join!(applying, upgrading);
    // The previous release's webhook has no drain: when it exits (after its `preStop` sleep,
    // out of the endpoints by then), the apiserver may be writing a review onto a pooled
    // connection to it, which it reuses by the Service's name whatever the endpoints say, and
    // does not retry. That is the previous release's side, told apart: a closed connection while
    // one of its pods still ran, with this release's webhooks never restarted. Anything else
    // refused, or refused once only this release answers, is this release's.
    let (previous, ours): (Vec<_>, Vec<_>) =
        errors.into_iter().partition(|(at, e)| *at <= previous_gone && connection_closed(e));
    let restarts = webhook_restarts(e2e).await;
    eprintln!(
        "e2e: operator upgraded in {took:.1?}; {applied} MyOwnShells applied meanwhile, {} refused (and {} by the previous release's webhook closing a connection in use as it exited); this release's webhooks (image, restarts): {restarts:?}",
        ours.len(),
        previous.len()
    );
    assert_eq!(
        ours.iter().map(|(_, e)| e).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "applies refused during the upgrade"
    );
    assert!(
        restarts.lines().all(|l| l.ends_with(" 0")),
        "a webhook of this release restarted during the upgrade: {restarts}"
    );
    assert!(previous.len() <= 2, "more than a connection or two lost to the previous webhook's exit: {previous:?}");

    let shells: Api<MyOwnShell> = Api::namespaced(e2e.cluster.control_plane().client().unwrap(), &ns);
    for name in ["kept", "restarted"] {
        eventually(&format!("{name} UpToDate=False (OperatorUpgraded)"), TIMEOUT, || async {
            let s = shells.get(name).await.map_err(|e| e.to_string())?;
            let c = s.status.as_ref().and_then(|st| st.conditions.iter().find(|c| c.type_ == UP_TO_DATE).cloned());
            match c {
                Some(c) if c.status == "False" && c.reason == "OperatorUpgraded" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    }
    assert_eq!(pod_uids(e2e, &ns).await, before, "a shell pod was restarted by the upgrade");
    let marker = e2e.run(&["exec", "-n", &ns, &kept_pod, "--", "cat", "/tmp/marker"]).await;
    assert_eq!(marker, "before-the-upgrade\n");

    // A stop and a start: the new template (no Service links, a short grace period).
    let kubeconfig = e2e.cluster.control_plane().kubeconfig_path();
    plugin::ok(&kubeconfig, &ns, &["stop", "restarted"]).unwrap();
    wait_running(e2e, &ns, "restarted", 0).await;
    plugin::ok(&kubeconfig, &ns, &["start", "restarted"]).unwrap();
    let pod = wait_running(e2e, &ns, "restarted", 1).await.remove(0);
    let spec = e2e
        .run(&[
            "get",
            "pod",
            &pod,
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.enableServiceLinks} {.spec.terminationGracePeriodSeconds}",
        ])
        .await;
    assert_eq!(spec, "false 5", "the started shell runs this release's template");
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}
