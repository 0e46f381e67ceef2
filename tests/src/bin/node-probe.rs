//! Starts a cluster of N nodes (the first argument), runs a pod on each (so shims, containers,
//! their mounts and veths exist on every node), prints `footprint <json>` and waits to be killed.
//! The node suite's SIGKILL test kills it and checks that the kernel alone cleaned up.

use std::io::Write;
use std::time::Duration;

use myownshell_envtest::{eventually, node};

#[tokio::main]
async fn main() {
    let nodes = match std::env::args().nth(1).map(|n| n.parse::<usize>()) {
        Some(Ok(n)) if n > 0 => n,
        _ => fail("usage: node-probe NODES (a positive number)"),
    };
    let options = node::ClusterOptions { nodes, ..Default::default() };
    let cluster = node::Cluster::start(options).await.unwrap_or_else(|e| fail(&e.to_string()));
    eprintln!("node-probe: {}", cluster.summary());
    let kubectl = cluster.control_plane().kubectl();
    for (i, name) in cluster.node_names().iter().enumerate() {
        let pod = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"probe-{i}"}},"spec":{{"nodeName":"{name}","containers":[{{"name":"probe","image":"busybox:1.37.0","command":["sleep","3600"]}}]}}}}"#
        );
        match kubectl.apply("default", &pod).await {
            Ok(out) if out.success => {}
            Ok(out) => fail(&format!("creating probe-{i}: {}", out.stderr)),
            Err(e) => fail(&format!("creating probe-{i}: {e}")),
        }
    }
    eventually("every probe pod Running", Duration::from_secs(60), || async {
        let out = kubectl.run(&["get", "pods", "-n", "default", "-o", "jsonpath={.items[*].status.phase}"]).await?;
        let phases: Vec<&str> = out.stdout.split_whitespace().collect();
        if phases.len() == nodes && phases.iter().all(|p| *p == "Running") { Ok(()) } else { Err(out.stdout) }
    })
    .await
    .unwrap_or_else(|e| fail(&e));
    let footprint = serde_json::to_string(&cluster.footprint()).unwrap_or_else(|e| fail(&e.to_string()));
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "footprint {footprint}");
    let _ = stdout.flush();
    std::future::pending::<()>().await;
}

fn fail(problem: &str) -> ! {
    eprintln!("node-probe: {problem}");
    std::process::exit(2)
}
