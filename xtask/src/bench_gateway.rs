//! `cargo xtask bench gateway`: on the real node (root), a terminal through the gateway against
//! the floor of the same run, a plain `kubectl exec`-style WebSocket exec (kube's, as the
//! apiserver's client) into the same pod:
//!
//! - keystroke to echo: one key sent, the time until the pod's terminal echoes it, p50 and p99
//!   of each path, and what the gateway adds;
//! - throughput: `yes | head -c SIZE` printed by the shell, bytes per second of each path and
//!   their ratio;
//! - memory: the gateway's RSS with no terminal and with `--sessions` idle terminals open, per
//!   terminal; and whether every one of them echoed a key (no failed keystroke).
//!
//! The gateway is the release binary, run on this machine with the admin's kubeconfig (it
//! impersonates the bench's user as in production); the pod is a shell pod made directly, so
//! neither the controller nor the webhook is in the path.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use myownshell_api::{MyOwnShell, names};
use myownshell_envtest::node::{Cluster, ClusterOptions};
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::tls::loopback;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const NS: &str = "bench-gateway";
const SHELL: &str = "bench";
const TIMEOUT: Duration = Duration::from_secs(120);

/// What the bench is asked for.
pub struct Options {
    /// Keystrokes timed per path.
    pub keystrokes: usize,
    /// Bytes printed per path for the throughput.
    pub bytes: usize,
    /// Idle terminals held open at once.
    pub sessions: usize,
}

