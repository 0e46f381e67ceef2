//! `cargo xtask bench node`: on the real node, the time from applying a `MyOwnShell` to its pod
//! Running, against the floor of the same run: applying a Deployment with the very pod template
//! the controller builds, straight to the apiserver. The difference is what the operator's path
//! (admission, the controller's watch, reconcile and apply) adds to the cluster's own.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use myownshell_envtest::assets::workspace_root;
use myownshell_envtest::node::{Cluster, ClusterOptions};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(20);

pub fn run(rounds: usize) -> anyhow::Result<()> {
    crate::envtest::ensure()?;
    crate::node::ensure()?;
    let image = crate::node::operator_image(crate::node::ImageProfile::Release, false)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(measure(image, rounds))
}

async fn measure(image: std::path::PathBuf, rounds: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = Cluster::start(ClusterOptions { images: vec![image], ..ClusterOptions::default() }).await?;
    println!("cluster with a node ready: {:.1?}", started.elapsed());
    let kubectl = cluster.control_plane().kubectl();
    let started = Instant::now();
    let overlay = workspace_root().join("config/overlays/local");
    kubectl
        .run(&["apply", "--server-side", "-k", &overlay.display().to_string()])
        .await
        .map_err(anyhow::Error::msg)?
        .ok()
        .map_err(anyhow::Error::msg)?;
    for deployment in ["myownshell-controller-manager", "myownshell-webhook"] {
        kubectl
            .run(&[
                "rollout",
                "status",
                "-n",
                "myownshell-system",
                &format!("deployment/{deployment}"),
                "--timeout=120s",
            ])
            .await
            .map_err(anyhow::Error::msg)?
            .ok()
            .map_err(anyhow::Error::msg)?;
    }
    println!("operator deployed from config/overlays/local and Ready: {:.1?}", started.elapsed());

    let client = cluster.control_plane().client()?;
    let ns = myownshell_envtest::create_namespace(&client, "bench-node").await?;
    // Warm up, and take the pod template the controller builds for the floor.
    let warmup = apply_shell(&client, &ns, "warmup").await?;
    println!("first shell (cold image cache, first reconcile): {warmup:.2?}");
    let template = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get("warmup")
        .await?
        .spec
        .context("the warmup Deployment has no spec")?
        .template;

    let (mut operator, mut floor) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        floor.push(apply_deployment(&client, &ns, &format!("floor-{round}"), &template).await?);
        operator.push(apply_shell(&client, &ns, &format!("shell-{round}")).await?);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (op, fl) = (median(&mut operator), median(&mut floor));
    println!("apply to Running pod, median of {rounds} (min..max):");
    println!(
        "  MyOwnShell (webhook, controller, Deployment, pod): {op:.2?} ({:.2?}..{:.2?})",
        operator[0],
        operator[rounds - 1]
    );
    println!(
        "  floor, the same Deployment applied directly:      {fl:.2?} ({:.2?}..{:.2?})",
        floor[0],
        floor[rounds - 1]
    );
    println!(
        "  operator adds {:.0?} ({:.2}x the floor)",
        op.saturating_sub(fl),
        op.as_secs_f64() / fl.as_secs_f64().max(1e-9)
    );
    cluster.stop().map_err(anyhow::Error::msg)?;
    Ok(())
}

async fn apply_shell(client: &Client, ns: &str, name: &str) -> anyhow::Result<Duration> {
    let shell: myownshell_api::MyOwnShell = serde_json::from_value(
        json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": name}, "spec": {}}),
    )?;
    let started = Instant::now();
    Api::<myownshell_api::MyOwnShell>::namespaced(client.clone(), ns).create(&PostParams::default(), &shell).await?;
    wait_running(client, ns, &format!("app.kubernetes.io/instance={name}")).await?;
    Ok(started.elapsed())
}

async fn apply_deployment(
    client: &Client,
    ns: &str,
    name: &str,
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> anyhow::Result<Duration> {
    let mut template = template.clone();
    let labels = json!({"bench": name});
    template.metadata = Some(serde_json::from_value(json!({"labels": labels}))?);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
    }))?;
    let started = Instant::now();
    Api::<Deployment>::namespaced(client.clone(), ns).create(&PostParams::default(), &deployment).await?;
    wait_running(client, ns, &format!("bench={name}")).await?;
    Ok(started.elapsed())
}

async fn wait_running(client: &Client, ns: &str, selector: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let list = pods.list(&ListParams::default().labels(selector)).await?;
        if list.items.iter().any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("no Running pod for {selector} in {TIMEOUT:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}
