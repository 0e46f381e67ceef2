//! NetworkPolicy enforced on the harness's nodes (`myownshell_envtest::node::network_policy`):
//! kube-router's policy controller in each node admits and refuses pod traffic as the policies
//! say, within and across nodes and through a ClusterIP, follows their changes, keeps its rules
//! inside the nodes, and leaves nothing behind.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use myownshell_envtest::node::{self, network_policy};
use myownshell_envtest::{Kubectl, eventually};

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long a policy created or deleted may take to be enforced: kube-router's watch, a full
/// sync of the node's filter table.
const ENFORCED_TIMEOUT: Duration = Duration::from_secs(60);

/// The probe image's archive (busybox's httpd and curl), built as the node suite builds it.
fn probe_archive() -> std::path::PathBuf {
    let images = myownshell_envtest::assets::target_dir().join("images");
    let archive = images.join("probe-network-policy.tar");
    node::images::build_probe(&archive, &images.join("probe-network-policy-work")).unwrap();
    archive
}

/// A pod of the probe image on `node` (no scheduler involved) running `script`.
fn pod(name: &str, node: &str, script: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","labels":{{"app":"{name}"}}}},"spec":{{"nodeName":"{node}","terminationGracePeriodSeconds":1,"containers":[{{"name":"c","image":"{image}","command":["sh","-c","{script}"]}}]}}}}"#,
        image = node::images::PROBE_IMAGE
    )
}

/// A NetworkPolicy `name` over every pod of its namespace.
fn policy(name: &str, spec: &str) -> String {
    format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{{"name":"{name}"}},"spec":{{"podSelector":{{}},{spec}}}}}"#
    )
}

/// A client pod and where it is.
struct Client {
    ns: String,
    name: String,
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.ns, self.name)
    }
}

/// What one `curl` from a client saw.
#[derive(Debug)]
enum Seen {
    /// The server answered with this body.
    Answered(String),
    /// The connection failed: curl's own words (exit 7, refused; 28, timed out).
    Refused(String),
}

/// `curl http://<target>/` from `client`; an error only when kubectl or curl failed otherwise
/// (the pod not there, a bad command), which says nothing about the network.
async fn curl(kubectl: &Kubectl, client: &Client, target: &str) -> Result<Seen, String> {
    let url = format!("http://{target}/");
    let out = kubectl.run(&["exec", "-n", &client.ns, &client.name, "--", "curl", "-sS", "-m", "3", &url]).await?;
    let said = out.stderr.trim();
    if out.success {
        Ok(Seen::Answered(out.stdout.trim().to_owned()))
    } else if said.contains("curl: (7)") || said.contains("curl: (28)") {
        Ok(Seen::Refused(said.lines().find(|l| l.starts_with("curl:")).unwrap_or(said).to_owned()))
    } else {
        Err(format!("{client}: {}{said}", out.stdout))
    }
}

/// Poll until every one of `clients` gets the server's answer (`expected`) at `target`; the time
/// it took.
async fn all_reach(kubectl: &Kubectl, clients: &[&Client], target: &str, expected: &str) -> Duration {
    let started = Instant::now();
    for client in clients {
        eventually(&format!("{client} reaches {target}"), ENFORCED_TIMEOUT, || async {
            match curl(kubectl, client, target).await? {
                Seen::Answered(body) if body == expected => Ok(()),
                other => Err(format!("saw {other:?}")),
            }
        })
        .await
        .unwrap();
    }
    started.elapsed()
}

/// Poll until every one of `clients` is refused at `target`; the time it took, and what curl
/// said last.
async fn all_refused(kubectl: &Kubectl, clients: &[&Client], target: &str) -> (Duration, String) {
    let started = Instant::now();
    let mut said = String::new();
    for client in clients {
        said = eventually(&format!("{client} refused at {target}"), ENFORCED_TIMEOUT, || async {
            match curl(kubectl, client, target).await? {
                Seen::Refused(said) => Ok(said),
                other => Err(format!("saw {other:?}")),
            }
        })
        .await
        .unwrap();
    }
    (started.elapsed(), said)
}

