//! The harness's node itself: pods run from local images, `kubectl exec` and `logs` reach them
//! through the kubelet, Services route inside the node, and the node leaves nothing behind.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use myownshell_envtest::{eventually, node};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_pod_runs_from_the_local_shell_image_and_kubectl_exec_reaches_it() {
    let cluster = node::shared();
    let cp = cluster.control_plane();
    let client = cp.client().unwrap();
    let ns = myownshell_envtest::create_namespace(&client, "node-pod").await.unwrap();
    let kubectl = cp.kubectl();
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"shell"},"spec":{"containers":[{"name":"shell","image":"busybox:1.37.0","command":["sh","-c","echo started; sleep 3600"],"securityContext":{"runAsUser":65534,"runAsGroup":65534}}],"terminationGracePeriodSeconds":1}}"#;
    let path = cp.layout().dir.join(format!("{ns}-pod.json"));
    std::fs::write(&path, pod).unwrap();
    kubectl.run(&["apply", "-n", &ns, "-f", path.to_str().unwrap()]).await.unwrap().ok().unwrap();
    eventually("the pod Running", TIMEOUT, || async {
        let out = kubectl.run(&["get", "pod", "shell", "-n", &ns, "-o", "jsonpath={.status.phase}"]).await?;
        if out.stdout == "Running" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();
    let id = kubectl.run(&["exec", "-n", &ns, "shell", "--", "id"]).await.unwrap();
    assert!(id.stdout.contains("uid=65534"), "{id:?}");
    let logs = kubectl.run(&["logs", "-n", &ns, "shell"]).await.unwrap();
    assert_eq!(logs.stdout.trim(), "started", "{logs:?}");
}

/// Poll until `footprint` has nothing left; fail with what is left after 30 s.
async fn assert_nothing_left(footprint: &node::footprint::Footprint) {
    eventually("nothing of the cluster left", Duration::from_secs(30), || async {
        let left = footprint.leftovers();
        if left.is_empty() { Ok(()) } else { Err(left.join("; ")) }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_node_leaves_nothing_when_its_test_process_is_sigkilled() {
    use std::io::{BufRead, BufReader};
    let mut probe = std::process::Command::new(env!("CARGO_BIN_EXE_node-probe"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let line = BufReader::new(probe.stdout.take().unwrap()).lines().next().unwrap().unwrap();
    let footprint: node::footprint::Footprint =
        serde_json::from_str(line.strip_prefix("footprint ").unwrap_or_else(|| panic!("{line}"))).unwrap();
    assert!(footprint.leftovers().len() >= 3, "the probe's cluster is running: {:?}", footprint.leftovers());
    probe.kill().unwrap(); // SIGKILL: no destructor runs; only the kernel cleans up
    probe.wait().unwrap();
    assert_nothing_left(&footprint).await;
}

/// A second cluster next to the shared one (as when two test binaries run at once): its own
/// slot, addresses, sockets and directories; both run pods; stopping it leaves nothing and
/// leaves the other running.
#[tokio::test]
async fn two_clusters_run_side_by_side_and_a_stopped_one_leaves_nothing() {
    let shared = node::shared();
    let second = node::Cluster::start(node::ClusterOptions::default()).await.unwrap();
    assert_ne!(shared.sandbox().slot(), second.sandbox().slot());
    assert_ne!(shared.node_config().containerd_socket(), second.node_config().containerd_socket());
    let kubectl = second.control_plane().kubectl();
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"second"},"spec":{"containers":[{"name":"c","image":"busybox:1.37.0","command":["sleep","3600"]}],"terminationGracePeriodSeconds":1}}"#;
    let out = kubectl.run_with_stdin(&["apply", "-n", "default", "-f", "-"], Some(pod)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    eventually("the second cluster's pod Running", TIMEOUT, || async {
        let out = kubectl.run(&["get", "pod", "second", "-n", "default", "-o", "jsonpath={.status.phase}"]).await?;
        if out.stdout == "Running" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();
    let footprint = second.footprint();
    second.stop().unwrap();
    assert_nothing_left(&footprint).await;
    // The shared cluster is untouched.
    let nodes = shared.control_plane().kubectl().run(&["get", "nodes", "-o", "name"]).await.unwrap();
    assert_eq!(nodes.stdout.trim(), "node/myownshell-node");
}
