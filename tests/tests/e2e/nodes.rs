//! The node phases, on the production overlay over two nodes: losing a node abruptly (its
//! sandbox killed, as a machine losing power) and draining one. Shells that ran there come back
//! on the other node, the controller's leadership moves, admission keeps answering, and the
//! shells' status says what happened meanwhile. Each step prints how long it took.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::Api;
use myownshell_api::MyOwnShell;
use myownshell_api::names::conditions::{AVAILABLE, DEGRADED};
use myownshell_envtest::eventually;

use super::{E2e, SYSTEM, shell};

/// Long enough for a lost node to be noticed (20 s grace in this cluster), its pods evicted
/// (10 s toleration) and made again elsewhere.
const NODE_TIMEOUT: Duration = Duration::from_secs(180);
const SHELLS: usize = 4;

/// `pod name -> node` of the pods `selector` picks in `ns`, not being deleted.
async fn placement(e2e: &E2e, ns: &str, selector: &str) -> BTreeMap<String, String> {
    let out = e2e
        .run(&[
            "get",
            "pods",
            "-n",
            ns,
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
        ])
        .await;
    out.lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [pod, node, "Running"] => Some((pod.to_owned(), node.to_owned())),
            _ => None,
        })
        .collect()
}

async fn leader(e2e: &E2e) -> String {
    e2e.run(&["get", "lease", "-n", SYSTEM, "-o", "jsonpath={.items[*].spec.holderIdentity}"]).await
}

async fn node_ready(e2e: &E2e, node: &str) -> String {
    e2e.run(&["get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"]).await
}

/// Applies a size-0 MyOwnShell every 500 ms until `stop`; when each refusal came.
async fn keep_applying(
    e2e: &E2e,
    ns: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) -> (usize, Vec<(Instant, String)>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(500));
    let (mut applied, mut refused) = (0, Vec::new());
    while !*stop.borrow() {
        ticks.tick().await;
        if let Err(e) = e2e.apply(ns, &shell(&format!("probe-{applied}"), 0)).await {
            refused.push((Instant::now(), e));
        }
        applied += 1;
    }
    (applied, refused)
}

