//! `cargo xtask bench gate`: what the connect policies (`config/policy`, evaluated in the
//! apiserver) add to an exec into a shell's pod, with 1, 100, 1,000 and 10,000 shells in its
//! namespace. The connect policy takes every MyOwnShell of the namespace as a parameter
//! (`paramRef.selector: {}`) and is evaluated once per shell on every CONNECT that passes its
//! matchConditions (a pod named like a Deployment's), so its cost grows with the namespace.
//!
//! On the API-only plane (nothing runs, so an exec that admission lets through ends right after it
//! with "does not have a host assigned"), three execs of the same user, one after another:
//! - into a shell's pod (its owner's, let in),
//! - into a pod that is no shell's, in the same namespace (the policies still look at every shell),
//! - the floor: the same pod in a namespace not opened to shells, which no policy with MyOwnShell
//!   parameters looks at (`myownshell.io/shells`).
//!
//! The user is bound to `cluster-admin` by RBAC, not in `system:masters`, so the policies see an
//! ordinary owner. No webhook runs: this is the policies' share alone (the webhook's own CONNECT
//! cost is the `bench webhook` CONNECT row).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_api::MyOwnShell;
use myownshell_envtest::{ControlPlane, create_namespace, create_shell_namespace, eventually, kustomize};
use serde_json::json;

const OWNER: &str = "alice";
/// A pod of shell `s0`, as its Deployment names them.
const SHELL_POD: &str = "s0-7d9f8c6b4-x2x4z";
/// A pod named like a Deployment's that is no shell's.
const PLAIN_POD: &str = "api-7d9f8c6b4-x2x4z";
const CREATE_CONCURRENCY: usize = 32;

pub fn run(counts: &[usize], requests: usize) -> anyhow::Result<()> {
    crate::envtest::ensure()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(measure(counts, requests.max(20)))
}

async fn measure(counts: &[usize], requests: usize) -> anyhow::Result<()> {
    let cp = ControlPlane::start().await?;
    let admin = cp.client()?;
    let kubectl = cp.kubectl();
    let objects = kustomize::render("policy").map_err(anyhow::Error::msg)?;
    let list = kustomize::as_list(&objects.iter().collect::<Vec<_>>());
    kubectl
        .run_with_stdin(&["apply", "-f", "-"], Some(&list))
        .await
        .map_err(anyhow::Error::msg)?
        .ok()
        .map_err(anyhow::Error::msg)?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "bench-gate-users"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OWNER},
                     {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}))?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch("bench-gate-users", &PatchParams::apply("bench-gate"), &Patch::Apply(&binding))
        .await?;
    let shells_ns = create_shell_namespace(&admin, "bench-gate").await?;
    let floor_ns = create_namespace(&admin, "bench-gate-floor").await?;
    for (ns, pod) in [(&shells_ns, SHELL_POD), (&shells_ns, PLAIN_POD), (&floor_ns, PLAIN_POD)] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": pod},
            "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}}))?;
        Api::<Pod>::namespaced(admin.clone(), ns).create(&PostParams::default(), &pod).await?;
    }
    let owner = cp.client_as_user(OWNER, &["system:authenticated"])?;
    let stranger = cp.client_as_user("bob", &["system:authenticated"])?;

    println!(
        "{:>7}  {:>28}  {:>28}  {:>28}  {:>14}",
        "shells", "shell's pod p50 / p99 ms", "other pod p50 / p99 ms", "floor p50 / p99 ms", "added p99 ms"
    );
    let mut made = 0;
    for &count in counts {
        create_shells(&admin, &shells_ns, made, count).await?;
        made = made.max(count);
        // The policy sees a new shell once its parameter informer has it: wait until a stranger is
        // refused from the newest shell's pod (named as its Deployment would name it).
        let newest = format!("s{}-7d9f8c6b4-x2x4z", made - 1);
        if made > 1 {
            let pod: Pod = serde_json::from_value(json!({"metadata": {"name": newest},
                "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}}))?;
            let _ = Api::<Pod>::namespaced(admin.clone(), &shells_ns).create(&PostParams::default(), &pod).await;
        }
        eventually(&format!("the policy knows all {made} shells"), Duration::from_secs(120), || async {
            match exec(&stranger, &shells_ns, &newest).await {
                Err(e) if e.contains("ValidatingAdmissionPolicy") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
        .map_err(anyhow::Error::msg)?;
        let shell = timed(&owner, &shells_ns, SHELL_POD, requests).await?;
        let other = timed(&owner, &shells_ns, PLAIN_POD, requests).await?;
        let floor = timed(&owner, &floor_ns, PLAIN_POD, requests).await?;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let pair = |s: &Stats| format!("{:.2} / {:.2}", ms(s.p50), ms(s.p99));
        println!(
            "{:>7}  {:>28}  {:>28}  {:>28}  {:>14.2}",
            made,
            pair(&shell),
            pair(&other),
            pair(&floor),
            ms(shell.p99) - ms(floor.p99)
        );
    }
    println!("(sequential execs of one user, {requests} each; target: added p99 at 10,000 shells <= 5 ms)");
    Ok(())
}

/// Shells `s{from}` to `s{to - 1}`, owned by [`OWNER`], `CREATE_CONCURRENCY` at a time.
async fn create_shells(client: &Client, ns: &str, from: usize, to: usize) -> anyhow::Result<()> {
    use futures::StreamExt;
    let api: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                let shell: MyOwnShell = serde_json::from_value(json!({
                    "apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell",
                    "metadata": {"name": format!("s{i}")}, "spec": {"size": 0, "owner": OWNER}}))?;
                api.create(&PostParams::default(), &shell).await.with_context(|| format!("creating s{i}"))?;
                Ok(())
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    if to > from {
        println!("(created shells s{from}..s{} in {:.1?})", to - 1, started.elapsed());
    }
    Ok(())
}

/// One exec as `client`'s user; `Ok` when admission let it through (it ends right after, for
/// want of a node), `Err` with the apiserver's answer otherwise.
async fn exec(client: &Client, ns: &str, pod: &str) -> Result<(), String> {
    let uri = format!("/api/v1/namespaces/{ns}/pods/{pod}/exec?command=true&stdout=true");
    let request = http::Request::post(uri).body(Vec::new()).map_err(|e| e.to_string())?;
    match client.request_text(request).await {
        Err(kube::Error::Api(status)) if status.message.contains("does not have a host assigned") => Ok(()),
        Err(e) => Err(e.to_string()),
        Ok(text) => Err(format!("unexpected success: {text}")),
    }
}

struct Stats {
    p50: Duration,
    p99: Duration,
}

/// `requests` execs into `pod`, each admitted; their p50 and p99.
async fn timed(client: &Client, ns: &str, pod: &str, requests: usize) -> anyhow::Result<Stats> {
    let mut took = Vec::with_capacity(requests);
    for _ in 0..requests {
        let started = Instant::now();
        if let Err(e) = exec(client, ns, pod).await {
            bail!("exec into {ns}/{pod} was not admitted: {e}");
        }
        took.push(started.elapsed());
    }
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q).ceil() as usize).clamp(1, took.len()) - 1];
    Ok(Stats { p50: at(0.50), p99: at(0.99) })
}
