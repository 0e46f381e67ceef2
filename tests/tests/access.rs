//! Who may get into a shell, through the real kube-apiserver and real kubectl: the webhook's
//! connect check (a `myownshell-webhook` process per test, its configurations scoped to the
//! test's namespace), the admission policies of `config/policy` (shared by the tests of this
//! binary), owner stamping, and who may change a shell.
//!
//! No pod runs on the API-only plane, so a connection the admission chain lets through ends at
//! the apiserver with "does not have a host assigned": what matters here is that it got that far.
//! The real node's e2e connects for real (`tests/tests/e2e/`, the access phase).

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use myownshell_api::MyOwnShell;
use myownshell_api::names::reasons;
use myownshell_envtest::kubectl::KubectlOutput;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{ControlPlane, Kubectl, create_namespace, create_shell_namespace, eventually, shared};
use myownshell_tests::access::{
    CONNECT_UNOPENED_WEBHOOK, Refusal, install_policies, kubectl_as, namespace_editors, refusal, shell_manifest,
};
use myownshell_tests::webhooks::{InstalledWebhooks, Target, WebhookOptions, WebhookProcess, secret_pem};
use myownshell_webhook::connect::access::{DECISION_TABLE, Grant, PROXY_NAME_FORMS, ShellAccess};
use myownshell_webhook::connect::gate::{ConnectKind, Connection};
use myownshell_webhook::connect::record::write_last_connection;
use serde_json::json;
use tokio::sync::OnceCell;

const READY: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(30);
const AUTH: &[&str] = &["system:authenticated"];
/// A pod named as shell `web`'s Deployment names its pods.
const WEB_POD: &str = "web-7d9f8c6b4-x2x4z";

/// The admission chain let the connection through (it failed later, for want of a node).
fn admitted(out: &KubectlOutput) -> bool {
    out.success || out.stderr.contains("does not have a host assigned") || out.stderr.contains("is not running")
}

struct World {
    client: Client,
    kubectl: Kubectl,
    ns: String,
    installed: InstalledWebhooks,
    webhook: WebhookProcess,
}

/// The policies, once per test binary.
async fn policies(cp: &ControlPlane) {
    static INSTALLED: OnceCell<()> = OnceCell::const_new();
    INSTALLED.get_or_init(|| async { install_policies(&cp.kubectl()).await.unwrap() }).await;
}

