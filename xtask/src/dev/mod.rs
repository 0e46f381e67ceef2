//! `cargo xtask dev`: the operator on this machine, no cluster needed.
//!
//! Starts the harness's control plane (the very code the tests use), installs the CRD, RBAC and
//! webhook configurations, runs `myownshell-webhook` (self-managed certificates),
//! `myownshell-controller` (leader election, authenticated metrics) and `myownshell-gateway`
//! (shells in the browser, `MYOWNSHELL_GATEWAY_URL`) as real processes, each with its own
//! ServiceAccount's token, and when all is ready writes `<state dir>/env`. Ctrl-C or
//! SIGTERM stops everything it started and removes the env file. Where nodes can run (root), the
//! control plane comes with `--nodes` real nodes (default 1), so pods run too. With `--kubeconfig`
//! or `--use-current-context` the three binaries run against that cluster instead.

mod cluster;
mod lock;
mod logs;
mod oidc;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use myownshell_api::names;
use myownshell_envtest::ControlPlane;
use myownshell_envtest::assets::{self, workspace_binary};
use myownshell_envtest::node::{Cluster, ClusterOptions};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use tokio::signal::unix::{SignalKind, signal};

use crate::progress::Step;

const CONTROLLER: &str = "myownshell-controller";
const WEBHOOK: &str = "myownshell-webhook";
const GATEWAY: &str = "myownshell-gateway";
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_GRACE: Duration = Duration::from_secs(15);

#[derive(clap::Args, Debug)]
pub struct DevArgs {
    /// Run the three binaries against the cluster of this kubeconfig instead of a local control plane.
    #[arg(long, conflicts_with = "use_current_context")]
    kubeconfig: Option<PathBuf>,
    /// Run against the current context of $KUBECONFIG (or ~/.kube/config).
    #[arg(long)]
    use_current_context: bool,
    /// Where the env file, logs, kubeconfigs and the lock go.
    #[arg(long, default_value_os_t = assets::target_dir().join("dev"))]
    state_dir: PathBuf,
    /// Skip `cargo build` (use binaries already built).
    #[arg(long)]
    no_build: bool,
    /// How many nodes the local cluster gets (they need root); the first is `myownshell-node`,
    /// the others `myownshell-node-2`, `myownshell-node-3`, …
    #[arg(long, default_value_t = 1, value_parser = node_count, conflicts_with_all = ["kubeconfig", "use_current_context"])]
    nodes: usize,
}

/// `--nodes`: 1 to the most a cluster can have.
fn node_count(value: &str) -> Result<usize, String> {
    let max = usize::from(myownshell_envtest::node::network::MAX_NODES);
    match value.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("a number of nodes from 1 to {max}")),
    }
}

/// A process plus what `dev` needs to know about it.
struct Running {
    process: ManagedProcess,
    probe: SocketAddr,
}

