//! `cargo xtask bench gate`: what the connect gate adds to an exec into a shell's pod, with 1,
//! 100, 1,000 and 10,000 shells in its namespace. The gate is the connect webhook (the release
//! binary, as shipped) with its committed configuration (`config/webhook`: `failurePolicy: Fail`,
//! namespaces opened to shells, pods named as a Deployment's), called by the real apiserver over
//! TLS; its decision is one lookup by the pod's name, so the figure should not grow with the
//! namespace. (The gate before it, a ValidatingAdmissionPolicy with the namespace's MyOwnShells
//! as parameters, was evaluated once per shell: 2.0 s p50 / 2.9 s p99 added at 10,000.)
//!
//! On the API-only plane (nothing runs, so an exec that admission lets through ends right after it
//! with "does not have a host assigned"), three execs of the same user, one after another:
//! - into a shell's pod (its owner's, let in and recorded),
//! - into a pod that is no shell's, in the same namespace (named as a Deployment's: the webhook
//!   is asked, and lets it through),
//! - the floor: the same pod in a namespace not opened to shells, which the webhook is never
//!   asked about (`myownshell.io/shells`).
//!
//! The user is bound to `cluster-admin` by RBAC, not in `system:masters`, so the gate sees an
//! ordinary owner. The policies of `config/policy` are installed too, as in a cluster.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_api::MyOwnShell;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
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
    let _webhook = start_webhook(&cp, &admin).await?;
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
    // A shell's pods come after the shell (the webhook refuses a shell whose pods already run).
    for (ns, pod) in [(&shells_ns, PLAIN_POD), (&floor_ns, PLAIN_POD)] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": pod},
            "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}}))?;
        Api::<Pod>::namespaced(admin.clone(), ns).create(&PostParams::default(), &pod).await?;
    }
    let owner = cp.client_as_user(OWNER, &["system:authenticated"])?;
    let stranger = cp.client_as_user("bob", &["system:authenticated"])?;

    println!(
        "{:>7}  {:>28}  {:>28}  {:>28}  {:>22}",
        "shells", "shell's pod p50 / p99 ms", "other pod p50 / p99 ms", "floor p50 / p99 ms", "added p50 / p99 ms"
    );
    let mut made = 0;
    for &count in counts {
        create_shells(&owner, &shells_ns, made, count).await?;
        made = made.max(count);
        // The webhook sees a new shell once its watch has it: wait until a stranger is refused
        // from the newest shell's pod (named as its Deployment would name it).
        let newest = format!("s{}-7d9f8c6b4-x2x4z", made - 1);
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": newest},
            "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}}))?;
        // Made once per count; the first is SHELL_POD.
        let _ = Api::<Pod>::namespaced(admin.clone(), &shells_ns).create(&PostParams::default(), &pod).await;
        eventually(&format!("the webhook knows all {made} shells"), Duration::from_secs(120), || async {
            match exec(&stranger, &shells_ns, &newest).await {
                Err(e) if e.contains("may not exec") => Ok(()),
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
            "{:>7}  {:>28}  {:>28}  {:>28}  {:>22}",
            made,
            pair(&shell),
            pair(&other),
            pair(&floor),
            format!("{:.2} / {:.2}", ms(shell.p50) - ms(floor.p50), ms(shell.p99) - ms(floor.p99))
        );
    }
    println!("(sequential execs of one user, {requests} each; target: added p99 at 10,000 shells <= 5 ms)");
    Ok(())
}

/// The connect webhook, as shipped (`cargo build --release`), serving 127.0.0.1 with its
/// committed configurations pointed at it; ready (its first list of shells in, its CA injected).
/// Killed when dropped.
async fn start_webhook(cp: &ControlPlane, admin: &Client) -> anyhow::Result<ManagedProcess> {
    let status = crate::cargo::cargo()
        .args(["build", "--release", "-p", "myownshell-webhook", "--bin", "myownshell-webhook"])
        .status()?;
    if !status.success() {
        bail!("building the webhook failed ({status})");
    }
    let binary = myownshell_envtest::assets::target_dir().join("release/myownshell-webhook");
    let system = create_namespace(admin, "bench-gate-system").await?;
    let (port, probes) = (free_port()?, free_port()?);
    let url = |path: &str| format!("https://127.0.0.1:{port}{path}");
    let mut names = Vec::new();
    for mut object in kustomize::render("webhook").map_err(anyhow::Error::msg)? {
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        if !kind.ends_with("WebhookConfiguration") {
            continue;
        }
        for hook in object["webhooks"].as_array_mut().into_iter().flatten() {
            let path = hook["clientConfig"]["service"]["path"].as_str().unwrap_or_default().to_owned();
            hook["clientConfig"] = json!({"url": url(&path)});
        }
        names.push(object["metadata"]["name"].as_str().unwrap_or_default().to_owned());
        let pp = PostParams::default();
        if kind == "MutatingWebhookConfiguration" {
            let config: MutatingWebhookConfiguration = serde_json::from_value(object)?;
            Api::<MutatingWebhookConfiguration>::all(admin.clone()).create(&pp, &config).await?;
        } else {
            let config: ValidatingWebhookConfiguration = serde_json::from_value(object)?;
            Api::<ValidatingWebhookConfiguration>::all(admin.clone()).create(&pp, &config).await?;
        }
    }
    let [mutating, validating] = names.as_slice() else {
        bail!("config/webhook has not two configurations: {names:?}")
    };
    let log = cp.layout().dir.join("bench-gate-webhook.log");
    let spec = ProcessSpec::new("webhook", binary, log)
        .args([
            "--bind-address=127.0.0.1".to_owned(),
            format!("--webhook-port={port}"),
            format!("--health-probe-bind-address=127.0.0.1:{probes}"),
            "--metrics-bind-address=0".to_owned(),
            format!("--namespace={system}"),
            "--secret-name=webhook-server-cert".to_owned(),
            format!("--mutating-webhook-configuration={mutating}"),
            format!("--validating-webhook-configuration={validating}"),
            "--extra-san=127.0.0.1".to_owned(),
            "--shutdown-delay=0s".to_owned(),
        ])
        .env("KUBECONFIG", cp.kubeconfig_path())
        .env("RUST_LOG", "warn");
    let webhook = ManagedProcess::spawn(spec)?;
    let (pid, log) = (webhook.pid(), webhook.log_path().to_owned());
    let ready = SocketAddr::from((Ipv4Addr::LOCALHOST, probes));
    eventually("the webhook ready", Duration::from_secs(60), || async {
        if !myownshell_envtest::process::is_alive(pid) {
            return Err(format!("the webhook exited: {}", myownshell_envtest::process::log_tail(&log, 20)));
        }
        match myownshell_envtest::http::plain_get(ready, "/readyz").await {
            Ok((200, _)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .map_err(anyhow::Error::msg)?;
    Ok(webhook)
}

/// Shells `s{from}` to `s{to - 1}`, created by `client` (the webhook stamps its user the owner),
/// `CREATE_CONCURRENCY` at a time.
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
                    "metadata": {"name": format!("s{i}")}, "spec": {"size": 0}}))?;
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