pub fn run(options: Options) -> anyhow::Result<()> {
    crate::envtest::ensure()?;
    crate::node::ensure()?;
    let web = crate::web::ensure()?;
    let status = crate::cargo::cargo().args(["build", "--release", "-p", "myownshell-gateway"]).status()?;
    if !status.success() {
        bail!("cargo build --release -p myownshell-gateway failed ({status})");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(measure(options, web))
}

/// One side of a terminal: send keys, read what the pod's terminal prints.
enum Terminal {
    // Both boxed: the streams differ in size, and a bench holds a few.
    Direct(Box<tokio_tungstenite::WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>>),
    Gateway(Box<tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>>),
}

impl Terminal {
    async fn send(&mut self, keys: &[u8]) -> anyhow::Result<()> {
        match self {
            Self::Direct(ws) => ws.send(Message::binary([&[0u8][..], keys].concat())).await?,
            Self::Gateway(ws) => ws.send(Message::binary(keys.to_vec())).await?,
        }
        Ok(())
    }

    /// The next output bytes (control messages and other streams skipped).
    async fn output(&mut self) -> anyhow::Result<Vec<u8>> {
        loop {
            let message = match self {
                Self::Direct(ws) => ws.next().await,
                Self::Gateway(ws) => ws.next().await,
            };
            match (self.is_direct(), message) {
                (true, Some(Ok(Message::Binary(b)))) if b.first() == Some(&1) && b.len() > 1 => {
                    return Ok(b[1..].to_vec());
                }
                (false, Some(Ok(Message::Binary(b)))) => return Ok(b.to_vec()),
                (false, Some(Ok(Message::Text(t)))) if t.contains("\"refused\"") || t.contains("\"closed\"") => {
                    bail!("the gateway said {t}")
                }
                (_, Some(Ok(_))) => {}
                (_, Some(Err(e))) => bail!("the terminal broke: {e}"),
                (_, None) => bail!("the terminal closed"),
            }
        }
    }

    fn is_direct(&self) -> bool {
        matches!(self, Self::Direct(_))
    }

    /// Read until `marker` has been seen; the bytes read.
    async fn until(&mut self, marker: &[u8]) -> anyhow::Result<usize> {
        let mut seen = Vec::new();
        let mut total = 0;
        loop {
            let chunk = tokio::time::timeout(TIMEOUT, self.output()).await.context("no output")??;
            total += chunk.len();
            seen.extend_from_slice(&chunk);
            if seen.windows(marker.len()).any(|w| w == marker) {
                return Ok(total);
            }
            let keep = seen.len().saturating_sub(marker.len());
            seen.drain(..keep);
        }
    }
}

struct Bench {
    client: Client,
    pod: String,
    gateway: ManagedProcess,
    addr: String,
    tls: Arc<rustls::ClientConfig>,
    token: String,
}

impl Bench {
    async fn direct(&self) -> anyhow::Result<Terminal> {
        let params = AttachParams::interactive_tty().container("shell");
        let request = kube::core::Request::new(Pod::url_path(&(), Some(NS))).exec(&self.pod, ["sh"], &params)?;
        Ok(Terminal::Direct(Box::new(self.client.connect(request).await?.into_stream())))
    }

    async fn through_gateway(&self) -> anyhow::Result<Terminal> {
        let tcp = tokio::net::TcpStream::connect(&self.addr).await?;
        let _ = tcp.set_nodelay(true);
        let name = rustls_pki_types::ServerName::try_from("localhost")?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp).await?;
        let mut request =
            format!("wss://{}/api/terminal/{NS}/{SHELL}?cols=200&rows=50", self.addr).into_client_request()?;
        request.headers_mut().insert("authorization", format!("Bearer {}", self.token).parse()?);
        let (ws, _) = tokio_tungstenite::client_async(request, tls).await?;
        Ok(Terminal::Gateway(Box::new(ws)))
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.gateway.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:")?.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

/// Wait for the shell's prompt, so that timing starts on a quiet terminal.
async fn ready(terminal: &mut Terminal) -> anyhow::Result<()> {
    terminal.send(b"echo READY-$((40+2))\r").await?;
    terminal.until(b"READY-42").await.map(drop)
}

/// Keystroke-to-echo times: a key, then its erasure, each waited for.
async fn echoes(terminal: &mut Terminal, keystrokes: usize) -> anyhow::Result<Vec<Duration>> {
    ready(terminal).await?;
    let mut times = Vec::with_capacity(keystrokes);
    for i in 0..keystrokes {
        let key: &[u8] = if i % 2 == 0 { b"x" } else { b"\x7f" };
        let sent = Instant::now();
        terminal.send(key).await?;
        tokio::time::timeout(TIMEOUT, terminal.output()).await.context("no echo")??;
        times.push(sent.elapsed());
    }
    Ok(times)
}

/// Bytes per second of `bytes` printed by the shell.
async fn throughput(terminal: &mut Terminal, bytes: usize) -> anyhow::Result<f64> {
    ready(terminal).await?;
    let command = format!("yes | head -c {bytes}; echo; echo DONE-$((40+2))\r");
    let started = Instant::now();
    terminal.send(command.as_bytes()).await?;
    let got = terminal.until(b"DONE-42").await?;
    Ok(got as f64 / started.elapsed().as_secs_f64())
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times.get(((times.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default()
}

async fn measure(options: Options, web: PathBuf) -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = Cluster::start(ClusterOptions::default()).await?;
    println!("cluster with a node ready: {:.1?}", started.elapsed());
    let bench = setup(&cluster, web).await?;

    let mut direct = bench.direct().await?;
    let mut gateway = bench.through_gateway().await?;
    // Warm both paths (connections, the shell's first prompt), then alternate the measured runs.
    echoes(&mut direct, 50).await?;
    echoes(&mut gateway, 50).await?;
    let mut floor = echoes(&mut direct, options.keystrokes).await?;
    let mut through = echoes(&mut gateway, options.keystrokes).await?;
    let (f50, f99) = (percentile(&mut floor, 0.5), percentile(&mut floor, 0.99));
    let (g50, g99) = (percentile(&mut through, 0.5), percentile(&mut through, 0.99));
    println!("keystroke to echo, {} keys each:", options.keystrokes);
    println!("  direct exec (floor): p50 {f50:.2?}  p99 {f99:.2?}");
    println!("  through the gateway: p50 {g50:.2?}  p99 {g99:.2?}");
    println!(
        "  added by the gateway: p50 {:.2?}  p99 {:.2?}  (target: p99 <= 2ms)",
        g50.saturating_sub(f50),
        g99.saturating_sub(f99)
    );

    let floor_rate = throughput(&mut direct, options.bytes).await?;
    let gateway_rate = throughput(&mut gateway, options.bytes).await?;
    println!("throughput of `yes | head -c {}`:", options.bytes);
    println!("  direct exec (floor): {:.1} MB/s", floor_rate / 1e6);
    println!("  through the gateway: {:.1} MB/s", gateway_rate / 1e6);
    println!("  ratio: {:.2}  (target: >= 0.8)", gateway_rate / floor_rate);
    drop((direct, gateway));
    sessions(&bench, options.sessions).await?;
    drop(bench);
    drop(cluster);
    Ok(())
}

/// Hold `n` idle terminals open, each having echoed one key.
async fn sessions(bench: &Bench, n: usize) -> anyhow::Result<()> {
    let before = bench.rss_kib();
    let started = Instant::now();
    let opened: Vec<anyhow::Result<Terminal>> = futures::stream::iter(0..n)
        .map(|_| async {
            let mut terminal = bench.through_gateway().await?;
            terminal.send(b"x").await?;
            tokio::time::timeout(TIMEOUT, terminal.output()).await.context("no echo")??;
            Ok(terminal)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let failed: Vec<String> = opened.iter().filter_map(|r| r.as_ref().err().map(|e| format!("{e:#}"))).collect();
    let open = n - failed.len();
    let after = bench.rss_kib();
    println!("{n} terminals opened in {:.1?}: {open} echoed a key, {} failed", started.elapsed(), failed.len());
    if let Some(first) = failed.first() {
        println!("  the first failure: {first}");
    }
    let per = (after.saturating_sub(before)) as f64 / open.max(1) as f64;
    println!(
        "gateway RSS: {before} KiB with none, {after} KiB with {open} idle: {per:.1} KiB per terminal (target: <= 100 KiB beyond its scrollback)"
    );
    drop(opened);
    Ok(())
}

/// The namespace, the shell's CRD, a running shell pod, a user allowed to exec, the gateway.
async fn setup(cluster: &Cluster, web: PathBuf) -> anyhow::Result<Bench> {
    let cp = cluster.control_plane();
    let kubectl = cp.kubectl();
    let crd = myownshell_envtest::assets::workspace_root().join("config/crd/bases");
    for args in [
        vec!["apply".to_owned(), "-f".into(), crd.display().to_string()],
        vec!["create".into(), "namespace".into(), NS.into()],
        vec!["create".into(), "serviceaccount".into(), "user".into(), "-n".into(), NS.into()],
        vec![
            "create".into(),
            "clusterrolebinding".into(),
            "bench-user".into(),
            "--clusterrole=cluster-admin".into(),
            format!("--serviceaccount={NS}:user"),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl.run(&args).await.map_err(anyhow::Error::msg)?.ok().map_err(anyhow::Error::msg)?;
    }
    kubectl.run(&["wait", "--for=condition=Established", "crd", names::CRD_NAME]).await.map_err(anyhow::Error::msg)?;
    let client = cp.client()?;
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), NS);
    let shell: MyOwnShell = serde_json::from_value(
        json!({"apiVersion": names::API_VERSION, "kind": names::KIND, "metadata": {"name": SHELL}, "spec": {"size": 1}}),
    )?;
    shells.create(&PostParams::default(), &shell).await?;
    let selector = format!("{}={SHELL}", names::LABEL_INSTANCE);
    shells
        .patch_status(SHELL, &PatchParams::default(), &Patch::Merge(json!({"status": {"selector": selector}})))
        .await?;
    let pod = running_pod(&client).await?;
    let token = myownshell_envtest::service_account_token(&client, NS, "user", &[], 3600).await?;
    let (gateway, addr, tls) = start_gateway(cp, web).await?;
    Ok(Bench { client, pod, gateway, addr, tls, token })
}

async fn running_pod(client: &Client) -> anyhow::Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let name = format!("{SHELL}-5d8c7b9f4-bench");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {names::LABEL_INSTANCE: SHELL}},
        "spec": {"containers": [{"name": "shell", "image": myownshell_api::defaults::IMAGE, "command": ["sleep", "86400"]}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let started = Instant::now();
    loop {
        let pod = pods.get(&name).await?;
        let ready = pod
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if ready {
            return Ok(name);
        }
        if started.elapsed() > TIMEOUT {
            bail!("pod {name} not ready in {TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn start_gateway(
    cp: &myownshell_envtest::ControlPlane,
    web: PathBuf,
) -> anyhow::Result<(ManagedProcess, String, Arc<rustls::ClientConfig>)> {
    let tls = loopback("bench-gateway").map_err(anyhow::Error::msg)?;
    let dir = cp.layout().dir.join("bench-gateway");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("tls.crt"), &tls.leaf.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &tls.leaf.key_pem)?;
    let port = myownshell_envtest::ports::free_port()?;
    let probe = myownshell_envtest::ports::free_port()?;
    let binary = myownshell_envtest::assets::target_dir().join("release/myownshell-gateway");
    let spec = ProcessSpec::new("gateway", binary, dir.join("gateway.log")).args([
        format!("--bind-address=127.0.0.1:{port}"),
        format!("--health-probe-bind-address=127.0.0.1:{probe}"),
        format!("--tls-cert-file={}", dir.join("tls.crt").display()),
        format!("--tls-private-key-file={}", dir.join("tls.key").display()),
        format!("--assets-dir={}", web.display()),
        format!("--kubeconfig={}", cp.kubeconfig_path().display()),
        "--max-terminals=100000".into(),
        "--max-terminals-per-user=100000".into(),
        "--log-format=json".into(),
    ]);
    let process = ManagedProcess::spawn(spec)?;
    let probe = std::net::SocketAddr::from(([127, 0, 0, 1], probe));
    wait_ready(&process, probe, TIMEOUT).await?;
    Ok((process, format!("127.0.0.1:{port}"), tls.client))
}

/// Until the gateway `process` answers 200 on its `/readyz` at `probe`, within `within` (its log's
/// tail on timeout).
pub(crate) async fn wait_ready(
    process: &ManagedProcess,
    probe: std::net::SocketAddr,
    within: Duration,
) -> anyhow::Result<()> {
    myownshell_envtest::eventually("the gateway ready", within, || async {
        match myownshell_envtest::http::plain_get(probe, "/readyz").await {
            Ok((200, _)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", process.log_tail(20)))
}