pub fn run(args: DevArgs) -> anyhow::Result<()> {
    let state_dir = std::path::absolute(&args.state_dir)?;
    let _lock = lock::DevLock::acquire(&state_dir)?;
    if !args.no_build {
        build_binaries()?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let result = runtime.block_on(run_async(&args, &state_dir));
    let _ = std::fs::remove_file(state_dir.join("env"));
    result
}

fn build_binaries() -> anyhow::Result<()> {
    let step = Step::start("cargo build (controller, webhook, gateway)");
    let status = crate::cargo::cargo()
        .args(["build", "-p", CONTROLLER, "-p", WEBHOOK, "-p", GATEWAY, "--bins"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build failed ({status})");
    }
    step.done();
    Ok(())
}

async fn run_async(args: &DevArgs, state_dir: &Path) -> anyhow::Result<()> {
    let remote = args.kubeconfig.clone().or_else(|| args.use_current_context.then(default_kubeconfig));
    match remote {
        Some(kubeconfig) => run_remote(&kubeconfig, state_dir).await,
        None => run_local(state_dir, args.nodes).await,
    }
}

fn default_kubeconfig() -> PathBuf {
    std::env::var_os("KUBECONFIG")
        .and_then(|v| std::env::split_paths(&v).next())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")))
        .unwrap_or_else(|| PathBuf::from(".kube/config"))
}

fn binary(name: &str) -> anyhow::Result<PathBuf> {
    // xtask runs from target/debug/xtask: its siblings are the binaries just built.
    let exe = std::env::current_exe()?;
    let path = exe.parent().map(|d| d.join(name)).filter(|p| assets::is_executable(p));
    match path {
        Some(p) => Ok(p),
        None => workspace_binary(name).map_err(anyhow::Error::msg),
    }
}

fn spawn(
    name: &'static str,
    state_dir: &Path,
    kubeconfig: &Path,
    args: Vec<String>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<ManagedProcess> {
    let log = state_dir.join(format!("{name}.log"));
    let _ = std::fs::remove_file(&log);
    std::fs::write(&log, "")?;
    logs::follow(name, log.clone(), stop.clone());
    let spec = ProcessSpec::new(name, binary(name)?, log)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAMESPACE", cluster::SYSTEM_NAMESPACE);
    ManagedProcess::spawn(spec).with_context(|| format!("starting {name}"))
}

/// Free loopback ports for one run.
struct Ports {
    webhook: u16,
    webhook_probe: u16,
    webhook_metrics: u16,
    controller_probe: u16,
    controller_metrics: u16,
    gateway: u16,
    gateway_probe: u16,
}

impl Ports {
    fn new() -> anyhow::Result<Self> {
        let port = || free_port().context("finding a free port");
        Ok(Self {
            webhook: port()?,
            webhook_probe: port()?,
            webhook_metrics: port()?,
            controller_probe: port()?,
            controller_metrics: port()?,
            gateway: port()?,
            gateway_probe: port()?,
        })
    }

    /// The URLs every mode writes to the env file.
    fn urls(&self) -> [(&'static str, String); 4] {
        let metrics = |port: u16| format!("https://127.0.0.1:{port}{}", myownshell_runtime::paths::METRICS);
        [
            ("MYOWNSHELL_WEBHOOK_URL", format!("https://127.0.0.1:{}", self.webhook)),
            ("MYOWNSHELL_METRICS_URL", metrics(self.controller_metrics)),
            ("MYOWNSHELL_WEBHOOK_METRICS_URL", metrics(self.webhook_metrics)),
            ("MYOWNSHELL_GATEWAY_URL", format!("https://127.0.0.1:{}", self.gateway)),
        ]
    }
}

fn local(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// Start the webhook, the controller and the gateway on `ports` (plus each mode's own flags)
/// and wait until all are ready.
async fn start_binaries(
    state_dir: &Path,
    ports: &Ports,
    (webhook_kubeconfig, webhook_flags): (&Path, Vec<String>),
    (controller_kubeconfig, controller_flags): (&Path, Vec<String>),
    (gateway_kubeconfig, gateway_flags): (&Path, Vec<String>),
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Vec<Running>> {
    let assets = tokio::task::spawn_blocking(crate::web::ensure).await??;
    let mut gateway_args = vec![
        format!("--bind-address={}", local(ports.gateway)),
        format!("--health-probe-bind-address={}", local(ports.gateway_probe)),
        format!("--assets-dir={}", assets.display()),
    ];
    gateway_args.extend(gateway_flags);
    let mut webhook_args = vec![
        format!("--webhook-port={}", ports.webhook),
        "--bind-address=127.0.0.1".into(),
        format!("--health-probe-bind-address={}", local(ports.webhook_probe)),
        format!("--metrics-bind-address={}", local(ports.webhook_metrics)),
    ];
    webhook_args.extend(webhook_flags);
    let mut controller_args = vec![
        format!("--health-probe-bind-address={}", local(ports.controller_probe)),
        format!("--metrics-bind-address={}", local(ports.controller_metrics)),
    ];
    controller_args.extend(controller_flags);
    let mut running = vec![
        Running {
            process: spawn(WEBHOOK, state_dir, webhook_kubeconfig, webhook_args, stop)?,
            probe: local(ports.webhook_probe).parse()?,
        },
        Running {
            process: spawn(CONTROLLER, state_dir, controller_kubeconfig, controller_args, stop)?,
            probe: local(ports.controller_probe).parse()?,
        },
        Running {
            process: spawn(GATEWAY, state_dir, gateway_kubeconfig, gateway_args, stop)?,
            probe: local(ports.gateway_probe).parse()?,
        },
    ];
    wait_ready(&mut running).await?;
    Ok(running)
}

/// Serve until Ctrl-C / SIGTERM (or a process dies), then stop everything.
async fn run_until_stopped(mut running: Vec<Running>, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let outcome = wait_for_stop(&mut running).await;
    shutdown(running, stop);
    outcome
}

async fn run_local(state_dir: &Path, nodes: usize) -> anyhow::Result<()> {
    let assets_dir = tokio::task::spawn_blocking(crate::envtest::ensure).await??;
    let found = myownshell_envtest::assets::Assets {
        kube_apiserver: assets_dir.join(myownshell_envtest::assets::KUBE_APISERVER),
        etcd: assets_dir.join(myownshell_envtest::assets::ETCD),
    };
    // The identity provider people sign in to the page through, laid out first: the apiserver
    // starts trusting it.
    let step = Step::start("Ory Hydra and its login page (users alice and bob), trusted by the apiserver");
    let provider = oidc::plan(state_dir).await?;
    step.done();
    let apiserver_args = provider.apiserver_args.clone();
    let plane = match tokio::task::spawn_blocking(node_or_why_not).await? {
        Ok(()) => {
            let what = if nodes == 1 { "a node".to_owned() } else { format!("{nodes} nodes") };
            let step = Step::start(format!("starting the cluster (control plane, and {what}: containerd, kubelet)"));
            let mut node =
                Cluster::start(ClusterOptions { nodes, apiserver_args, ..ClusterOptions::default() }).await?;
            step.done();
            // NetworkPolicies enforced, as on a cluster whose network plugin does (kube-router's
            // policy controller in each node, built once from the module proxy).
            tokio::task::spawn_blocking(crate::kube_router::ensure).await??;
            let step = Step::start("kube-router: NetworkPolicies enforced on every node");
            node.enforce_network_policies().await?;
            step.done();
            // A real dynamic provisioner and a default StorageClass, for shells with a home.
            tokio::task::spawn_blocking(crate::local_path::ensure).await??;
            let step = Step::start("local-path-provisioner: the default StorageClass for shells' homes");
            myownshell_envtest::node::local_path::install(&node).await.map_err(anyhow::Error::msg)?;
            step.done();
            // The session holder every shell pod runs (the operator runs here as processes, so
            // from an image of its own rather than the operator's).
            let archive = tokio::task::spawn_blocking(|| crate::session::image(false)).await??;
            node.import_image(&archive).map_err(anyhow::Error::msg)?;
            Plane::Node(Box::new(node))
        }
        Err(why) if nodes > 1 => bail!("--nodes {nodes} needs nodes that can run: {why}"),
        Err(why) => {
            eprintln!("xtask: dev runs API-only, no pods will run: {why}");
            let step = Step::start("starting the control plane (etcd + kube-apiserver)");
            let options = myownshell_envtest::control_plane::Options { apiserver_args, ..Default::default() };
            let cp = ControlPlane::start_in(found, options, myownshell_envtest::control_plane::new_run_dir()?).await?;
            step.done();
            Plane::ApiOnly(Box::new(cp))
        }
    };
    let cp = plane.control_plane();

    let ports = Ports::new()?;
    let provider = provider.start(ports.gateway).await?;
    let ids = cluster::install(cp, state_dir, ports.webhook).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let webhook_flags = vec![
        format!("--namespace={}", cluster::SYSTEM_NAMESPACE),
        // The local apiserver calls https://127.0.0.1:PORT, so the serving cert needs that SAN.
        "--extra-san=127.0.0.1".into(),
        // As production should: the webhook answers only the apiserver, proven by the client
        // certificate the local apiserver presents to webhooks (a review posted by anyone else
        // gets 403 and leaves no record).
        format!("--apiserver-client-ca-file={}", cp.webhook_client_ca_file().display()),
    ];
    let session_image = match &plane {
        Plane::Node(_) => myownshell_envtest::node::images::SESSION_IMAGE,
        Plane::ApiOnly(_) => "none",
    };
    let controller_flags = vec![
        "--leader-elect".into(),
        format!("--leader-election-namespace={}", cluster::SYSTEM_NAMESPACE),
        format!("--session-image={session_image}"),
    ];
    let running = start_binaries(
        state_dir,
        &ports,
        (&ids.webhook_kubeconfig, webhook_flags),
        (&ids.controller_kubeconfig, controller_flags),
        (&ids.gateway_kubeconfig, provider.gateway_flags.clone()),
        &stop,
    )
    .await?;

    let mut env = vec![("KUBECONFIG", ids.admin_kubeconfig.display().to_string())];
    env.extend(ports.urls());
    env.push(("MYOWNSHELL_METRICS_TOKEN", ids.metrics_token.clone()));
    env.push(("MYOWNSHELL_CLUSTER", plane.kind().to_owned()));
    env.push(("MYOWNSHELL_OIDC_ISSUER_URL", provider.provider.issuer()));
    let mut pids = plane.pids();
    pids.extend(running.iter().map(|r| r.process.pid()));
    pids.push(provider.provider.pid());
    write_pids(state_dir, &pids)?;
    write_env(state_dir, &env)?;
    announce(state_dir, &env, &plane.summary());
    let outcome = run_until_stopped(running, stop).await;
    drop(provider);
    drop(plane);
    eprintln!("xtask: dev stopped; every process it started is gone");
    outcome
}

/// What `dev` runs the operator against locally: a cluster with a node (pods run), or, where
/// the node cannot run, only the control plane.
enum Plane {
    Node(Box<Cluster>),
    ApiOnly(Box<ControlPlane>),
}

impl Plane {
    fn control_plane(&self) -> &ControlPlane {
        match self {
            Self::Node(cluster) => cluster.control_plane(),
            Self::ApiOnly(cp) => cp,
        }
    }
    fn pids(&self) -> Vec<u32> {
        match self {
            Self::Node(cluster) => cluster.pids(),
            Self::ApiOnly(cp) => cp.pids(),
        }
    }
    fn summary(&self) -> String {
        match self {
            Self::Node(cluster) => cluster.summary(),
            Self::ApiOnly(cp) => format!("{}; API only, no pods run", cp.summary()),
        }
    }
    /// `node` or `api-only`, for the env file.
    fn kind(&self) -> &'static str {
        match self {
            Self::Node(_) => "node",
            Self::ApiOnly(_) => "api-only",
        }
    }
}

/// The node runs when we are root and its pieces are there or can be made (installed with
/// apt-get, built once with Go, as `cargo xtask envtest --node` does); otherwise, why not.
fn node_or_why_not() -> Result<(), String> {
    if !myownshell_envtest::node::assets::is_root() {
        return Err("the node needs root (namespaces, cgroups, containerd)".to_owned());
    }
    crate::node::ensure().map(drop).map_err(|e| format!("{e:#}"))
}

async fn run_remote(kubeconfig: &Path, state_dir: &Path) -> anyhow::Result<()> {
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kube::config::Kubeconfig::read_from(kubeconfig)?, &options)
        .await
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let client = kube::Client::try_from(config)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    if crds.get_opt(names::CRD_NAME).await?.is_none() {
        bail!(
            "the cluster in {} has no {} CRD: install it first with `kubectl apply -k config/crd`",
            kubeconfig.display(),
            names::CRD_NAME
        );
    }
    // Nothing is written into someone else's cluster: the webhook serves a certificate made
    // here (--cert-dir mode) and injects nothing; point a webhook configuration at it only if
    // the cluster can reach this machine.
    let cert_dir = state_dir.join("webhook-certs");
    let ca_file = local_serving_cert(&cert_dir)?;
    let ports = Ports::new()?;
    let stop = Arc::new(AtomicBool::new(false));
    let webhook_flags = vec![format!("--cert-dir={}", cert_dir.display())];
    let running = start_binaries(
        state_dir,
        &ports,
        (kubeconfig, webhook_flags),
        (kubeconfig, Vec::new()),
        (kubeconfig, Vec::new()),
        &stop,
    )
    .await?;

    let mut env = vec![("KUBECONFIG", kubeconfig.display().to_string())];
    env.extend(ports.urls());
    env.push(("MYOWNSHELL_WEBHOOK_CA", ca_file.display().to_string()));
    write_pids(state_dir, &running.iter().map(|r| r.process.pid()).collect::<Vec<_>>())?;
    write_env(state_dir, &env)?;
    let what =
        format!("against {} (metrics need a token of that cluster bound to metrics-reader)", kubeconfig.display());
    announce(state_dir, &env, &what);
    let outcome = run_until_stopped(running, stop).await;
    eprintln!("xtask: dev stopped; every process it started is gone");
    outcome
}

/// A CA and a serving certificate for 127.0.0.1/localhost in `dir` (`tls.crt`, `tls.key`,
/// `ca.crt`), for the webhook's `--cert-dir` mode. Returns the CA file.
fn local_serving_cert(dir: &Path) -> anyhow::Result<PathBuf> {
    use myownshell_certs::pki::{CertificateAuthority, LeafSpec};
    const VALIDITY: Duration = Duration::from_secs(7 * 86_400);
    std::fs::create_dir_all(dir)?;
    let ca = CertificateAuthority::generate("myownshell-dev-ca", VALIDITY)?;
    let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    let leaf = ca.issue(&LeafSpec::server("myownshell-webhook", vec!["localhost".into()], vec![ip], VALIDITY))?;
    std::fs::write(dir.join("tls.crt"), &leaf.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &leaf.key_pem)?;
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca.cert_pem())?;
    Ok(ca_file)
}

async fn wait_ready(running: &mut [Running]) -> anyhow::Result<()> {
    let step = Step::start("waiting for /readyz of every process");
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let mut not_ready = Vec::new();
        for r in running.iter_mut() {
            if let Some(status) = r.process.exit_status() {
                bail!(
                    "{} exited ({status}) before it was ready; its log: {}\n{}",
                    r.process.name(),
                    r.process.log_path().display(),
                    r.process.log_tail(20)
                );
            }
            match myownshell_envtest::http::plain_get(r.probe, myownshell_runtime::paths::READYZ)
                .await
                .map(|(code, _)| code)
            {
                Ok(200) => {}
                Ok(code) => not_ready.push(format!("{}: HTTP {code}", r.process.name())),
                Err(e) => not_ready.push(format!("{}: {e}", r.process.name())),
            }
        }
        if not_ready.is_empty() {
            step.done();
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("not ready after {READY_TIMEOUT:?}: {}", not_ready.join(", "));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every process this run started, for whoever wants to check they are gone afterwards.
fn write_pids(state_dir: &Path, pids: &[u32]) -> anyhow::Result<()> {
    let text: Vec<String> = pids.iter().map(u32::to_string).collect();
    std::fs::write(state_dir.join("pids"), text.join("\n") + "\n")?;
    Ok(())
}

/// `export` lines; the file is private because it holds a token. The env file is the signal
/// that dev is ready (scripts and the dev test wait for it), so it appears whole: written to a
/// temporary name and renamed, never read half-written.
fn write_env(state_dir: &Path, env: &[(&str, String)]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text: String =
        env.iter().map(|(key, value)| format!("export {key}='{}'\n", value.replace('\'', r"'\''"))).collect();
    let partial = state_dir.join("env.partial");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&partial)?;
    file.write_all(text.as_bytes())?;
    drop(file);
    std::fs::rename(&partial, state_dir.join("env"))?;
    Ok(())
}

fn announce(state_dir: &Path, env: &[(&str, String)], what: &str) {
    eprintln!("\nxtask: MyOwnShell is running ({what})");
    for (key, value) in env {
        let shown = if key.ends_with("TOKEN") { "<in the env file>" } else { value.as_str() };
        eprintln!("  export {key}={shown}");
    }
    eprintln!(
        "\n  source {}/env\n  kubectl apply -f config/samples/myownshell_v1alpha1_myownshell.yaml\n  \
         curl -sk -H \"Authorization: Bearer $MYOWNSHELL_METRICS_TOKEN\" $MYOWNSHELL_METRICS_URL\n\n  \
         In a browser: open $MYOWNSHELL_GATEWAY_URL and sign in with a token of the shell's owner\n  \
         (README, \"Shells in the browser\").\n\n\
         Logs: {}/*.log. Ctrl-C stops everything.\n",
        state_dir.display(),
        state_dir.display()
    );
}

/// Until Ctrl-C / SIGTERM (Ok) or a process dies on its own (Err).
async fn wait_for_stop(running: &mut [Running]) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            _ = term.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                for r in running.iter_mut() {
                    if let Some(status) = r.process.exit_status() {
                        bail!("{} exited ({status}); see {}", r.process.name(), r.process.log_path().display());
                    }
                }
            }
        }
    }
}

fn shutdown(running: Vec<Running>, stop: Arc<AtomicBool>) {
    // Controller first (it releases its lease), then the webhook.
    for mut r in running.into_iter().rev() {
        match r.process.stop(STOP_GRACE) {
            Ok(status) => eprintln!("xtask: {} stopped ({status})", r.process.name()),
            Err(e) => eprintln!("xtask: stopping {}: {e}", r.process.name()),
        }
    }
    stop.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        dev: DevArgs,
    }

    #[test]
    fn nodes_default_to_one_and_stay_within_what_a_cluster_can_have() {
        assert_eq!(Cli::try_parse_from(["dev"]).unwrap().dev.nodes, 1);
        assert_eq!(Cli::try_parse_from(["dev", "--nodes", "3"]).unwrap().dev.nodes, 3);
        for bad in ["0", "42", "two"] {
            assert!(Cli::try_parse_from(["dev", "--nodes", bad]).is_err(), "--nodes {bad}");
        }
        assert!(Cli::try_parse_from(["dev", "--nodes", "2", "--use-current-context"]).is_err());
    }
}
