//! The home phase: a shell with `spec.home` on the real node, its claim provisioned by a real
//! dynamic provisioner (local-path-provisioner, the default class), a file written in `$HOME`,
//! and the file still there after a stop and a start, a spec change that restarts the pod (as
//! an `update` after an operator upgrade does), and the pod's deletion; the claim goes with the
//! shell.

use myownshell_envtest::eventually;
use myownshell_envtest::node::local_path;
use myownshell_tests::plugin;

use super::{E2e, TIMEOUT, shell_pods, wait_running};

const SHELL: &str = "notes";
const CLAIM: &str = "myownshell-home-notes";

/// Run `script` in the shell's one pod; what it printed.
async fn in_shell(e2e: &E2e, ns: &str, script: &str) -> String {
    let pods = wait_running(e2e, ns, SHELL, 1).await;
    e2e.run(&["exec", "-n", ns, &pods[0], "-c", "shell", "--", "sh", "-c", script]).await
}

/// The shell's pod after `what`: a new one, with the file.
async fn file_survives(e2e: &E2e, ns: &str, before: &str, what: &str) -> String {
    let pod = eventually(&format!("a new pod after {what}"), TIMEOUT, || async {
        let pods = wait_running(e2e, ns, SHELL, 1).await;
        if pods[0] != before { Ok(pods[0].clone()) } else { Err(format!("still {before}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    let read = in_shell(e2e, ns, "cat ~/notes.txt").await;
    assert_eq!(read, "kept\n", "~/notes.txt after {what}");
    eprintln!("e2e: home: the file is there after {what}");
    pod
}

pub async fn home(e2e: &E2e) {
    local_path::install(&e2e.cluster).await.unwrap_or_else(|e| panic!("local-path-provisioner: {e}"));
    let ns = e2e.namespace("e2e-home").await;
    let manifest = format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: {SHELL}\nspec:\n  size: 1\n  home:\n    size: 64Mi\n"
    );
    e2e.apply(&ns, &manifest).await.unwrap();
    let home = in_shell(e2e, &ns, "echo kept > ~/notes.txt && echo $HOME").await;
    assert_eq!(home, "/home/shell\n");
    e2e.wait_for(
        "HomeReady=True, the claim bound on a node",
        &[
            "get",
            "mos",
            SHELL,
            "-n",
            &ns,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"HomeReady\")].reason} {.status.home.node}",
        ],
        |out| out.starts_with("HomeBound myownshell-node"),
    )
    .await;
    let class = e2e.run(&["get", "pvc", CLAIM, "-n", &ns, "-o", "jsonpath={.spec.storageClassName}"]).await;
    assert_eq!(class, local_path::STORAGE_CLASS, "the cluster's default class");
    let kubeconfig = e2e.cluster.control_plane().kubeconfig_path();
    let plugin = |args: &[&str]| plugin::ok(&kubeconfig, &ns, args).unwrap_or_else(|e| panic!("{e}"));

    let mut pod = wait_running(e2e, &ns, SHELL, 1).await.remove(0);
    plugin(&["stop", SHELL]);
    eventually("the stopped shell's pod gone", TIMEOUT, || async {
        let pods = shell_pods(e2e, &ns, SHELL).await;
        if pods.is_empty() { Ok(()) } else { Err(format!("{pods:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    plugin(&["start", SHELL]);
    pod = file_survives(e2e, &ns, &pod, "a stop and a start").await;
    // A change that restarts the pod, as `kubectl myownshell update` after an operator upgrade
    // does (with the template current, `update` has nothing to restart): rolled by Recreate,
    // the old pod lets go of the volume before the new one mounts it.
    let resized =
        r#"{"spec":{"resources":{"requests":{"cpu":"20m","memory":"16Mi"},"limits":{"cpu":"200m","memory":"64Mi"}}}}"#;
    e2e.run(&["patch", "mos", SHELL, "-n", &ns, "--type=merge", "-p", resized]).await;
    pod = file_survives(e2e, &ns, &pod, "a spec change that restarts the pod").await;
    e2e.run(&["delete", "pod", &pod, "-n", &ns, "--wait=false"]).await;
    file_survives(e2e, &ns, &pod, "the pod's deletion").await;

    e2e.run(&["delete", "mos", SHELL, "-n", &ns, "--wait=false"]).await;
    e2e.wait_for(
        "the home deleted with its shell",
        &["get", "pvc", "-n", &ns, "--ignore-not-found", "-o", "name"],
        |out| out.trim().is_empty(),
    )
    .await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}
