//! The lifetime phase: shells on the real node that stop when idle (warned first), are extended
//! without losing their pod or its files, start again with `spec.size` pods, stop while in use
//! when their run time is up, are deleted after a long stop, and a controller restart in the
//! middle that changes none of it. `kubectl myownshell connect` opens a shell with a
//! pseudo-terminal, as a person at a terminal would.

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use myownshell_api::MyOwnShell;
use myownshell_envtest::eventually;
use myownshell_envtest::kubectl::kubectl_binary;
use myownshell_tests::plugin;

use super::{CONTROLLER, E2e, SYSTEM, TIMEOUT, wait_running};

/// What a file in `/tmp` says, written before an extension, read after it.
const MARKER: &str = "written-before-the-extension";

fn manifest(name: &str, lifetime: &str) -> String {
    format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: {name}\nspec:\n  size: 1\n  lifetime: {lifetime}\n"
    )
}

struct Shells<'e> {
    e2e: &'e E2e,
    ns: String,
    api: Api<MyOwnShell>,
    events: Api<Event>,
}

impl Shells<'_> {
    async fn get(&self, name: &str) -> Result<MyOwnShell, String> {
        self.api.get(name).await.map_err(|e| e.to_string())
    }

    /// Wait until shell `name` satisfies `check`; it, then.
    async fn until(&self, name: &str, what: &str, check: impl Fn(&MyOwnShell) -> Result<(), String>) -> MyOwnShell {
        eventually(&format!("{name}: {what}"), TIMEOUT, || async {
            let s = self.get(name).await?;
            check(&s).map(|()| s)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.e2e.diagnostics()))
    }

    async fn stopped(&self, name: &str, reason: &str) -> MyOwnShell {
        self.until(name, &format!("stopped ({reason})"), |s| match s.status.as_ref().and_then(|s| s.stopped.as_ref()) {
            Some(stop) if stop.reason == reason => Ok(()),
            other => Err(format!("{other:?}")),
        })
        .await
    }

    /// The reasons of the Events about `name`.
    async fn events(&self, name: &str) -> Vec<String> {
        let list = self.events.list(&ListParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter_map(|e| e.reason)
            .collect()
    }

    async fn pod_uid(&self, pod: &str) -> String {
        self.e2e.run(&["get", "pod", pod, "-n", &self.ns, "-o", "jsonpath={.metadata.uid}"]).await
    }

    fn plugin(&self, args: &[&str]) -> String {
        let kubeconfig = self.e2e.cluster.control_plane().kubeconfig_path();
        plugin::ok(&kubeconfig, &self.ns, args).unwrap_or_else(|e| panic!("{e}"))
    }
}

fn next_stop(s: &MyOwnShell) -> Option<Timestamp> {
    s.status.as_ref().and_then(|s| s.next_stop.as_ref()).map(|n| n.at.0)
}

