//! The harness's nodes themselves: pods run from local images, `kubectl exec` and `logs` reach
//! them through the kubelet, pods and Services reach each other across nodes, a node can be
//! lost (and its pods move) and come back, and nothing is left behind; and the tests' browser,
//! in a network namespace of its own, keeps loading pages while the host's network changes.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "node/browser.rs"]
mod browser;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::ListParams;
use myownshell_envtest::{Kubectl, eventually, node};

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
async fn a_cluster_of_two_nodes_leaves_nothing_when_its_test_process_is_sigkilled() {
    use std::io::{BufRead, BufReader};
    // A cluster of two nodes, each running a pod, in a process of its own (src/bin/node-probe.rs).
    let mut probe = std::process::Command::new(env!("CARGO_BIN_EXE_node-probe"))
        .arg("2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = BufReader::new(probe.stdout.take().unwrap()).lines();
    let line = lines
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("footprint ").map(str::to_owned))
        .unwrap_or_else(|| panic!("the probe ended without a footprint: {:?}", probe.wait()));
    let footprint: node::footprint::Footprint = serde_json::from_str(&line).unwrap();
    assert_eq!(footprint.nodes.len(), 2, "{footprint:?}");
    assert!(footprint.leftovers().len() >= 5, "the probe's cluster is running: {:?}", footprint.leftovers());
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
    assert_ne!(shared.network().slot(), second.network().slot());
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
    let (images, log) = (second.node_config().containerd_root(), second.node_config().dir.join("kubelet.log"));
    assert!(images.exists(), "{} while the node runs", images.display());
    second.stop().unwrap();
    assert_nothing_left(&footprint).await;
    assert!(!images.exists(), "the stopped node's images are removed: {}", images.display());
    assert!(log.exists(), "the stopped node's logs are kept: {}", log.display());
    // The shared cluster is untouched.
    let nodes = shared.control_plane().kubectl().run(&["get", "nodes", "-o", "name"]).await.unwrap();
    assert_eq!(nodes.stdout.trim(), "node/myownshell-node");
}

/// How long losing a node may take to show: NotReady after the grace period, its pods deleted
/// a toleration later, replacements started (see `myownshell_envtest::node::lifecycle`).
const NODE_LOSS_TIMEOUT: Duration = Duration::from_secs(120);

/// Pods that answer `GET /` on 8080 with their own name (busybox's httpd in the probe image).
fn deployment(name: &str, replicas: u32, affinity: &str) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}},"spec":{{"replicas":{replicas},"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}}}},"spec":{{"affinity":{affinity},"terminationGracePeriodSeconds":1,"containers":[{{"name":"web","image":"{image}","command":["sh","-c","mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]}}]}}}}}}}}"#,
        image = node::images::PROBE_IMAGE
    )
}

/// One pod of `app` per node, whatever else happens.
fn one_per_node(app: &str) -> String {
    format!(
        r#"{{"podAntiAffinity":{{"requiredDuringSchedulingIgnoredDuringExecution":[{{"topologyKey":"kubernetes.io/hostname","labelSelector":{{"matchLabels":{{"app":"{app}"}}}}}}]}}}}"#
    )
}

/// Rather on `node`, but anywhere if it must.
fn rather_on(node: &str) -> String {
    format!(
        r#"{{"nodeAffinity":{{"preferredDuringSchedulingIgnoredDuringExecution":[{{"weight":100,"preference":{{"matchExpressions":[{{"key":"kubernetes.io/hostname","operator":"In","values":["{node}"]}}]}}}}]}}}}"#
    )
}

/// A pod as the tests look at it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placed {
    name: String,
    node: String,
    ip: String,
}

/// The Running pods of `app` that are not being deleted, in node order.
async fn running(pods: &Api<Pod>, app: &str) -> Result<Vec<Placed>, String> {
    let list = pods.list(&ListParams::default().labels(&format!("app={app}"))).await.map_err(|e| e.to_string())?;
    let mut placed: Vec<Placed> = list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let status = p.status?;
            (status.phase.as_deref() == Some("Running")).then_some(Placed {
                name: p.metadata.name?,
                node: p.spec?.node_name?,
                ip: status.pod_ip?,
            })
        })
        .collect();
    placed.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(placed)
}

