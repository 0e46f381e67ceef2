//! Starts a cluster with a node, runs a pod on it (so a shim, a container, its mounts and a
//! veth exist), prints `footprint <json>` and waits to be killed. The node suite SIGKILLs it
//! and checks that nothing of the cluster is left.

use std::io::Write;
use std::time::Duration;

use myownshell_envtest::node::{Cluster, ClusterOptions};

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe"},"spec":{"containers":[{"name":"probe","image":"busybox:1.37.0","command":["sleep","3600"]}]}}"#;

fn fail(what: &str) -> ! {
    eprintln!("node-probe: {what}");
    std::process::exit(2);
}

#[tokio::main]
async fn main() {
    let cluster = Cluster::start(ClusterOptions::default()).await.unwrap_or_else(|e| fail(&e.to_string()));
    let kubectl = cluster.control_plane().kubectl();
    match kubectl.run_with_stdin(&["apply", "-n", "default", "-f", "-"], Some(POD)).await {
        Ok(out) if out.success => {}
        other => fail(&format!("creating the pod: {other:?}")),
    }
    let running = myownshell_envtest::eventually("the probe pod Running", Duration::from_secs(60), || async {
        let out = kubectl.run(&["get", "pod", "probe", "-n", "default", "-o", "jsonpath={.status.phase}"]).await?;
        if out.stdout == "Running" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await;
    if let Err(e) = running {
        fail(&e);
    }
    let footprint = serde_json::to_string(&cluster.footprint()).unwrap_or_else(|e| fail(&e.to_string()));
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "footprint {footprint}");
    let _ = stdout.flush();
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}