impl World {
    /// A namespace whose editors are alice, bob, carol and the group devs, the policies, and a
    /// ready webhook with its configurations for the namespace.
    async fn start(prefix: &str) -> World {
        let cp = shared();
        policies(cp).await;
        let client = cp.client().unwrap();
        let ns = create_shell_namespace(&client, prefix).await.unwrap();
        namespace_editors(&client, &ns, &["alice", "bob", "carol"], &["devs"]).await.unwrap();
        let port = free_port().unwrap();
        let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.clone() };
        let installed = InstalledWebhooks::install(&client, &ns, &target).await.unwrap();
        let mut options = WebhookOptions::for_installed(&installed, &ns, port);
        options.args = vec![
            "--connection-record-interval=1s".into(),
            // Only the apiserver (its client certificate, see envtest) is answered on the connect path.
            format!("--apiserver-client-ca-file={}", cp.webhook_client_ca_file().display()),
        ];
        let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
        webhook.wait_ready(READY).await.unwrap();
        World { client, kubectl: cp.kubectl(), ns, installed, webhook }
    }

    async fn as_user(&self, user: &str, groups: &[&str], args: &[&str]) -> KubectlOutput {
        let mut all = vec!["-n", &self.ns];
        all.extend_from_slice(args);
        kubectl_as(&self.kubectl, user, groups, &all).await
    }

    /// `user` applies shell `name` with `spec`; the output.
    async fn apply_shell(&self, user: &str, name: &str, spec: &str) -> KubectlOutput {
        let manifest = shell_manifest(name, spec);
        let mut args: Vec<String> = myownshell_tests::access::as_user(user, AUTH);
        args.extend(["apply", "-n", &self.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.kubectl.run_with_stdin(&args, Some(&manifest)).await.unwrap()
    }

    /// A pod named `name` with no labels (on this plane it never runs).
    async fn pod(&self, name: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), &self.ns).create(&PostParams::default(), &pod).await.unwrap();
    }

    fn shells(&self) -> Api<MyOwnShell> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Poll `exec` as `user` into `pod` until the answer is `want` (the webhook's configuration
    /// and the policy's binding reach the apiserver through informers).
    async fn exec_until(&self, user: &str, groups: &[&str], pod: &str, want: Option<Refusal>) -> KubectlOutput {
        eventually(&format!("{user}'s exec into {pod} to be {want:?}"), TIMEOUT, || async {
            let out = self.as_user(user, groups, &["exec", pod, "--", "true"]).await;
            let got = refusal(&out);
            if got == want && (want.is_some() || admitted(&out)) {
                Ok(out)
            } else {
                Err(format!("{got:?}: {}", out.stderr))
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- webhook ---\n{}", self.webhook.log_tail(20)))
    }
}

#[tokio::test]
async fn the_owner_and_those_shared_with_get_in_and_nobody_else() {
    let w = World::start("access-who").await;
    let created = w.apply_shell("alice", "web", "{size: 1}").await;
    assert!(created.success, "{}", created.stderr);
    let web = w.shells().get("web").await.unwrap();
    assert_eq!(web.spec.owner.as_deref(), Some("alice"), "stamped from the request");
    w.pod(WEB_POD).await;
    w.pod("api-7d9f8c6b4-x2x4z").await;

    w.exec_until("alice", AUTH, WEB_POD, None).await;
    let refused = w.exec_until("bob", AUTH, WEB_POD, Some(Refusal::Webhook)).await;
    assert!(
        refused.stderr.contains(&format!(
            "bob may not exec (or cp) into pod {WEB_POD}: it runs shell {}/web (a MyOwnShell), which only its owner alice may connect to",
            w.ns
        )),
        "{}",
        refused.stderr
    );
    // Every way in: attach, cp (an exec), port-forward, a proxied request, debug (kubectl wants
    // the pod Running before it tries some of them).
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), &w.ns);
    let running = json!({"status": {"phase": "Running"}});
    pods.patch_status(WEB_POD, &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    let attach = w.as_user("bob", AUTH, &["attach", WEB_POD]).await;
    assert_eq!(refusal(&attach), Some(Refusal::Webhook), "attach: {}", attach.stderr);
    let cp = w.as_user("bob", AUTH, &["cp", "/etc/hostname", &format!("{WEB_POD}:/tmp/x")]).await;
    assert_eq!(refusal(&cp), Some(Refusal::Webhook), "cp: {}", cp.stderr);
    let forward = w.as_user("bob", AUTH, &["port-forward", WEB_POD, "18080:80"]).await;
    assert_eq!(refusal(&forward), Some(Refusal::Webhook), "port-forward: {}", forward.stderr);
    let proxy =
        w.as_user("bob", AUTH, &["get", "--raw", &format!("/api/v1/namespaces/{}/pods/{WEB_POD}/proxy/", w.ns)]).await;
    assert_eq!(refusal(&proxy), Some(Refusal::Webhook), "proxy: {}", proxy.stderr);
    let debug = w
        .as_user("bob", AUTH, &["debug", WEB_POD, "--image=busybox:1.37.0", "--attach=false", "--profile=general"])
        .await;
    assert_eq!(refusal(&debug), Some(Refusal::Webhook), "debug: {}", debug.stderr);
    let owner_debug = w
        .as_user("alice", AUTH, &["debug", WEB_POD, "--image=busybox:1.37.0", "--attach=false", "--profile=general"])
        .await;
    assert!(owner_debug.success, "the owner may add a debug container: {}", owner_debug.stderr);

    // Pods that are no shell's are never affected.
    assert!(admitted(&w.as_user("bob", AUTH, &["exec", "api-7d9f8c6b4-x2x4z", "--", "true"]).await));

    // Sharing takes effect for the next connection.
    let shared = w.apply_shell("alice", "web", "{size: 1, sharedWith: {users: [bob], groups: [devs]}}").await;
    assert!(shared.success, "{}", shared.stderr);
    w.exec_until("bob", AUTH, WEB_POD, None).await;
    w.exec_until("carol", &["devs", "system:authenticated"], WEB_POD, None).await;
    w.exec_until("carol", AUTH, WEB_POD, Some(Refusal::Webhook)).await;
    w.installed.remove().await.unwrap();
}

/// The webhook is the gate and fails closed: while it is down nobody gets into a shell's pod,
/// owner included, and what else waits is only pods named as a Deployment's in namespaces opened
/// to shells (the real configuration's namespaceSelector is tried on the real node, in the e2e's
/// access phase).
#[tokio::test]
async fn with_the_webhook_down_nobody_gets_into_a_shell_and_other_pods_are_untouched() {
    let mut w = World::start("access-down").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    w.pod(WEB_POD).await;
    w.pod("api-7d9f8c6b4-x2x4z").await;
    w.pod("plain").await;
    w.exec_until("bob", AUTH, WEB_POD, Some(Refusal::Webhook)).await;

    w.webhook.stop(Duration::from_secs(5)).unwrap();
    for user in ["bob", "alice"] {
        let refused = w.exec_until(user, AUTH, WEB_POD, Some(Refusal::WebhookDown)).await;
        assert!(refused.stderr.contains("connect-v1-pod"), "{}", refused.stderr);
    }
    let debug = w
        .as_user("bob", AUTH, &["debug", WEB_POD, "--image=busybox:1.37.0", "--attach=false", "--profile=general"])
        .await;
    assert_eq!(refusal(&debug), Some(Refusal::WebhookDown), "debug: {}", debug.stderr);
    // A pod named as a Deployment's waits for the webhook too: only the webhook knows it is no
    // shell's. One named otherwise never does.
    w.exec_until("bob", AUTH, "api-7d9f8c6b4-x2x4z", Some(Refusal::WebhookDown)).await;
    let other = w.as_user("bob", AUTH, &["exec", "plain", "--", "true"]).await;
    assert!(admitted(&other), "a pod not named as a Deployment's: {}", other.stderr);
    w.installed.remove().await.unwrap();
}

/// A shell left in a namespace no longer opened to shells (an administrator took the label off;
/// the controller holds it at no pods, which takes a moment, and an editor may scale its
/// Deployment up again): while the webhook answers its pods stay gated, by the check of
/// namespaces not opened to shells (`Ignore`, so that with the webhook down nothing there waits
/// on it, and only the controller's hold keeps such pods closed, as the README says).
#[tokio::test]
async fn a_shell_in_a_namespace_closed_again_stays_gated_while_the_webhook_answers() {
    let mut w = World::start("access-closed").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    w.pod(WEB_POD).await;
    w.exec_until("bob", AUTH, WEB_POD, Some(Refusal::Webhook)).await;
    let closed = json!({"metadata": {"labels": {myownshell_api::names::SHELLS_NAMESPACE_LABEL: null}}});
    Api::<Namespace>::all(w.client.clone())
        .patch(&w.ns, &PatchParams::default(), &Patch::Merge(&closed))
        .await
        .unwrap();
    let bob = eventually("bob refused by the check of namespaces not opened to shells", TIMEOUT, || async {
        let out = w.as_user("bob", AUTH, &["exec", WEB_POD, "--", "true"]).await;
        let by_unopened = out.stderr.contains(&format!("\"{CONNECT_UNOPENED_WEBHOOK}\" denied"));
        if refusal(&out) == Some(Refusal::Webhook) && by_unopened { Ok(out) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
    assert!(bob.stderr.contains("only its owner alice"), "{}", bob.stderr);
    w.exec_until("alice", AUTH, WEB_POD, None).await;
    w.webhook.stop(Duration::from_secs(5)).unwrap();
    w.exec_until("bob", AUTH, WEB_POD, None).await;
    w.installed.remove().await.unwrap();
}

/// Long names, as the real apiserver cuts them: a pod generated for shell `NAME`'s ReplicaSet
/// keeps only the first 58 characters of `NAME-<hash>-` before its 5 random ones. The webhook's
/// matchCondition sends it and the webhook tells it as the shell's; a second shell whose name
/// shares those 58 characters claims it too, and both must let a user in (stricter, never looser).
#[tokio::test]
async fn long_names_cut_by_the_apiserver_are_told_as_the_shells() {
    let w = World::start("access-long").await;
    let long = format!("long-{}", "a".repeat(65));
    let twin = format!("{}twin", &long[..58]);
    assert!(w.apply_shell("alice", &long, "{size: 1}").await.success);
    assert!(w.apply_shell("carol", &twin, "{size: 1}").await.success);
    // Made as the ReplicaSet controller makes it (impersonated: no controller runs here).
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{long}-7d9f8c6b4-"),
                     "labels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": "long"}},
        "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}});
    let mut args = myownshell_tests::access::as_user("system:serviceaccount:kube-system:replicaset-controller", AUTH);
    args.extend(["create", "-n", &w.ns, "-o", "jsonpath={.metadata.name}", "-f", "-"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let made = w.kubectl.run_with_stdin(&args, Some(&pod.to_string())).await.unwrap();
    assert!(made.success, "{}", made.stderr);
    let name = made.stdout;
    assert_eq!((name.len(), &name[..58]), (63, &long[..58]), "the apiserver's cut: {name}");

    let bob = w.exec_until("bob", AUTH, &name, Some(Refusal::Webhook)).await;
    assert!(bob.stderr.contains("(a MyOwnShell)"), "{}", bob.stderr);
    // Claimed by both: alice is kept out by carol's shell, and carol by alice's.
    let alice = w.exec_until("alice", AUTH, &name, Some(Refusal::Webhook)).await;
    assert!(alice.stderr.contains(&twin), "{}", alice.stderr);
    // With the twin gone, alice gets in; bob still does not.
    let strip = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    assert!(w.as_user("carol", AUTH, &["delete", "mos", &twin, "--wait=false"]).await.success);
    assert!(w.kubectl.run(&["-n", &w.ns, "patch", "mos", &twin, "--type=json", "-p", strip]).await.unwrap().success);
    w.exec_until("alice", AUTH, &name, None).await;
    w.exec_until("bob", AUTH, &name, Some(Refusal::Webhook)).await;
    w.installed.remove().await.unwrap();
}

/// `pods/proxy` names the pod with its port and scheme (`POD:8080`, `https:POD:8443`): each form
/// reaches the same pod, so the webhook refuses a stranger in every form as it refuses `POD`
/// itself, and lets the owner through; with the webhook down, every form is refused (the
/// matchCondition sends each one: none slips past a gate that is not there).
#[tokio::test]
async fn a_proxy_with_a_port_or_a_scheme_is_refused_like_the_pod_itself() {
    let mut w = World::start("access-proxy").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    w.pod(WEB_POD).await;
    w.exec_until("bob", AUTH, WEB_POD, Some(Refusal::Webhook)).await;
    for up in [true, false] {
        if !up {
            w.webhook.stop(Duration::from_secs(5)).unwrap();
            w.exec_until("bob", AUTH, WEB_POD, Some(Refusal::WebhookDown)).await;
        }
        for form in PROXY_NAME_FORMS {
            let path = format!("/api/v1/namespaces/{}/pods/{}/proxy/", w.ns, form.replace("{pod}", WEB_POD));
            let bob = w.as_user("bob", AUTH, &["get", "--raw", &path]).await;
            let alice = w.as_user("alice", AUTH, &["get", "--raw", &path]).await;
            if up {
                assert_eq!(refusal(&bob), Some(Refusal::Webhook), "bob through {form}: {}", bob.stderr);
                assert!(bob.stderr.contains(&format!("pod {WEB_POD}: it runs shell")), "{form}: {}", bob.stderr);
                assert_eq!(refusal(&alice), None, "alice through {form}: {}", alice.stderr);
            } else {
                for (who, out) in [("bob", &bob), ("alice", &alice)] {
                    assert_eq!(refusal(out), Some(Refusal::WebhookDown), "{who} through {form}: {}", out.stderr);
                }
            }
        }
    }
    w.installed.remove().await.unwrap();
}

#[tokio::test]
async fn every_connection_leaves_an_event_a_count_and_the_last_one_in_the_status() {
    let w = World::start("access-record").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    w.pod(WEB_POD).await;
    w.exec_until("alice", AUTH, WEB_POD, None).await;
    w.exec_until("bob", AUTH, WEB_POD, Some(Refusal::Webhook)).await;

    let last = eventually("status.lastConnection", TIMEOUT, || async {
        let shell = w.shells().get("web").await.map_err(|e| e.to_string())?;
        shell.status.and_then(|s| s.last_connection).ok_or("none yet".to_owned())
    })
    .await
    .unwrap();
    assert_eq!((last.user.as_str(), last.pod.as_str(), last.kind.as_str()), ("alice", WEB_POD, "exec"));

    let events: Api<Event> = Api::namespaced(w.client.clone(), &w.ns);
    let notes = eventually("a Connected and a ConnectionDenied Event", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let about_web = |reason: &str| {
            list.items.iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
            })
        };
        match (about_web(reasons::CONNECTED), about_web(reasons::CONNECTION_DENIED)) {
            (Some(allowed), Some(denied)) => Ok((allowed.clone(), denied.clone())),
            _ => Err(format!("{} events", list.items.len())),
        }
    })
    .await
    .unwrap();
    let (allowed, denied) = notes;
    assert!(
        allowed.note.as_deref().unwrap_or_default().starts_with(&format!("alice connected to pod {WEB_POD} (exec)"))
    );
    assert_eq!((allowed.type_.as_deref(), allowed.action.as_deref()), (Some("Normal"), Some("Exec")));
    assert!(
        denied.note.as_deref().unwrap_or_default().starts_with(&format!("bob was refused exec into pod {WEB_POD}"))
    );
    assert_eq!(denied.type_.as_deref(), Some("Warning"));
    assert_eq!(denied.related.and_then(|r| r.name).as_deref(), Some(WEB_POD));

    // An administrator's break-glass connection: let in, and recorded under their own name.
    let admins = &["system:masters", "system:authenticated"];
    w.exec_until("root", admins, WEB_POD, None).await;
    let by_admin = eventually("root's Connected Event", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let notes: Vec<String> = list.items.into_iter().filter_map(|e| e.note).collect();
        notes.iter().find(|n| n.starts_with("root connected")).cloned().ok_or(format!("{notes:?}"))
    })
    .await
    .unwrap();
    assert!(by_admin.ends_with("an administrator (a group of the webhook's --admin-groups)"), "{by_admin}");

    let metrics = w.webhook.metrics(&w.client).await.unwrap();
    for want in [
        "myownshell_webhook_connections_total{kind=\"exec\",result=\"allowed\"}",
        "myownshell_webhook_connections_total{kind=\"exec\",result=\"denied\"}",
    ] {
        let count = metrics.lines().find(|l| l.starts_with(want)).and_then(|l| l.rsplit(' ').next()).unwrap_or("0");
        assert!(count.parse::<f64>().unwrap_or(0.0) >= 1.0, "{want} {count}\n{metrics}");
    }
    w.installed.remove().await.unwrap();
}

/// The connect webhook's answers leave a record (an Event naming the user, `lastConnection`, which
/// the idle timer reads), so it answers only the apiserver, proven by the client certificate the
/// apiserver presents (`--apiserver-client-ca-file`): a review posted by anyone else who reaches
/// the port ("alice connected", to keep her shell from idling) gets 403 and leaves nothing.
#[tokio::test]
async fn only_the_apiserver_is_answered_on_the_connect_path() {
    let w = World::start("access-forged").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    w.pod(WEB_POD).await;
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "forged-1", "kind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "exec",
        "requestKind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"}, "requestSubResource": "exec",
        "name": WEB_POD, "namespace": w.ns, "operation": "CONNECT",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": {"apiVersion": "v1", "kind": "PodExecOptions", "command": ["sh"]}, "dryRun": false}});
    let mut conn =
        myownshell_tests::tls_client::HttpsConnection::connect(w.webhook.addr(), None, "127.0.0.1").await.unwrap();
    let body = serde_json::to_vec(&review).unwrap();
    let (status, text) = conn.post(myownshell_api::names::CONNECT_PATH, body.clone()).await.unwrap();
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&text));
    // The same review, through the apiserver (bob's exec, refused): answered and recorded.
    w.exec_until("bob", AUTH, WEB_POD, Some(Refusal::Webhook)).await;
    let events: Api<Event> = Api::namespaced(w.client.clone(), &w.ns);
    let notes = eventually("bob's ConnectionDenied Event", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let notes: Vec<String> = list.items.into_iter().filter_map(|e| e.note).collect();
        if notes.iter().any(|n| n.starts_with("bob was refused")) { Ok(notes) } else { Err(format!("{notes:?}")) }
    })
    .await
    .unwrap();
    assert!(!notes.iter().any(|n| n.starts_with("alice connected")), "the forged review was recorded: {notes:?}");
    let shell = w.shells().get("web").await.unwrap();
    assert_eq!(shell.status.and_then(|s| s.last_connection), None, "the forged review moved lastConnection");
    w.installed.remove().await.unwrap();
}