/// Wait for exactly one Running pod of `app` on each of `nodes` (in order).
async fn one_on_each(pods: &Api<Pod>, app: &str, nodes: &[&str], timeout: Duration) -> Vec<Placed> {
    eventually(&format!("one {app} pod Running on each of {nodes:?}"), timeout, || async {
        let placed = running(pods, app).await?;
        let on: Vec<&str> = placed.iter().map(|p| p.node.as_str()).collect();
        if on == nodes { Ok(placed) } else { Err(format!("{placed:?}")) }
    })
    .await
    .unwrap()
}

/// The status of node `name`'s Ready condition (`True`, `False`, `Unknown`).
async fn ready(nodes: &Api<Node>, name: &str) -> Result<String, String> {
    let node = nodes.get(name).await.map_err(|e| e.to_string())?;
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    Ok(conditions.into_iter().find(|c| c.type_ == "Ready").map(|c| c.status).unwrap_or_default())
}

/// `curl http://<target>/` from pod `from`: what it answered.
async fn curl_from(kubectl: &Kubectl, ns: &str, from: &str, target: &str) -> Result<String, String> {
    let url = format!("http://{target}/");
    let out = kubectl.run(&["exec", "-n", ns, from, "--", "curl", "-sS", "-m", "3", &url]).await?;
    if out.success { Ok(out.stdout.trim().to_owned()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
}

/// Poll `curl` from `from` to `target` until it answers with `expected`'s name.
async fn reach(kubectl: &Kubectl, ns: &str, from: &Placed, target: &str, expected: &Placed) {
    eventually(&format!("{} from {} at {target}", expected.name, from.name), TIMEOUT, || async {
        let answer = curl_from(kubectl, ns, &from.name, target).await?;
        if answer == expected.name { Ok(()) } else { Err(format!("answered {answer:?}")) }
    })
    .await
    .unwrap();
}

/// Resident memory (summed VmRSS, MiB) and CPU time so far of everything in node `name`'s
/// sandbox.
fn usage(cluster: &node::Cluster, name: &str) -> (u64, Duration) {
    let namespace = cluster.node(name).and_then(|n| n.sandbox()).map(|s| s.namespace("pid")).unwrap_or_default();
    let mut rss_kib = 0;
    let mut cpu = Duration::ZERO;
    let pids = std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok());
    for pid in pids {
        let ns = std::fs::read_link(format!("/proc/{pid}/ns/pid")).map(|l| l.to_string_lossy().into_owned());
        if ns.ok().as_deref() != Some(namespace.as_str()) {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
        rss_kib += rss.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        cpu += myownshell_envtest::process::cpu_time(pid).unwrap_or_default();
    }
    (rss_kib / 1024, cpu)
}

fn print_usage(cluster: &node::Cluster, when: &str) {
    for name in cluster.node_names() {
        let (rss, cpu) = usage(cluster, &name);
        eprintln!("two nodes: {name} {when}: {rss} MiB resident, {cpu:.1?} CPU so far");
    }
}

/// The probe image's archive (busybox's httpd and curl), built as the e2e suite builds it.
fn probe_archive() -> std::path::PathBuf {
    let images = myownshell_envtest::assets::target_dir().join("images");
    let archive = images.join("probe-node.tar");
    node::images::build_probe(&archive, &images.join("probe-node-work")).unwrap();
    archive
}

/// Two nodes: both Ready; pods spread over them reach each other by pod IP and through a
/// ClusterIP; a node lost goes NotReady and its pod is recreated on the other; it comes back
/// Ready and is reached again; `kubectl drain` empties it as its PodDisruptionBudget allows;
/// and nothing of any of it is left.
#[tokio::test]
async fn two_nodes_route_pods_and_services_across_and_survive_losing_one() {
    let step = Instant::now();
    let options = node::ClusterOptions { nodes: 2, images: vec![probe_archive()], ..Default::default() };
    let mut cluster = node::Cluster::start(options).await.unwrap();
    eprintln!("two nodes: probe image built and cluster started in {:.1?}: {}", step.elapsed(), cluster.summary());
    let names = cluster.node_names();
    assert_eq!(names, ["myownshell-node", "myownshell-node-2"]);
    let (first, second) = (names[0].as_str(), names[1].as_str());
    let client = cluster.control_plane().client().unwrap();
    let kubectl = cluster.control_plane().kubectl();
    let nodes: Api<Node> = Api::all(client.clone());
    for name in [first, second] {
        assert_eq!(ready(&nodes, name).await.unwrap(), "True", "{name}");
    }
    print_usage(&cluster, "after start");
    let ns = myownshell_envtest::create_namespace(&client, "two-nodes").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // One pod per node; the one on the second node reached by IP and through a Service.
    let step = Instant::now();
    kubectl.apply(&ns, &deployment("spread", 2, &one_per_node("spread"))).await.unwrap().ok().unwrap();
    let spread = one_on_each(&pods, "spread", &[first, second], TIMEOUT).await;
    let (near, far) = (&spread[0], &spread[1]);
    eprintln!("two nodes: one pod per node Running in {:.1?}", step.elapsed());
    let step = Instant::now();
    reach(&kubectl, &ns, near, &format!("{}:8080", far.ip), far).await;
    kubectl.run(&["label", "pod", "-n", &ns, &far.name, "role=far"]).await.unwrap().ok().unwrap();
    let service = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"far"},"spec":{"selector":{"app":"spread","role":"far"},"ports":[{"port":80,"targetPort":8080}]}}"#;
    kubectl.apply(&ns, service).await.unwrap().ok().unwrap();
    let jsonpath = ["get", "service", "far", "-n", &ns, "-o", "jsonpath={.spec.clusterIP}"];
    let cluster_ip = kubectl.run(&jsonpath).await.unwrap().ok().unwrap();
    reach(&kubectl, &ns, near, &format!("{cluster_ip}:80"), far).await;
    eprintln!("two nodes: {first} -> {second} by pod IP and by ClusterIP {cluster_ip} in {:.1?}", step.elapsed());
    // From the host, as the apiserver calls a webhook: each node's pods, and (through the first
    // node's kube-proxy) the Service whose endpoint is on the second.
    let from_host =
        [(format!("{}:8080", near.ip), near), (format!("{}:8080", far.ip), far), (format!("{cluster_ip}:80"), far)];
    for (target, expected) in from_host {
        let addr = target.parse().unwrap();
        let answer = eventually(&format!("{target} from the host"), TIMEOUT, || async {
            myownshell_envtest::http::plain_get(addr, "/").await
        })
        .await
        .unwrap();
        assert_eq!((answer.0, answer.1.trim()), (200, expected.name.as_str()), "{target}");
    }

    // A pod that would rather run on the second node, and may move.
    kubectl.apply(&ns, &deployment("mover", 1, &rather_on(second))).await.unwrap().ok().unwrap();
    let mover = one_on_each(&pods, "mover", &[second], TIMEOUT).await.remove(0);

    // The second node loses power.
    let footprint = cluster.footprint();
    let lost = Instant::now();
    cluster.kill_node(second).unwrap();
    eprintln!("two nodes: kill_node({second}) returned in {:.1?}", lost.elapsed());
    assert_eq!(footprint.node(second).unwrap().leftovers(), Vec::<String>::new(), "the killed node left something");
    eventually("the lost node NotReady", NODE_LOSS_TIMEOUT, || async {
        let status = ready(&nodes, second).await?;
        if status == "True" { Err(status) } else { Ok(()) }
    })
    .await
    .unwrap();
    let not_ready = lost.elapsed();
    let moved = one_on_each(&pods, "mover", &[first], NODE_LOSS_TIMEOUT).await.remove(0);
    assert_ne!(moved.name, mover.name);
    eprintln!(
        "two nodes: node lost -> NotReady in {not_ready:.1?}, pod recreated on {first} in {:.1?}",
        lost.elapsed()
    );
    assert_eq!(ready(&nodes, first).await.unwrap(), "True");

    // It comes back; the spread pod it lost is recreated on it and reached again.
    let back = Instant::now();
    cluster.start_node(second).await.unwrap();
    eprintln!("two nodes: start_node({second}) -> Ready in {:.1?}", back.elapsed());
    let spread = one_on_each(&pods, "spread", &[first, second], NODE_LOSS_TIMEOUT).await;
    let (near, returned) = (&spread[0], &spread[1]);
    assert_ne!(returned.name, far.name);
    reach(&kubectl, &ns, near, &format!("{}:8080", returned.ip), returned).await;
    eprintln!("two nodes: back -> a new pod on {second} Running and reached in {:.1?}", back.elapsed());
    print_usage(&cluster, "at the end");

    drain(&cluster, &ns, second, returned).await;

    let footprint = cluster.footprint();
    cluster.stop().unwrap();
    assert_nothing_left(&footprint).await;
}