/// Every lifetime at once (they run in parallel, in seconds), then each checked in the order
/// its deadline comes.
pub async fn lifetime(e2e: &E2e) {
    let ns = e2e.namespace("e2e-lifetime").await;
    let client = e2e.cluster.control_plane().client().unwrap();
    let s =
        Shells { e2e, ns: ns.clone(), api: Api::namespaced(client.clone(), &ns), events: Api::namespaced(client, &ns) };
    e2e.apply(&ns, &manifest("quick", "{idleTimeout: 30s, warnBefore: 20s}")).await.unwrap();
    e2e.apply(&ns, &manifest("kept", "{idleTimeout: 20s}")).await.unwrap();
    e2e.apply(&ns, &manifest("busy", "{idleTimeout: 1h, maxRunTime: 25s}")).await.unwrap();
    e2e.apply(&ns, &manifest("old", "{deletePausedAfter: 10s}")).await.unwrap();
    let kept_pod = wait_running(e2e, &ns, "kept", 1).await.remove(0);
    let busy_pod = wait_running(e2e, &ns, "busy", 1).await.remove(0);
    wait_running(e2e, &ns, "quick", 1).await;

    // `old` is stopped by hand; it goes 10 s later.
    assert_eq!(s.plugin(&["stop", "old"]).trim(), "myownshell.myownshell.io/old stopped");

    // `busy` is in use: a session stays open in it, so no connection is ever idle.
    let mut session = std::process::Command::new(kubectl_binary())
        .arg(format!("--kubeconfig={}", e2e.cluster.control_plane().kubeconfig_path().display()))
        .envs(e2e.kubectl.env())
        .args(["exec", "-n", &ns, &busy_pod, "--", "sleep", "300"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    // `kept`: a file in /tmp, then the stop pushed back before it comes.
    let uid = s.pod_uid(&kept_pod).await;
    e2e.run(&["exec", "-n", &ns, &kept_pod, "--", "sh", "-c", &format!("echo {MARKER} > /tmp/marker")]).await;
    let due = s.until("kept", "a next stop", |k| next_stop(k).map(drop).ok_or_else(|| "none".to_owned())).await;
    let said = s.plugin(&["extend", "kept", "5m"]);
    assert!(said.contains("extended: no stop before"), "{said}");
    s.until("kept", "the stop pushed back", |k| match next_stop(k) {
        Some(at) if at.as_second() - Timestamp::now().as_second() > 240 => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;

    // `quick`: warned, then the controller is restarted before the stop.
    let warned = s
        .until("quick", "Stopping=True, warned", |q| match q.status.as_ref().and_then(|s| s.next_stop.as_ref()) {
            Some(next) if next.warned => Ok(()),
            other => Err(format!("{other:?}")),
        })
        .await;
    let quick_due = next_stop(&warned).unwrap();
    e2e.run(&["rollout", "restart", "deployment", CONTROLLER, "-n", SYSTEM]).await;
    e2e.rollout(CONTROLLER).await;

    let old_gone = eventually("old deleted 10s after its stop", TIMEOUT, || async {
        match s.api.get_opt("old").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(o) => Err(format!("{:?}", o.status.and_then(|s| s.stopped))),
        }
    });
    old_gone.await.unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));

    let busy = s.stopped("busy", "MaxRunTime").await;
    wait_running(e2e, &ns, "busy", 0).await;
    let _ = session.kill();
    let _ = session.wait();
    assert_eq!(busy.spec.size, Some(1), "a stop keeps the size");

    let quick = s.stopped("quick", "Idle").await;
    let at = quick.status.unwrap().stopped.unwrap().at.0;
    assert!(
        (0..=1).contains(&(at.as_second() - quick_due.as_second())),
        "due {quick_due}, stopped {at}: the restart moved it"
    );
    wait_running(e2e, &ns, "quick", 0).await;
    let events = s.events("quick").await;
    let count = |reason: &str| events.iter().filter(|r| *r == reason).count();
    assert_eq!(
        (count("StoppingSoon"), count("Stopped")),
        (1, 0),
        "one warning across the restart, and the stop the status's to tell (at the deadline, above): {events:?}"
    );

    // `kept` outlived its first deadline on the same pod, with its file.
    let first_due = next_stop(&due).unwrap();
    let past = eventually("kept's first deadline passed", TIMEOUT, || async {
        if Timestamp::now() > first_due { Ok(()) } else { Err(format!("now {}", Timestamp::now())) }
    });
    past.await.unwrap();
    wait_running(e2e, &ns, "kept", 1).await;
    assert_eq!(s.pod_uid(&kept_pod).await, uid, "extending restarted the pod");
    connect_with_a_terminal(&s, "kept").await;

    // `quick` starts again with spec.size pods.
    assert_eq!(s.plugin(&["start", "quick"]).trim(), "myownshell.myownshell.io/quick started");
    wait_running(e2e, &ns, "quick", 1).await;
    s.until("quick", "running again", |q| match q.status.as_ref().and_then(|s| s.state.as_deref()) {
        Some("Running") => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

/// `kubectl myownshell connect NAME` under a pseudo-terminal (`script`), typing into the shell:
/// the file written before the extension is still there, and the plugin exits with the shell.
async fn connect_with_a_terminal(s: &Shells<'_>, name: &str) {
    use tokio::io::AsyncWriteExt as _;
    let kubeconfig = s.e2e.cluster.control_plane().kubeconfig_path();
    let plugin = myownshell_envtest::assets::workspace_binary("kubectl-myownshell").unwrap();
    let command =
        format!("{} --kubeconfig={} -n {} connect {name} --timeout 60s", plugin.display(), kubeconfig.display(), s.ns);
    let mut child = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("KUBECTL", kubectl_binary())
        .envs(s.e2e.kubectl.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Typed ahead: the terminal holds it until the remote shell reads it.
    let mut keyboard = child.stdin.take().unwrap();
    keyboard.write_all(b"tty; cat /tmp/marker; exit\n").await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output()).await;
    let out = out.unwrap_or_else(|_| panic!("kubectl myownshell connect did not end"));
    drop(keyboard);
    let out = out.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("/dev/pts/"), "no terminal in the shell: {text}");
    assert!(text.contains(MARKER), "the file from before the extension: {text}");
}