/// `status.lastConnection` never moves back: a record that comes late (another webhook replica
/// wrote a later connection first, or the write waited in the queue) leaves the later one, and a
/// later one replaces it. The writer itself, against the real apiserver.
#[tokio::test]
async fn the_last_connection_never_moves_back() {
    let w = World::start("access-latest").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    let shell = w.shells().get("web").await.unwrap();
    let later = k8s_openapi::jiff::Timestamp::now().as_second() + 3600;
    let recorded = json!({"status": {"lastConnection": {
        "user": "alice", "time": myownshell_runtime::time::at_second(later), "pod": WEB_POD, "kind": "exec"
    }}});
    w.shells().patch_status("web", &PatchParams::default(), &Patch::Merge(&recorded)).await.unwrap();
    let connection = |user: &str| Connection {
        kind: ConnectKind::Exec,
        namespace: w.ns.clone(),
        pod: WEB_POD.to_owned(),
        shell: std::sync::Arc::new(ShellAccess {
            name: "web".into(),
            uid: shell.metadata.uid.clone(),
            ..ShellAccess::default()
        }),
        user: user.to_owned(),
        grant: Some(Grant::Owner),
        dry_run: false,
    };
    let last = || async { w.shells().get("web").await.unwrap().status.unwrap().last_connection.unwrap() };

    let now = k8s_openapi::jiff::Timestamp::now();
    write_last_connection(&w.shells(), &connection("bob"), now).await.unwrap();
    let kept = last().await;
    assert_eq!((kept.user.as_str(), kept.time.0.as_second()), ("alice", later), "moved back to {now}");

    let after = k8s_openapi::jiff::Timestamp::from_second(later + 60).unwrap();
    write_last_connection(&w.shells(), &connection("bob"), after).await.unwrap();
    let moved = last().await;
    assert_eq!((moved.user.as_str(), moved.time.0.as_second()), ("bob", later + 60));
    w.installed.remove().await.unwrap();
}

