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