/// `SHELLS` shells of 2 pods each in a new namespace, all Running.
async fn shells(e2e: &E2e, prefix: &str) -> String {
    let ns = e2e.namespace(prefix).await;
    for i in 0..SHELLS {
        e2e.apply(&ns, &shell(&format!("s{i}"), 2)).await.unwrap();
    }
    eventually("every shell pod Running", super::TIMEOUT, || async {
        let n = placement(e2e, &ns, "app.kubernetes.io/name=myownshell").await.len();
        if n == 2 * SHELLS { Ok(()) } else { Err(format!("{n} Running")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    ns
}

/// Kill the node the controller's leader runs on; everything comes back on the other one.
pub async fn lose_a_node(e2e: &mut E2e) {
    let ns = shells(e2e, "e2e-node-loss").await;
    let holder = leader(e2e).await;
    let operator = placement(e2e, SYSTEM, "app.kubernetes.io/name=myownshell").await;
    let (leader_pod, victim) =
        operator.iter().find(|(pod, _)| holder.contains(pod.as_str())).map(|(p, n)| (p.clone(), n.clone())).unwrap();
    let shell_pods = placement(e2e, &ns, "app.kubernetes.io/name=myownshell").await;
    let moved: Vec<String> = shell_pods.iter().filter(|(_, n)| **n == victim).map(|(p, _)| p.clone()).collect();
    eprintln!("e2e: losing {victim}: the controller's leader {leader_pod} and shell pods {moved:?} run there");

    let shells: Api<MyOwnShell> = Api::namespaced(e2e.cluster.control_plane().client().unwrap(), &ns);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let probes = e2e.namespace("e2e-node-loss-admission").await;
    let lost = Instant::now();
    e2e.cluster.kill_node(&victim).unwrap();
    observe_the_loss(e2e, &ns, &probes, &victim, &leader_pod, lost, stop_tx, stop_rx, &shells, &moved).await;

    let restarted = Instant::now();
    e2e.cluster.start_node(&victim).await.unwrap_or_else(|e| panic!("{victim} back: {e}"));
    eprintln!("e2e: {victim} back and Ready in {:.1?}", restarted.elapsed());
    e2e.run(&["delete", "namespace", &ns, &probes, "--wait=false"]).await;
}

/// While `victim` is lost: how soon it is noticed, the shells are back elsewhere and the
/// leadership moves, and what admission answered meanwhile.
#[allow(clippy::too_many_arguments)]
async fn observe_the_loss(
    e2e: &E2e,
    ns: &str,
    probes: &str,
    victim: &str,
    leader_pod: &str,
    lost: Instant,
    stop_tx: tokio::sync::watch::Sender<bool>,
    stop_rx: tokio::sync::watch::Receiver<bool>,
    shells: &Api<MyOwnShell>,
    moved: &[String],
) {
    let ns = ns.to_owned();
    let victim = victim.to_owned();
    let applying = keep_applying(e2e, probes, stop_rx);
    let watching = async {
        let not_ready = eventually(&format!("{victim} NotReady"), NODE_TIMEOUT, || async {
            match node_ready(e2e, &victim).await.as_str() {
                "True" => Err("still Ready".to_owned()),
                other => Ok((other.to_owned(), lost.elapsed())),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
        // Meanwhile the shells whose pod was there say so.
        let told = std::cell::Cell::new(false);
        let back = eventually("every shell Available on the other node", NODE_TIMEOUT, || async {
            let list = shells.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let condition = |s: &MyOwnShell, t: &str| {
                s.status.as_ref().and_then(|st| {
                    st.conditions.iter().find(|c| c.type_ == t).map(|c| (c.status.clone(), c.reason.clone()))
                })
            };
            if list
                .items
                .iter()
                .any(|s| condition(s, DEGRADED).is_some_and(|(st, r)| st == "True" && r == "NodeNotReady"))
            {
                told.set(true);
            }
            let pods = placement(e2e, &ns, "app.kubernetes.io/name=myownshell").await;
            let available = list.items.iter().all(|s| condition(s, AVAILABLE).is_some_and(|(st, _)| st == "True"));
            let all_elsewhere = pods.len() == 2 * SHELLS && pods.values().all(|n| *n != victim);
            if available && all_elsewhere {
                Ok(lost.elapsed())
            } else {
                Err(format!("{} Running elsewhere, all available: {available}", pods.len()))
            }
        });
        let back = back.await.unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
        let led = eventually("a leader on the other node", NODE_TIMEOUT, || async {
            let holder = leader(e2e).await;
            if !holder.is_empty() && !holder.contains(leader_pod) { Ok(lost.elapsed()) } else { Err(holder) }
        });
        let led = led.await.unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
        // A few more applies with only the other node's webhook.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = stop_tx.send(true);
        (not_ready, back, led, told.get())
    };
    let ((applied, refused), ((status, not_ready), back, led, told)) = tokio::join!(applying, watching);
    eprintln!(
        "e2e: node lost -> Ready={status} in {not_ready:.1?}, leadership moved in {led:.1?}, every shell Available on the other node in {back:.1?}"
    );
    let late: Vec<&String> = refused
        .iter()
        .filter(|(at, _)| at.duration_since(lost) > not_ready + Duration::from_secs(5))
        .map(|(_, e)| e)
        .collect();
    eprintln!(
        "e2e: admission during the loss: {applied} applies, {} refused while the lost node's webhook was still listed, {} after",
        refused.len() - late.len(),
        late.len()
    );
    assert!(late.is_empty(), "admission refused applies after the lost node was noticed: {late:?}");
    assert!(told || moved.is_empty(), "no shell said its pod's node was not ready");
}

/// `kubectl drain` of the second node, with shells and operator pods on it: the budgets let one
/// operator replica go at a time, admission answers throughout, and everything ends Ready on
/// the first node.
pub async fn drain(e2e: &E2e) {
    let ns = shells(e2e, "e2e-drain").await;
    let node = "myownshell-node-2";
    let probes = e2e.namespace("e2e-drain-admission").await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let draining = async {
        let out = e2e
            .kubectl
            .run(&["drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s"])
            .await
            .unwrap();
        assert!(out.success, "kubectl drain: {}{}", out.stdout, out.stderr);
        let drained = started.elapsed();
        // Two controllers, two webhooks (the production overlay) and the gateway's two.
        for (namespace, count) in [(SYSTEM, 6), (ns.as_str(), 2 * SHELLS)] {
            eventually(
                &format!("{count} pods Running and Ready on the first node in {namespace}"),
                NODE_TIMEOUT,
                || async {
                    let pods = placement(e2e, namespace, "app.kubernetes.io/name=myownshell").await;
                    let ready = e2e
                        .run(&[
                            "get",
                            "pods",
                            "-n",
                            namespace,
                            "-o",
                            "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}",
                        ])
                        .await;
                    let all_ready = ready.split_whitespace().all(|s| s == "True");
                    if pods.len() == count && pods.values().all(|n| n != node) && all_ready {
                        Ok(())
                    } else {
                        Err(format!("{pods:?}, Ready: {ready}"))
                    }
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
        }
        let settled = started.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = stop_tx.send(true);
        (drained, settled)
    };
    let ((applied, refused), (drained, settled)) = tokio::join!(keep_applying(e2e, &probes, stop_rx), draining);
    eprintln!(
        "e2e: {node} drained in {drained:.1?}, everything Ready on the other node {settled:.1?} after the start; {applied} applies meanwhile, {} refused",
        refused.len()
    );
    assert!(refused.is_empty(), "admission refused applies during the drain: {refused:?}");
    e2e.run(&["uncordon", node]).await;
    e2e.run(&["delete", "namespace", &ns, &probes, "--wait=false"]).await;
}

/// `~/notes.txt` in shell `far`'s one pod, once it can be read. Polled, not read once the pod
/// shows Running: right after a lost node comes back, its pods still show the Running the
/// kubelet last reported, while the restarted kubelet has yet to start them again ("pod does
/// not exist").
async fn read_notes(e2e: &E2e, ns: &str) -> String {
    eventually("~/notes.txt read in far's pod", NODE_TIMEOUT, || async {
        let pods = super::wait_running(e2e, ns, "far", 1).await;
        e2e.try_run(&["exec", "-n", ns, &pods[0], "-c", "shell", "--", "sh", "-c", "cat ~/notes.txt"]).await
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()))
}

/// A shell's home on a local volume, through a drain and a node loss: the pod can run only on
/// the volume's node (its node affinity), so after a drain it waits, saying why, until the node
/// is uncordoned; while the node is lost the shell says `HomeNodeUnavailable` (which node, since
/// when); when it returns, the shell runs there again, files and all.
pub async fn home_on_a_lost_node(e2e: &mut E2e) {
    let ns = e2e.namespace("e2e-home-node").await;
    let manifest = "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: far\nspec:\n  size: 1\n  home:\n    size: 64Mi\n";
    e2e.apply(&ns, manifest).await.unwrap();
    let pods = super::wait_running(e2e, &ns, "far", 1).await;
    e2e.run(&["exec", "-n", &ns, &pods[0], "-c", "shell", "--", "sh", "-c", "echo kept > ~/notes.txt"]).await;
    let node = e2e
        .wait_for(
            "the home bound on a node",
            &["get", "mos", "far", "-n", &ns, "-o", "jsonpath={.status.home.node}"],
            |out| !out.is_empty(),
        )
        .await;

    // A drain: the pod is evicted and waits for its volume's node, saying why.
    let started = Instant::now();
    let drained = e2e
        .kubectl
        .run(&["drain", &node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s"])
        .await
        .unwrap();
    assert!(drained.success, "kubectl drain {node}: {}{}", drained.stdout, drained.stderr);
    let why = e2e
        .wait_for(
            "the shell saying its pod cannot be scheduled",
            &["get", "mos", "far", "-n", &ns, "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].message}"],
            |out| out.contains("node affinity") || out.contains("unschedulable"),
        )
        .await;
    e2e.run(&["uncordon", &node]).await;
    assert_eq!(read_notes(e2e, &ns).await, "kept\n", "~/notes.txt after the drain");
    eprintln!("e2e: home: drained, waited for {node} ({why}), back with its files in {:.1?}", started.elapsed());

    // The node lost: said so, by name and since when; back with it.
    let lost = Instant::now();
    e2e.cluster.kill_node(&node).unwrap();
    let said = eventually("the shell saying its home's node is gone", NODE_TIMEOUT, || async {
        let jsonpath = "jsonpath={.status.conditions[?(@.type==\"HomeReady\")].reason}: {.status.conditions[?(@.type==\"HomeReady\")].message}";
        let out = e2e.try_run(&["get", "mos", "far", "-n", &ns, "-o", jsonpath]).await?;
        if out.starts_with("HomeNodeUnavailable") && out.contains(&node) && out.contains("since") { Ok(out) } else { Err(out) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    eprintln!("e2e: home: {node} lost, told in {:.1?}: {said}", lost.elapsed());
    e2e.cluster.start_node(&node).await.unwrap_or_else(|e| panic!("{node} back: {e}"));
    assert_eq!(read_notes(e2e, &ns).await, "kept\n", "~/notes.txt after the node's return");
    e2e.wait_for(
        "HomeReady=True again",
        &["get", "mos", "far", "-n", &ns, "-o", "jsonpath={.status.conditions[?(@.type==\"HomeReady\")].status}"],
        |out| out == "True",
    )
    .await;
    eprintln!("e2e: home: {node} back, the shell running there with its files {:.1?} after the loss", lost.elapsed());
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}