#[tokio::test]
async fn the_plugin_takes_kubectls_global_flags_and_says_a_refusal_once() {
    let w = &World::start("access-plugin").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    let kubeconfig = shared().kubeconfig_path();
    let as_user = |user: &'static str, command: &'static str| {
        let kubeconfig = kubeconfig.clone();
        let args = [command, "web", "--as", user, "--as-group", "system:authenticated", "--request-timeout=30s"];
        let out = myownshell_tests::plugin::run(&kubeconfig, &w.ns, &args).unwrap();
        async move { out }
    };
    let bob = as_user("bob", "stop").await;
    assert_eq!(bob.code, 1, "{}", bob.stderr);
    let refusal = "spec: only the shell's owner alice (or a member of system:masters) may change it, not bob";
    assert_eq!(bob.stderr.matches(refusal).count(), 1, "the refusal once: {}", bob.stderr);
    assert_eq!(bob.stderr.lines().count(), 1, "one line: {}", bob.stderr);
    assert!(bob.stderr.starts_with("error: ") && !bob.stderr.contains("Status"), "{}", bob.stderr);
    let alice = as_user("alice", "stop").await;
    assert_eq!(alice.code, 0, "the owner, by --as: {}", alice.stderr);
    assert_eq!(w.shells().get("web").await.unwrap().spec.stopped, Some(true));
    let nobody = myownshell_tests::plugin::run(&kubeconfig, &w.ns, &["ls", "--token", "not-a-token"]).unwrap();
    assert_eq!(nobody.code, 1, "{}", nobody.stderr);
    assert_eq!(nobody.stderr.lines().count(), 1, "{}", nobody.stderr);
    assert!(nobody.stderr.contains("Unauthorized"), "a bad --token is used, not the kubeconfig's: {}", nobody.stderr);
}