/// `kubectl drain` of `node`, whose only pod is `pod` of the spread Deployment: while its
/// PodDisruptionBudget allows no disruption the apiserver refuses the eviction; once it allows
/// one, the drain cordons and empties the node.
async fn drain(cluster: &node::Cluster, ns: &str, node: &str, pod: &Placed) {
    let step = Instant::now();
    let client = cluster.control_plane().client().unwrap();
    let kubectl = cluster.control_plane().kubectl();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client, ns);
    let budget = |min: u32| {
        format!(
            r#"{{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{{"name":"spread"}},"spec":{{"minAvailable":{min},"selector":{{"matchLabels":{{"app":"spread"}}}}}}}}"#
        )
    };
    let allowed = |n: i32| {
        let budgets = budgets.clone();
        async move {
            eventually(&format!("the budget to allow {n} disruptions"), TIMEOUT, || async {
                let pdb = budgets.get("spread").await.map_err(|e| e.to_string())?;
                let generation = pdb.metadata.generation;
                match pdb.status {
                    Some(s) if s.disruptions_allowed == n && s.observed_generation == generation => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            })
            .await
            .unwrap();
        }
    };
    kubectl.apply(ns, &budget(2)).await.unwrap().ok().unwrap();
    allowed(0).await;
    // kubectl, not kube's `Api::evict`: kube's client retries a 429 for minutes by default.
    let eviction = format!(
        r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{}","namespace":"{ns}"}}}}"#,
        pod.name
    );
    let path = format!("/api/v1/namespaces/{ns}/pods/{}/eviction", pod.name);
    let refused = kubectl.run_with_stdin(&["create", "--raw", &path, "-f", "-"], Some(&eviction)).await.unwrap();
    assert!(!refused.success && refused.stderr.contains("disruption budget"), "not refused: {refused:?}");
    kubectl.apply(ns, &budget(1)).await.unwrap().ok().unwrap();
    allowed(1).await;
    let args = ["drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"];
    kubectl.run(&args).await.unwrap().ok().unwrap();
    let left = running(&pods, "spread").await.unwrap();
    assert!(left.iter().all(|p| p.node != node), "{node} still runs {left:?}");
    let unschedulable = kubectl.run(&["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]).await.unwrap();
    assert_eq!(unschedulable.stdout, "true");
    kubectl.run(&["uncordon", node]).await.unwrap().ok().unwrap();
    eprintln!("two nodes: drain refused by the budget, then done, in {:.1?}", step.elapsed());
}

/// The cluster's dynamic provisioner: a claim of the default class (no class named) is
/// provisioned on the node by local-path-provisioner, which runs as a pod from an image built
/// here, in the node's own directory for volumes; what a pod writes there outlives the pod, and
/// deleting the claim deletes the volume and its directory.
#[tokio::test]
async fn a_claim_of_the_default_class_is_provisioned_on_the_node_and_outlives_its_pod() {
    let cluster = node::shared();
    node::local_path::install(cluster).await.unwrap();
    let cp = cluster.control_plane();
    let ns = myownshell_envtest::create_namespace(&cp.client().unwrap(), "node-claim").await.unwrap();
    let kubectl = cp.kubectl();
    let claim = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"home"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"64Mi"}}}}"#;
    let pod = |name: &str, script: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{"terminationGracePeriodSeconds":1,"containers":[{{"name":"shell","image":"busybox:1.37.0","command":["sh","-c","{script}; sleep 3600"],"volumeMounts":[{{"name":"home","mountPath":"/home/user"}}]}}],"volumes":[{{"name":"home","persistentVolumeClaim":{{"claimName":"home"}}}}]}}}}"#
        )
    };
    for manifest in [claim.to_owned(), pod("writer", "echo kept > /home/user/notes.txt")] {
        kubectl.run_with_stdin(&["apply", "-n", &ns, "-f", "-"], Some(&manifest)).await.unwrap().ok().unwrap();
    }
    wait_running(&kubectl, &ns, "writer").await;
    let class =
        kubectl.run(&["get", "pvc", "home", "-n", &ns, "-o", "jsonpath={.spec.storageClassName}"]).await.unwrap();
    assert_eq!(class.stdout, node::local_path::STORAGE_CLASS, "the default class");
    let volume =
        kubectl.run(&["get", "pvc", "home", "-n", &ns, "-o", "jsonpath={.spec.volumeName}"]).await.unwrap().stdout;
    let path = kubectl
        .run(&["get", "pv", &volume, "-o", "jsonpath={.spec.hostPath.path}{.spec.local.path}"])
        .await
        .unwrap()
        .stdout;
    let node_dir = cp.layout().dir.join("local-path").join(&cluster.node_names()[0]);
    assert!(std::path::Path::new(&path).starts_with(&node_dir), "{path} in {}", node_dir.display());
    let on_disk = std::path::Path::new(&path).join("notes.txt");
    assert_eq!(std::fs::read_to_string(&on_disk).unwrap(), "kept\n");

    kubectl.run(&["delete", "pod", "writer", "-n", &ns, "--wait=true"]).await.unwrap().ok().unwrap();
    let reader = pod("reader", "cat /home/user/notes.txt");
    kubectl.run_with_stdin(&["apply", "-n", &ns, "-f", "-"], Some(&reader)).await.unwrap().ok().unwrap();
    wait_running(&kubectl, &ns, "reader").await;
    eventually("the reader finds the file", TIMEOUT, || async {
        let logs = kubectl.run(&["logs", "-n", &ns, "reader"]).await?;
        if logs.stdout == "kept\n" { Ok(()) } else { Err(format!("{logs:?}")) }
    })
    .await
    .unwrap();

    kubectl.run(&["delete", "pod", "reader", "-n", &ns, "--wait=true"]).await.unwrap().ok().unwrap();
    kubectl.run(&["delete", "pvc", "home", "-n", &ns, "--wait=true"]).await.unwrap().ok().unwrap();
    eventually("the volume and its directory gone", TIMEOUT, || async {
        let pv = kubectl.run(&["get", "pv", &volume, "--ignore-not-found", "-o", "name"]).await?;
        match (pv.stdout.trim().is_empty(), std::path::Path::new(&path).exists()) {
            (true, false) => Ok(()),
            left => Err(format!("(pv gone, directory gone) = {left:?}")),
        }
    })
    .await
    .unwrap();
}

/// Poll until pod `name` in `ns` is Running.
async fn wait_running(kubectl: &Kubectl, ns: &str, name: &str) {
    eventually(&format!("pod {name} Running"), TIMEOUT, || async {
        let out = kubectl.run(&["get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}"]).await?;
        if out.stdout == "Running" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();
}