/// One look, for a client that a policy already in force refuses: still refused.
async fn still_refused(kubectl: &Kubectl, client: &Client, target: &str) {
    let seen = curl(kubectl, client, target).await.unwrap();
    assert!(matches!(seen, Seen::Refused(_)), "{client} at {target}: {seen:?}");
}

/// Two nodes enforcing NetworkPolicies. A server in one namespace on the first node; clients in
/// a second namespace on both nodes and one in a third. With no policy every client reaches the
/// server, by its address and through a ClusterIP; a default-deny of ingress in the server's
/// namespace refuses them all; a policy that admits the second namespace lets its clients in
/// again and still refuses the third's; a default-deny of egress in the second namespace refuses
/// its clients on both nodes, and deleting it lets them in again. The second node, lost and
/// back, enforces again. kube-router's chains and sets never appear on the host, and stopping
/// the cluster leaves nothing.
#[tokio::test]
async fn policies_admit_and_refuse_pod_traffic_on_both_nodes_and_leave_nothing() {
    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "before any cluster");
    let step = Instant::now();
    let options = node::ClusterOptions { nodes: 2, images: vec![probe_archive()] };
    let mut cluster = node::Cluster::start(options).await.unwrap();
    eprintln!("network policy: cluster started in {:.1?}", step.elapsed());
    let step = Instant::now();
    cluster.enforce_network_policies().await.unwrap();
    eprintln!("network policy: kube-router synced on both nodes in {:.1?}: {}", step.elapsed(), cluster.summary());
    assert!(cluster.enforces_network_policies());
    let version = std::process::Command::new("iptables").arg("--version").output().unwrap();
    eprintln!("network policy: {}", String::from_utf8_lossy(&version.stdout).trim());
    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "kube-router's rules on the host");

    let names = cluster.node_names();
    let (first, second) = (names[0].as_str(), names[1].as_str());
    let client = cluster.control_plane().client().unwrap();
    let kubectl = cluster.control_plane().kubectl();
    let server_ns = myownshell_envtest::create_namespace(&client, "np-server").await.unwrap();
    let clients_ns = myownshell_envtest::create_namespace(&client, "np-clients").await.unwrap();
    let other_ns = myownshell_envtest::create_namespace(&client, "np-other").await.unwrap();
    let serve = "mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www";
    kubectl.apply(&server_ns, &pod("server", first, serve)).await.unwrap().ok().unwrap();
    let service = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"server"},"spec":{"selector":{"app":"server"},"ports":[{"port":80,"targetPort":8080}]}}"#;
    kubectl.apply(&server_ns, service).await.unwrap().ok().unwrap();
    let near = Client { ns: clients_ns.clone(), name: "near".into() };
    let far = Client { ns: clients_ns.clone(), name: "far".into() };
    let other = Client { ns: other_ns.clone(), name: "other".into() };
    for (c, on) in [(&near, first), (&far, second), (&other, second)] {
        kubectl.apply(&c.ns, &pod(&c.name, on, "exec sleep 3600")).await.unwrap().ok().unwrap();
    }
    for (ns, name) in [(&server_ns, "server"), (&clients_ns, "near"), (&clients_ns, "far"), (&other_ns, "other")] {
        wait_running(&kubectl, ns, name).await;
    }
    let jsonpath = ["get", "pod", "server", "-n", &server_ns, "-o", "jsonpath={.status.podIP}"];
    let server = format!("{}:8080", kubectl.run(&jsonpath).await.unwrap().ok().unwrap());
    let jsonpath = ["get", "service", "server", "-n", &server_ns, "-o", "jsonpath={.spec.clusterIP}"];
    let cluster_ip = format!("{}:80", kubectl.run(&jsonpath).await.unwrap().ok().unwrap());
    let everyone = [&near, &far, &other];

    // No policy: everyone gets in, by address and through the ClusterIP.
    let took = all_reach(&kubectl, &everyone, &server, "server").await;
    all_reach(&kubectl, &[&near], &cluster_ip, "server").await;
    eprintln!("network policy: no policy: {near}, {far} (other node), {other} reach {server} ({took:.1?})");

    // Default-deny of ingress in the server's namespace: everyone refused, the ClusterIP too.
    kubectl.apply(&server_ns, &policy("deny-ingress", r#""policyTypes":["Ingress"]"#)).await.unwrap().ok().unwrap();
    let (took, said) = all_refused(&kubectl, &everyone, &server).await;
    still_refused(&kubectl, &near, &cluster_ip).await;
    eprintln!("network policy: default-deny ingress enforced for all three in {took:.1?}: {said}");

    // Admit the clients' namespace: its clients get in again, the other namespace's does not.
    let admit = format!(
        r#""policyTypes":["Ingress"],"ingress":[{{"from":[{{"namespaceSelector":{{"matchLabels":{{"kubernetes.io/metadata.name":"{clients_ns}"}}}}}}],"ports":[{{"port":8080,"protocol":"TCP"}}]}}]"#
    );
    kubectl.apply(&server_ns, &policy("admit-clients", &admit)).await.unwrap().ok().unwrap();
    let took = all_reach(&kubectl, &[&near, &far], &server, "server").await;
    still_refused(&kubectl, &other, &server).await;
    eprintln!("network policy: {clients_ns} admitted in {took:.1?}; {other} still refused");

    // Default-deny of egress in the clients' namespace: refused on both nodes, at the source.
    kubectl.apply(&clients_ns, &policy("deny-egress", r#""policyTypes":["Egress"]"#)).await.unwrap().ok().unwrap();
    let (took, said) = all_refused(&kubectl, &[&near, &far], &server).await;
    eprintln!("network policy: default-deny egress enforced on both nodes in {took:.1?}: {said}");
    kubectl.run(&["delete", "networkpolicy", "deny-egress", "-n", &clients_ns]).await.unwrap().ok().unwrap();
    let took = all_reach(&kubectl, &[&near, &far], &server, "server").await;
    eprintln!("network policy: egress deny deleted, {clients_ns} reaches {server} again in {took:.1?}");

    // The second node loses power and comes back: its kube-router starts again with it
    // (`start_node` waits for its first sync), and enforces on a pod started there since.
    let step = Instant::now();
    cluster.kill_node(second).unwrap();
    cluster.start_node(second).await.unwrap();
    eprintln!("network policy: {second} killed, back and enforcing again in {:.1?}", step.elapsed());
    let back = Client { ns: clients_ns.clone(), name: "back".into() };
    kubectl.apply(&back.ns, &pod(&back.name, second, "exec sleep 3600")).await.unwrap().ok().unwrap();
    wait_running(&kubectl, &back.ns, &back.name).await;
    all_reach(&kubectl, &[&back], &server, "server").await;
    kubectl.apply(&clients_ns, &policy("deny-egress", r#""policyTypes":["Egress"]"#)).await.unwrap().ok().unwrap();
    let (took, said) = all_refused(&kubectl, &[&back], &server).await;
    eprintln!("network policy: {back} on the restarted {second} refused at the source in {took:.1?}: {said}");

    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "kube-router's rules on the host");
    let footprint = cluster.footprint();
    cluster.stop().unwrap();
    eventually("nothing of the cluster left", Duration::from_secs(30), || async {
        let left = footprint.leftovers();
        if left.is_empty() { Ok(()) } else { Err(left.join("; ")) }
    })
    .await
    .unwrap();
    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "after the cluster");
}

/// Poll until pod `name` in `ns` is Running.
async fn wait_running(kubectl: &Kubectl, ns: &str, name: &str) {
    eventually(&format!("pod {ns}/{name} Running"), TIMEOUT, || async {
        let out = kubectl.run(&["get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}"]).await?;
        if out.stdout == "Running" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();
}