#[tokio::test]
async fn only_the_owner_changes_a_shell_and_nobody_its_owner() {
    let w = &World::start("access-spec").await;
    assert!(w.apply_shell("alice", "web", "{size: 1}").await.success);
    let patch = |user: &'static str, body: &'static str| async move {
        w.as_user(user, AUTH, &["patch", "mos", "web", "--type=merge", "-p", body]).await
    };
    let bob = patch("bob", r#"{"spec":{"sharedWith":{"users":["bob"]}}}"#).await;
    assert!(
        !bob.success
            && bob
                .stderr
                .contains("spec: only the shell's owner alice (or a member of system:masters) may change it, not bob"),
        "{}",
        bob.stderr
    );
    let command = patch("bob", r#"{"spec":{"command":["sh","-c","steal"]}}"#).await;
    assert!(!command.success && command.stderr.contains("only the shell's owner alice"), "{}", command.stderr);
    let scale = w.as_user("bob", AUTH, &["scale", "mos/web", "--replicas=3"]).await;
    assert!(!scale.success && scale.stderr.contains("only the shell's owner alice"), "{}", scale.stderr);
    // Nor its metadata (config/policy/shell_metadata.yaml).
    let labels = w.as_user("bob", AUTH, &["label", "mos/web", "team=a"]).await;
    assert!(
        !labels.success && labels.stderr.contains("ValidatingAdmissionPolicy 'shell-metadata'"),
        "an editor's label on alice's shell: {}",
        labels.stderr
    );
    assert!(w.as_user("alice", AUTH, &["label", "mos/web", "team=a"]).await.success, "the owner's own label");

    assert!(patch("alice", r#"{"spec":{"sharedWith":{"users":["bob"]}}}"#).await.success);
    assert!(w.as_user("alice", AUTH, &["scale", "mos/web", "--replicas=2"]).await.success);
    let handover = patch("alice", r#"{"spec":{"owner":"bob"}}"#).await;
    // (The schema's own rule refuses it before the webhook hears of it.)
    assert!(!handover.success && handover.stderr.contains("cannot be changed"), "{}", handover.stderr);
    // An administrator (system:masters, --admin-groups) may change the spec, not the owner.
    let admin = w
        .kubectl
        .run(&["-n", &w.ns, "patch", "mos", "web", "--type=merge", "-p", r#"{"spec":{"size":3}}"#])
        .await
        .unwrap();
    assert!(admin.success, "{}", admin.stderr);
    let web = w.shells().get("web").await.unwrap();
    assert_eq!((web.spec.owner.as_deref(), web.spec.size), (Some("alice"), Some(3)));
    // A server-side apply whose manifest never named the owner drops the field its manager owns
    // (the owner was stamped into its first apply); the webhook puts it back.
    let ssa = |spec: &'static str| async move {
        let mut args = myownshell_tests::access::as_user("alice", AUTH);
        args.extend(["apply", "--server-side", "-n", &w.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        w.kubectl.run_with_stdin(&args, Some(&shell_manifest("ssa", spec))).await.unwrap()
    };
    assert!(ssa("{size: 1}").await.success);
    let again = ssa("{size: 2}").await;
    assert!(again.success, "{}", again.stderr);
    let ssa_shell = w.shells().get("ssa").await.unwrap();
    assert_eq!((ssa_shell.spec.owner.as_deref(), ssa_shell.spec.size), (Some("alice"), Some(2)));

    // A create that names someone else is stamped with the requester.
    let spoofed = w.apply_shell("bob", "spoof", "{owner: alice}").await;
    assert!(spoofed.success, "{}", spoofed.stderr);
    assert_eq!(w.shells().get("spoof").await.unwrap().spec.owner.as_deref(), Some("bob"));
    // Sharing with requests nobody signed is refused; wide shares pass with a warning.
    let anonymous = w.apply_shell("alice", "open", "{sharedWith: {groups: [system:unauthenticated]}}").await;
    assert!(!anonymous.success && anonymous.stderr.contains("spec.sharedWith.groups[0]"), "{}", anonymous.stderr);
    let wide = w.apply_shell("alice", "wide", "{sharedWith: {groups: [system:authenticated]}}").await;
    assert!(
        wide.success && wide.stderr.contains("Warning: spec.sharedWith.groups[0]: system:authenticated opens"),
        "{}",
        wide.stderr
    );
    w.installed.remove().await.unwrap();
}

#[tokio::test]
async fn editors_cannot_plant_a_lookalike_or_change_a_shells_pods_and_deployment() {
    let w = &World::start("access-guard").await;
    let instance = "web";
    let labels = json!({"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": instance});
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
               "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}})
        .to_string()
    };
    let create_as = |user: &'static str, manifest: String| async move {
        let mut args = myownshell_tests::access::as_user(user, AUTH);
        args.extend(["create", "-n", &w.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        w.kubectl.run_with_stdin(&args, Some(&manifest)).await.unwrap()
    };
    let policy_refusal =
        |out: &KubectlOutput| !out.success && out.stderr.contains("ValidatingAdmissionPolicy 'shell-workloads'");

    // A lookalike: refused to an editor and to an administrator alike.
    let lookalike = create_as("bob", pod("web-7d9f8c6b4-b2c4d")).await;
    assert!(
        policy_refusal(&lookalike) && lookalike.stderr.contains("a lookalike would be picked"),
        "{}",
        lookalike.stderr
    );
    let admin =
        w.kubectl.run_with_stdin(&["create", "-n", &w.ns, "-f", "-"], Some(&pod("web-7d9f8c6b4-b2c4e"))).await.unwrap();
    assert!(policy_refusal(&admin), "{admin:?}");
    // The ReplicaSet controller makes them (impersonated here: this plane runs no controllers).
    let made = create_as("system:serviceaccount:kube-system:replicaset-controller", pod(WEB_POD)).await;
    assert!(made.success, "{}", made.stderr);

    // Relabel, re-own or re-image a shell's pod: refused.
    for args in [
        vec!["label", "pod", WEB_POD, "app.kubernetes.io/instance-"],
        vec!["label", "pod", WEB_POD, "--overwrite", "app.kubernetes.io/instance=mine"],
        vec!["patch", "pod", WEB_POD, "--type=merge", "-p", r#"{"metadata":{"ownerReferences":[]}}"#],
        vec!["set", "image", &format!("pod/{WEB_POD}"), "shell=evil:1"],
        vec!["annotate", "pod", WEB_POD, "x=y"],
    ] {
        let out = w.as_user("bob", AUTH, &args).await;
        assert!(
            policy_refusal(&out) && out.stderr.contains("changed only by Kubernetes' controllers"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // Relabelling one's own pod into a shell's: refused too.
    assert!(create_as("bob", pod("plain").replace("myownshell", "other")).await.success);
    let adopt =
        w.as_user("bob", AUTH, &["label", "pod", "plain", "--overwrite", "app.kubernetes.io/name=myownshell"]).await;
    assert!(policy_refusal(&adopt), "{}", adopt.stderr);

    // A Deployment or ReplicaSet whose pods would look like a shell's: the operator's alone.
    let template =
        json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "shell", "image": "evil:1"}]}});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "planted"},
        "spec": {"selector": {"matchLabels": labels}, "template": template}});
    let planted = create_as("bob", deployment.to_string()).await;
    assert!(
        policy_refusal(&planted) && planted.stderr.contains("only by the MyOwnShell operator"),
        "{}",
        planted.stderr
    );
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "planted"},
        "spec": {"selector": {"matchLabels": labels}, "template": template}});
    let planted_rs = create_as("bob", rs.to_string()).await;
    assert!(policy_refusal(&planted_rs), "{}", planted_rs.stderr);
    // A tenant administrator (every verb on every resource of the namespace, so also the right to
    // write shells' status) is no operator: the operator is told by its own identity.
    let tenant_admin = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "tenant-admin"},
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "tenant-admin"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant-admin"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tina"}]}]});
    let granted =
        w.kubectl.run_with_stdin(&["create", "-n", &w.ns, "-f", "-"], Some(&tenant_admin.to_string())).await.unwrap();
    assert!(granted.success, "{}", granted.stderr);
    let by_tenant_admin = create_as("tina", deployment.to_string()).await;
    assert!(
        policy_refusal(&by_tenant_admin) && by_tenant_admin.stderr.contains("only by the MyOwnShell operator"),
        "{}",
        by_tenant_admin.stderr
    );
    // The operator (impersonated) makes one; an editor cannot change it.
    let operator = "system:serviceaccount:myownshell-system:myownshell-controller";
    namespace_editors(&w.client, &w.ns, &["alice", "bob", "carol", operator], &["devs"]).await.unwrap();
    let ours = create_as(operator, deployment.to_string()).await;
    assert!(ours.success, "{}", ours.stderr);
    let edit = w.as_user("bob", AUTH, &["set", "image", "deployment/planted", "shell=worse:1"]).await;
    assert!(policy_refusal(&edit), "{}", edit.stderr);
    // Nor mount a shell's home into it, to read it from a pod of the shell's own making.
    let mount = r#"{"spec":{"template":{"spec":{"volumes":[{"name":"h","persistentVolumeClaim":{"claimName":"myownshell-home-web"}}]}}}}"#;
    let mounted = w.as_user("bob", AUTH, &["patch", "deployment", "planted", "--type=merge", "-p", mount]).await;
    assert!(!mounted.success && mounted.stderr.contains("ValidatingAdmissionPolicy 'shell-"), "{}", mounted.stderr);
    w.installed.remove().await.unwrap();
}

/// `services/proxy` reaches whatever a Service's endpoints name, which an editor decides (a
/// selector that picks alice's pod, or Endpoints written by hand): in a namespace with shells it
/// is let through only for someone who may connect to every one of them
/// (`config/policy/services_proxy.yaml`).
#[tokio::test]
async fn a_service_proxy_reaches_no_shell_of_someone_else() {
    let w = &World::start("access-svc").await;
    for (user, name) in [("alice", "web"), ("bob", "bobs")] {
        let out = w.apply_shell(user, name, "{size: 1}").await;
        assert!(out.success, "{}", out.stderr);
    }
    let service = |name: &str, selector: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": selector, "ports": [{"port": 8080}]}})
        .to_string()
    };
    let create = |manifest: String| async move {
        let mut args = myownshell_tests::access::as_user("bob", AUTH);
        args.extend(["create", "-n", &w.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = w.kubectl.run_with_stdin(&args, Some(&manifest)).await.unwrap();
        assert!(out.success, "{}", out.stderr);
    };
    // A Service that picks alice's pod, and one routed by hand (its Endpoints would name her
    // pod's address; nothing runs on this plane, so none is written).
    create(service("steal", json!({"app.kubernetes.io/instance": "web"}))).await;
    create(service("by-hand", json!(null))).await;
    let proxy = |user: &'static str, ns: String, svc: &'static str| async move {
        let path = format!("/api/v1/namespaces/{ns}/services/{svc}:8080/proxy/");
        kubectl_as(&w.kubectl, user, AUTH, &["get", "--raw", &path]).await
    };
    let refused = |out: &KubectlOutput| !out.success && out.stderr.contains("may not proxy to service");
    for svc in ["steal", "by-hand"] {
        let seen = eventually(&format!("bob's proxy to {svc} refused"), TIMEOUT, || async {
            let out = proxy("bob", w.ns.clone(), svc).await;
            if refused(&out) { Ok(out) } else { Err(out.stderr) }
        })
        .await
        .unwrap();
        assert!(seen.stderr.contains("shell web (a MyOwnShell), which only its owner alice"), "{}", seen.stderr);
    }
    // alice may not reach bob's shell, so not through a Service either.
    assert!(refused(&proxy("alice", w.ns.clone(), "steal").await));
    // With bob's shell gone, every shell of the namespace is alice's: hers gets through admission
    // (and fails after it, for want of a running pod), bob's still does not.
    assert!(w.as_user("bob", AUTH, &["delete", "mos", "bobs", "--wait=false"]).await.success);
    let strip = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    assert!(w.kubectl.run(&["-n", &w.ns, "patch", "mos", "bobs", "--type=json", "-p", strip]).await.unwrap().success);
    let alices = eventually("alice's proxy past admission", TIMEOUT, || async {
        let out = proxy("alice", w.ns.clone(), "steal").await;
        if !out.stderr.contains("ValidatingAdmissionPolicy") { Ok(out) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
    assert!(!alices.success, "nothing runs here: {}", alices.stdout);
    assert!(refused(&proxy("bob", w.ns.clone(), "steal").await));
    // A namespace without shells: untouched.
    let plain = create_namespace(&w.client, "access-svc-plain").await.unwrap();
    namespace_editors(&w.client, &plain, &["bob"], &[]).await.unwrap();
    let manifest = service("app", json!({"app": "x"}));
    let out = w.kubectl.run_with_stdin(&["create", "-n", &plain, "-f", "-"], Some(&manifest)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    let untouched = proxy("bob", plain.clone(), "app").await;
    assert!(!untouched.stderr.contains("ValidatingAdmissionPolicy"), "{}", untouched.stderr);
    w.installed.remove().await.unwrap();
}

/// A shell in a namespace below Pod Security `baseline` (where an editor may run a privileged or
/// hostPath pod beside it) is created with a warning, or refused where the binding denies
/// (`config/policy/pod_security.yaml`); a namespace at `baseline` gets neither.
#[tokio::test]
async fn shells_in_namespaces_below_pod_security_baseline_are_warned_of_or_refused() {
    let w = &World::start("access-psa").await;
    let warning = "enforces Pod Security level privileged (label pod-security.kubernetes.io/enforce)";
    let warned = eventually("a warning for a shell in a namespace at the default level", TIMEOUT, || async {
        let out = w.apply_shell("alice", "warned", "{size: 0}").await;
        if out.success && out.stderr.contains("Warning: ") && out.stderr.contains(warning) {
            Ok(out)
        } else {
            Err(out.stderr)
        }
    })
    .await
    .unwrap();
    assert!(warned.stderr.contains("beside shell warned"), "{}", warned.stderr);
    // Where the binding denies (here one of the test's own, for its namespace only): refused.
    let deny = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": format!("pod-security-deny-{}", w.ns)},
        "spec": {"policyName": "shell-namespace-pod-security", "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": w.ns}}}}});
    let out = w.kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&deny.to_string())).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    // (A name per try: a try that came before the binding was in force made its shell.)
    let tries = std::sync::atomic::AtomicUsize::new(0);
    eventually("a refusal where the binding denies", TIMEOUT, || async {
        let name = format!("refused-{}", tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let out = w.apply_shell("alice", &name, "{size: 0}").await;
        if !out.success && out.stderr.contains(warning) { Ok(()) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
    // At baseline: admitted, and no warning.
    let label = ["label", "namespace", w.ns.as_str(), "pod-security.kubernetes.io/enforce=baseline"];
    assert!(w.kubectl.run(&label).await.unwrap().success);
    let admitted = eventually("a shell admitted at baseline", TIMEOUT, || async {
        let name = format!("admitted-{}", tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let out = w.apply_shell("alice", &name, "{size: 0}").await;
        if out.success { Ok(out) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
    assert!(!admitted.stderr.contains("Pod Security"), "{}", admitted.stderr);
    let name = format!("validatingadmissionpolicybinding/pod-security-deny-{}", w.ns);
    assert!(w.kubectl.run(&["delete", &name]).await.unwrap().success);
    w.installed.remove().await.unwrap();
}

/// A shell's name is its Deployment's: an editor cannot take it first (a Deployment named as the
/// shell, a ReplicaSet named as one of its), so the shell never stands still behind a squatter
/// and `deploy/NAME` never leads into someone else's pod (`config/policy/shell_names.yaml`).
#[tokio::test]
async fn nobody_takes_a_shells_name_for_a_deployment() {
    let w = &World::start("access-names").await;
    let out = w.apply_shell("alice", "web", "{size: 1}").await;
    assert!(out.success, "{}", out.stderr);
    let workload = |kind: &str, name: &str| {
        let labels = json!({"app": name});
        json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
               "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "busybox:1.37.0"}]}}}})
        .to_string()
    };
    let create = |manifest: String| async move {
        let mut args = myownshell_tests::access::as_user("bob", AUTH);
        args.extend(["create", "-n", &w.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        w.kubectl.run_with_stdin(&args, Some(&manifest)).await.unwrap()
    };
    let squat = eventually("bob's Deployment named web refused", TIMEOUT, || async {
        let out = create(workload("Deployment", "web")).await;
        if !out.success { Ok(out) } else { Err("created".to_owned()) }
    })
    .await
    .unwrap();
    assert!(squat.stderr.contains("the name is shell web's (a MyOwnShell)"), "{}", squat.stderr);
    let rs = create(workload("ReplicaSet", "web-7d9f8c6b4")).await;
    assert!(!rs.success && rs.stderr.contains("shell-names"), "{}", rs.stderr);
    // Other names are free, a shell's name with more after it too.
    for (kind, name) in [("Deployment", "web-db"), ("ReplicaSet", "web-db-7d9f8c6b4"), ("Deployment", "api")] {
        let out = create(workload(kind, name)).await;
        assert!(out.success, "{kind} {name}: {}", out.stderr);
    }
    w.installed.remove().await.unwrap();
}

/// A new shell inherits no pod: while pods named as its own run (an earlier shell's, whose
/// finalizer was taken off by hand, or another workload's), its creation is refused, naming them;
/// the gate would otherwise hand them to its creator.
#[tokio::test]
async fn a_new_shell_inherits_no_running_pod() {
    let w = World::start("access-inherit").await;
    let left = "old-7d9f8c6b4-x2x4z";
    w.pod(left).await;
    let refused = w.apply_shell("bob", "old", "{size: 1}").await;
    assert!(
        !refused.success && refused.stderr.contains(&format!("pods named as shell old's still run ({left})")),
        "{}",
        refused.stderr
    );
    assert!(w.shells().get_opt("old").await.unwrap().is_none());
    // Other names are free, and once the pod is gone so is this one.
    assert!(w.apply_shell("bob", "other", "{size: 1}").await.success);
    Api::<Pod>::namespaced(w.client.clone(), &w.ns).delete(left, &kube::api::DeleteParams::default()).await.unwrap();
    let admitted = eventually("bob's shell old admitted once the pod is gone", TIMEOUT, || async {
        let out = w.apply_shell("bob", "old", "{size: 1}").await;
        if out.success { Ok(()) } else { Err(out.stderr) }
    })
    .await;
    admitted.unwrap();
    w.installed.remove().await.unwrap();
}

/// Only the owner, an administrator, the operator and namespace deletion end a shell (delete it
/// or take its finalizer off), and nobody orphans one (`config/policy/shell_deletion.yaml`).
#[tokio::test]
async fn only_the_owner_ends_a_shell_and_nobody_orphans_it() {
    let w = &World::start("access-delete").await;
    let operator = "system:serviceaccount:myownshell-system:myownshell-controller";
    // (Given the rights the others have, here as one more editor of the namespace.)
    namespace_editors(&w.client, &w.ns, &["alice", "bob", "carol", operator], &["devs"]).await.unwrap();
    for name in ["web", "second", "third", "fourth"] {
        let out = w.apply_shell("alice", name, "{size: 0}").await;
        assert!(out.success, "{}", out.stderr);
    }
    let refused = |out: &KubectlOutput, what: &str| {
        !out.success && out.stderr.contains("ValidatingAdmissionPolicy 'shell-deletion'") && out.stderr.contains(what)
    };
    let strip = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;

    // An editor: no delete, no finalizer off, no orphan finalizer on.
    let delete = w.as_user("bob", AUTH, &["delete", "mos", "web", "--wait=false"]).await;
    assert!(
        refused(&delete, "bob may not delete shell") && delete.stderr.contains("only its owner alice"),
        "{}",
        delete.stderr
    );
    // On a live shell the mutating webhook puts the finalizer back (the policy refuses it where
    // the webhook does not: while the shell is being deleted, below, or with the webhook down).
    let stripped = w.as_user("bob", AUTH, &["patch", "mos", "web", "--type=json", "-p", strip]).await;
    let finalizers = w.shells().get("web").await.unwrap().metadata.finalizers.unwrap_or_default();
    assert!(
        refused(&stripped, "bob may not remove the finalizer") || finalizers == ["myownshell.io/finalizer"],
        "{finalizers:?}: {}",
        stripped.stderr
    );
    let orphan_finalizer = r#"{"metadata":{"finalizers":["myownshell.io/finalizer","orphan"]}}"#;
    // (bob, no owner, is refused any change of the shell's metadata by shell-metadata first.)
    let out = w.as_user("bob", AUTH, &["patch", "mos", "web", "--type=merge", "-p", orphan_finalizer]).await;
    let by_metadata = out.stderr.contains("ValidatingAdmissionPolicy 'shell-metadata'");
    assert!(refused(&out, "cannot take the 'orphan' finalizer") || by_metadata, "bob: {}", out.stderr);
    let out = w.as_user("alice", AUTH, &["patch", "mos", "web", "--type=merge", "-p", orphan_finalizer]).await;
    assert!(refused(&out, "cannot take the 'orphan' finalizer"), "alice: {}", out.stderr);
    // Orphaning: refused to the owner and to an administrator alike.
    let orphan = w.as_user("alice", AUTH, &["delete", "mos", "web", "--cascade=orphan", "--wait=false"]).await;
    assert!(refused(&orphan, "cannot be orphaned"), "{}", orphan.stderr);
    let admin_orphan = w.kubectl.run(&["-n", &w.ns, "delete", "mos", "web", "--cascade=orphan", "--wait=false"]).await;
    assert!(refused(&admin_orphan.unwrap(), "cannot be orphaned"));
    assert!(w.shells().get("web").await.unwrap().metadata.deletion_timestamp.is_none());

    // The owner, an administrator, the operator: each ends one.
    let owner = w.as_user("alice", AUTH, &["delete", "mos", "web", "--wait=false"]).await;
    assert!(owner.success, "{}", owner.stderr);
    let admin = w.kubectl.run(&["-n", &w.ns, "delete", "mos", "second", "--wait=false"]).await.unwrap();
    assert!(admin.success, "{}", admin.stderr);
    let by_operator = w.as_user(operator, AUTH, &["delete", "mos", "third", "--wait=false"]).await;
    assert!(by_operator.success, "{}", by_operator.stderr);
    // While it is being deleted, the finalizer stays the operator's (and the owner's) to remove.
    let late = w.as_user("bob", AUTH, &["patch", "mos", "web", "--type=json", "-p", strip]).await;
    assert!(refused(&late, "bob may not remove the finalizer"), "{}", late.stderr);
    for name in ["web", "second", "third"] {
        let released = w.as_user(operator, AUTH, &["patch", "mos", name, "--type=json", "-p", strip]).await;
        assert!(released.success, "{name}: {}", released.stderr);
    }
    // With the webhook gone (nothing puts a finalizer back), the policy alone keeps it on.
    w.installed.remove().await.unwrap();
    eventually("bob's strip of fourth's finalizer refused by the policy alone", TIMEOUT, || async {
        let out = w.as_user("bob", AUTH, &["patch", "mos", "fourth", "--type=json", "-p", strip]).await;
        let finalizers = w.shells().get("fourth").await.map_err(|e| e.to_string())?.metadata.finalizers;
        assert_eq!(finalizers.unwrap_or_default(), ["myownshell.io/finalizer"], "stripped: {}", out.stderr);
        if refused(&out, "bob may not remove the finalizer") { Ok(()) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
}

/// One decision table, two deciders: every row of the webhook's decision table is asked of the
/// real apiserver as an exec into the row's shell (the webhook decides) and as a request proxied
/// through a Service (the `services-proxy` policy decides in CEL), each in a namespace of its own
/// whose only shell is the row's. The shells are made before the webhook looks at their
/// namespaces, so the row's owner stands (the mutating webhook stamps the requester).
#[tokio::test]
async fn the_webhook_and_the_services_proxy_policy_decide_every_row_alike() {
    let w = World::start("access-table").await;
    let label = "myownshell.test/decision-table";
    let mut rows = Vec::new();
    for (i, case) in DECISION_TABLE.iter().enumerate() {
        let ns = create_shell_namespace(&w.client, &format!("access-table-{i}")).await.unwrap();
        let labelled = json!({"metadata": {"labels": {label: w.ns}}});
        Api::<Namespace>::all(w.client.clone())
            .patch(&ns, &PatchParams::default(), &Patch::Merge(&labelled))
            .await
            .unwrap();
        namespace_editors(&w.client, &ns, &["alice", "bob", "carol"], &["devs"]).await.unwrap();
        let mut spec = json!({"sharedWith": {"users": case.users, "groups": case.groups}});
        if let Some(owner) = case.owner {
            spec["owner"] = json!(owner);
        }
        if let Some(uid) = case.owner_uid {
            spec["ownerUID"] = json!(uid);
        }
        let shell: MyOwnShell = serde_json::from_value(json!({
            "apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "row"}, "spec": spec
        }))
        .unwrap();
        Api::<MyOwnShell>::namespaced(w.client.clone(), &ns).create(&PostParams::default(), &shell).await.unwrap();
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "app"},
                             "spec": {"ports": [{"port": 8080}]}});
        let made = w.kubectl.run_with_stdin(&["create", "-n", &ns, "-f", "-"], Some(&service.to_string())).await;
        assert!(made.unwrap().success);
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "row-7d9f8c6b4-x2x4z"},
            "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}}))
        .unwrap();
        Api::<Pod>::namespaced(w.client.clone(), &ns).create(&PostParams::default(), &pod).await.unwrap();
        rows.push((case, ns));
    }
    let ca = secret_pem(&w.client, &w.ns, "webhook-server-cert", "ca.crt").await.unwrap();
    let target = Target {
        base_url: format!("https://127.0.0.1:{}", w.webhook.port),
        ca_bundle: Some(ca),
        namespace: String::new(),
    };
    let selector =
        LabelSelector { match_labels: Some([(label.to_owned(), w.ns.clone())].into()), ..Default::default() };
    let table =
        InstalledWebhooks::install_selecting(&w.client, &format!("{}-table", w.ns), &target, &selector).await.unwrap();
    for (case, ns) in rows {
        let uid = case.user_uid.map(|uid| format!("--as-uid={uid}"));
        let path = format!("/api/v1/namespaces/{ns}/services/app:8080/proxy/");
        let exec: Vec<String> = uid
            .iter()
            .cloned()
            .chain(["-n", &ns, "exec", "row-7d9f8c6b4-x2x4z", "--", "true"].map(str::to_owned))
            .collect();
        let proxy: Vec<String> = uid.iter().cloned().chain(["get", "--raw", &path].map(str::to_owned)).collect();
        let seen = eventually(&format!("row {:?}", case.what), TIMEOUT, || async {
            let exec: Vec<&str> = exec.iter().map(String::as_str).collect();
            let out = kubectl_as(&w.kubectl, case.user, case.user_groups, &exec).await;
            let by_webhook = refusal(&out);
            let want = case.grant.map_or(Some(Refusal::Webhook), |_| None);
            if by_webhook != want || (want.is_none() && !admitted(&out)) {
                return Err(format!("the webhook: {by_webhook:?}: {}", out.stderr));
            }
            let proxy: Vec<&str> = proxy.iter().map(String::as_str).collect();
            let out = kubectl_as(&w.kubectl, case.user, case.user_groups, &proxy).await;
            let by_policy = out.stderr.contains("may not proxy to service");
            match (case.grant.is_some(), by_policy, out.stderr.contains("ValidatingAdmissionPolicy")) {
                (true, false, false) | (false, true, true) => Ok(()),
                _ => Err(format!("the services-proxy policy: {}", out.stderr)),
            }
        })
        .await;
        seen.unwrap_or_else(|e| panic!("row {:?} is not decided as the table says: {e}", case.what));
    }
    table.remove().await.unwrap();
    w.installed.remove().await.unwrap();
}

/// A home claim (`myownshell-home-<shell>`) is a door into a shell's files: an editor cannot
/// plant one, take one over, delete one, or mount one in a pod of their own (a lookalike, a
/// `kubectl debug --copy-to` copy, a Job's pod); only the shell's own pod, made by the
/// ReplicaSet controller from the shell's ReplicaSet, mounts it (`config/policy/shell_homes.yaml`).
#[tokio::test]
async fn editors_cannot_plant_take_delete_or_mount_a_home() {
    let w = &World::start("access-home").await;
    let operator = "system:serviceaccount:myownshell-system:myownshell-controller";
    namespace_editors(&w.client, &w.ns, &["alice", "bob", operator], &[]).await.unwrap();
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "myownshell-home-web", "labels": {"app.kubernetes.io/name": "myownshell"},
                     "annotations": {"myownshell.io/owner": "alice"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    .to_string();
    let create_as = |user: &'static str, manifest: String| async move {
        let mut args = myownshell_tests::access::as_user(user, AUTH);
        args.extend(["create", "-n", &w.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        w.kubectl.run_with_stdin(&args, Some(&manifest)).await.unwrap()
    };
    let refused_by = |out: &KubectlOutput, policy: &str| {
        !out.success && out.stderr.contains(&format!("ValidatingAdmissionPolicy '{policy}'"))
    };

    // Planting a home for someone's next shell: refused; the operator makes them.
    let planted = create_as("bob", claim.clone()).await;
    assert!(
        refused_by(&planted, "shell-homes") && planted.stderr.contains("only the MyOwnShell operator makes"),
        "{}",
        planted.stderr
    );
    let made = create_as(operator, claim).await;
    assert!(made.success, "{}", made.stderr);

    // Whose it is cannot be changed, nor can it be deleted; other annotations are anyone's.
    for args in [
        vec!["label", "pvc", "myownshell-home-web", "app.kubernetes.io/name-"],
        vec!["annotate", "pvc", "myownshell-home-web", "--overwrite", "myownshell.io/owner=bob"],
        vec![
            "patch",
            "pvc",
            "myownshell-home-web",
            "--type=merge",
            "-p",
            r#"{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"mine","uid":"u-1"}]}}"#,
        ],
        vec!["delete", "pvc", "myownshell-home-web", "--wait=false"],
    ] {
        let out = w.as_user("bob", AUTH, &args).await;
        assert!(refused_by(&out, "shell-homes"), "{args:?}: {}", out.stderr);
    }
    assert!(w.as_user("bob", AUTH, &["annotate", "pvc", "myownshell-home-web", "note=mine"]).await.success);

    // Mounting it: only from the shell's own ReplicaSet, as the ReplicaSet controller makes pods.
    let pod = |name: &str, labelled: bool, replica_set: Option<&str>| {
        let mut metadata = json!({"name": name});
        if labelled {
            metadata["labels"] = json!({"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": "web"});
        }
        if let Some(rs) = replica_set {
            metadata["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                                 "uid": "u-rs", "controller": true}]);
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
               "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}],
                        "volumes": [{"name": "h", "persistentVolumeClaim": {"claimName": "myownshell-home-web"}}]}})
        .to_string()
    };
    let replicaset_controller = "system:serviceaccount:kube-system:replicaset-controller";
    let job_controller = "system:serviceaccount:kube-system:job-controller";
    for (what, user, manifest) in [
        ("an editor's own pod", "bob", pod("reader", false, None)),
        ("the owner's own pod, outside the shell", "alice", pod("mine", false, None)),
        (
            "a copy of the shell's pod, without its labels (kubectl debug --copy-to)",
            "bob",
            pod("web-copy", false, Some("web-7d9f8c6b4")),
        ),
        ("a Job's pod", job_controller, pod("reader-job-x2x4z", false, None)),
        (
            "another ReplicaSet's pod, labelled as a shell's",
            replicaset_controller,
            pod("other-7d9f8c6b4-x2x4z", true, Some("other-7d9f8c6b4")),
        ),
        (
            "a pod of ReplicaSet web-x-…, whose shell would be web-x",
            replicaset_controller,
            pod("web-x-7d9f8c6b4-x2x4z", true, Some("web-x-7d9f8c6b4")),
        ),
    ] {
        let out = create_as(user, manifest).await;
        assert!(
            refused_by(&out, "shell-home-mounts") && out.stderr.contains("mounted only by the shell's own pod"),
            "{what}: {}",
            out.stderr
        );
    }
    let own = create_as(replicaset_controller, pod(WEB_POD, true, Some("web-7d9f8c6b4"))).await;
    assert!(own.success, "the shell's own pod: {}", own.stderr);
    w.installed.remove().await.unwrap();
}
