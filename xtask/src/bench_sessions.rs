//! `cargo xtask bench sessions`: on the real node (root), issue 39's targets for terminals held
//! by the session holder (`myownshell-session` as the shell container's pid 1), each against a
//! floor measured in the same run. Every terminal is a page's WebSocket through the gateway
//! (the release binary, impersonating the bench's user, as in production):
//!
//! - keystroke to echo, p50 and p99, into a pod without the holder (the gateway's plain exec
//!   with a TTY: the floor) and into one with it (`attach --framed`), and what the holder adds;
//! - output: one long line (`head -c N /dev/zero | tr '\0' x`) through each, and their ratio;
//!   a million short lines (`yes | head -c M`) against one line of as many bytes, the time
//!   ratio through each, and through a bare terminal on this machine (util-linux `script`
//!   reading a PTY into /dev/null): what any terminal costs them, the program writing each line
//!   on its own;
//! - the holder's memory: VmRSS of the container's pid 1 with no session, with `--sessions` and
//!   (with one pod) `--terminals` open, each a page with `new=1` that ran a command, per session,
//!   and the proportional set size of the sessions' `sh` and the exec's `attach` clients;
//! - a rollout of the gateway's two replicas with `--terminals` open, half on each, in
//!   `--pods` holder pods: one at a time, a new process is started and ready before the old one
//!   gets SIGTERM; the old one hands its pages over a few at a time (`handover`), and each does
//!   as `gateway/web/app.js` does: opens its session through a live replica while still reading
//!   the old socket, and closes that once attached (a page whose socket ends instead reattaches
//!   after its backoff, `session=ID`, any live replica); pages reattached (the same session, the
//!   same `sh`) and of those moved with no gap, pages that stopped instead (told the terminal
//!   ended, as the page would stop) and of those the sessions lost (not in their pod any more),
//!   the time from `handover` (or the old socket's end) to the new `attached`, and the CPU each
//!   program spent meanwhile.
//!
//! The pods are made directly, as the controller makes them (`controller/src/deployment.rs`'s
//! security, `controller/src/holder.rs`'s init container, volumes and command), so neither the
//! controller nor the webhook is in the path; the holder comes from the session image
//! (`localhost/myownshell-session:local`, the release build, imported into the node).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_api::{MyOwnShell, names};
use myownshell_envtest::node::images::SESSION_IMAGE;
use myownshell_envtest::node::{Cluster, ClusterOptions};
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::tls::loopback;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const NS: &str = "bench-sessions";
/// A shell whose pod has no holder: the gateway gives it a plain exec with a TTY.
const PLAIN: &str = "plain";
/// A shell whose pod has the holder, for keystrokes and output.
const HELD: &str = "held";
/// The shells (`many-0`, `many-1`, ...) whose pods' holders keep the terminals of the memory and
/// rollout phases.
const MANY: &str = "many";
const TIMEOUT: Duration = Duration::from_secs(120);
/// How long a page keeps trying to reattach (`REATTACH_FOR_MS` in gateway/web/app.js).
const REATTACH_FOR: Duration = Duration::from_secs(120);
/// The holder's largest `--max-sessions` (session/src/args.rs).
pub const MAX_SESSIONS: usize = 1024;
/// Sessions the bench's holder pods keep room for beyond the terminals it opens.
const SPARE_SESSIONS: usize = 8;
/// Pages opened at once while filling the holder.
const OPENING: usize = 16;

/// What the bench is asked for.
pub struct Options {
    /// Keystrokes timed per path.
    pub keystrokes: usize,
    /// Bytes of the long line.
    pub long_bytes: usize,
    /// Bytes of short lines (`yes`: two a line), against one line of as many.
    pub short_bytes: usize,
    /// Rounds of the output measurements (the median is printed).
    pub rounds: usize,
    /// Sessions in one holder for its memory per session.
    pub sessions: usize,
    /// Terminals open across the gateway's two replicas when they are rolled out.
    pub terminals: usize,
    /// Holder pods the terminals are in: the first holds `sessions` (all of them, with one pod,
    /// its memory measured again at that many), the others share the rest.
    pub pods: usize,
}

pub fn run(options: Options) -> anyhow::Result<()> {
    if options.sessions == 0 || options.terminals < options.sessions {
        bail!(
            "--terminals ({}) must be at least --sessions ({}), which must be at least 1",
            options.terminals,
            options.sessions
        );
    }
    if options.pods == 0 || (options.pods > 1 && options.terminals == options.sessions) {
        bail!("--pods: at least 1, and more only with --terminals beyond --sessions for them to hold");
    }
    if options.terminals + SPARE_SESSIONS > MAX_SESSIONS {
        bail!("--terminals: at most {} (one holder keeps at most {MAX_SESSIONS})", MAX_SESSIONS - SPARE_SESSIONS);
    }
    crate::envtest::ensure()?;
    crate::node::ensure()?;
    let web = crate::web::ensure()?;
    let status = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "-p", "myownshell-gateway"])
        .status()?;
    if !status.success() {
        bail!("cargo build --release -p myownshell-gateway failed ({status})");
    }
    // The holder measured is the one shipped: the release build, static.
    let image = crate::session::image(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(measure(options, web, image))
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// How the bench reaches a gateway: its certificate's trust and the user's token.
#[derive(Clone)]
struct Door {
    tls: Arc<rustls::ClientConfig>,
    token: Arc<str>,
}

/// A page's terminal socket.
struct Page {
    ws: Box<Socket>,
}

/// What a page's socket brought.
enum Heard {
    /// Output (binary).
    Output(Vec<u8>),
    /// A JSON message (text).
    Told(Value),
    /// The socket ended (a Close, or the connection's end).
    Gone,
}

/// Messages that end a page's terminal (gateway/web/app.js ends on them, never reattaching).
fn is_ending(told: &Value) -> bool {
    matches!(told["type"].as_str(), Some("refused" | "closed" | "exit" | "replaced" | "detached"))
}

impl Page {
    /// Open `shell`'s terminal through the gateway at `addr` with `query`: the page and its
    /// `attached` message. `Ok(Err(words))` when the gateway answered with an ending instead
    /// (the page would stop there); `Err` when it could not be reached.
    async fn open(door: &Door, addr: &str, shell: &str, query: &str) -> anyhow::Result<Result<(Page, Value), String>> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let _ = tcp.set_nodelay(true);
        let name = rustls_pki_types::ServerName::try_from("localhost")?;
        let tls = tokio_rustls::TlsConnector::from(door.tls.clone()).connect(name, tcp).await?;
        let url = format!("wss://{addr}/api/terminal/{NS}/{shell}?cols=200&rows=50&{query}");
        let mut request = url.into_client_request()?;
        request.headers_mut().insert("authorization", format!("Bearer {}", door.token).parse()?);
        let (ws, _) = tokio_tungstenite::client_async(request, tls).await?;
        let mut page = Page { ws: Box::new(ws) };
        loop {
            match tokio::time::timeout(TIMEOUT, page.next()).await.context("no `attached` from the gateway")?? {
                Heard::Told(told) if told["type"] == "attached" => return Ok(Ok((page, told))),
                Heard::Told(told) if is_ending(&told) => return Ok(Err(told.to_string())),
                // Not opened this time: the page tries again.
                Heard::Told(told) if told["type"] == "unavailable" => bail!("the gateway said {told}"),
                // Notices (a pod without the holder says so first), the replay.
                Heard::Told(_) | Heard::Output(_) => {}
                Heard::Gone => bail!("the socket ended before `attached`"),
            }
        }
    }

    /// Open, the gateway's ending an error.
    async fn attach(door: &Door, addr: &str, shell: &str, query: &str) -> anyhow::Result<(Page, Value)> {
        Page::open(door, addr, shell, query).await?.map_err(|told| anyhow::anyhow!("the gateway said {told}"))
    }

    async fn send(&mut self, keys: &[u8]) -> anyhow::Result<()> {
        self.ws.send(Message::binary(keys.to_vec())).await?;
        Ok(())
    }

    /// The next thing the socket brings (pings are answered as it reads).
    async fn next(&mut self) -> anyhow::Result<Heard> {
        loop {
            return Ok(match self.ws.next().await {
                Some(Ok(Message::Binary(bytes))) => Heard::Output(bytes.to_vec()),
                Some(Ok(Message::Text(text))) => Heard::Told(serde_json::from_str(text.as_str())?),
                Some(Ok(Message::Close(_))) | None => Heard::Gone,
                Some(Ok(_)) => continue,
                Some(Err(e)) => bail!("the socket broke: {e}"),
            });
        }
    }

    /// The next output, JSON messages that do not end the terminal skipped.
    async fn output(&mut self) -> anyhow::Result<Vec<u8>> {
        loop {
            match tokio::time::timeout(TIMEOUT, self.next()).await.context("no output")?? {
                Heard::Output(bytes) => return Ok(bytes),
                Heard::Told(told) if is_ending(&told) => bail!("the gateway said {told}"),
                Heard::Told(_) => {}
                Heard::Gone => bail!("the terminal closed"),
            }
        }
    }

    /// Read until `marker` has been seen; the bytes read, and in how many messages.
    async fn until(&mut self, marker: &[u8]) -> anyhow::Result<(usize, usize)> {
        let mut seen = Vec::new();
        let (mut total, mut messages) = (0, 0);
        loop {
            let chunk = self.output().await?;
            total += chunk.len();
            messages += 1;
            seen.extend_from_slice(&chunk);
            if seen.windows(marker.len()).any(|w| w == marker) {
                return Ok((total, messages));
            }
            let keep = seen.len().saturating_sub(marker.len());
            seen.drain(..keep);
        }
    }

    /// The pid of the terminal's `sh`, asked with a line only the `n`th question prints (so a
    /// replay of an earlier answer is not taken for it).
    async fn shell_pid(&mut self, n: usize) -> anyhow::Result<String> {
        self.send(format!("echo K{n}-$$-E\r").as_bytes()).await?;
        let marker = format!("K{n}-");
        let mut seen = Vec::new();
        loop {
            seen.extend(self.output().await?);
            if let Some(pid) = answer(&String::from_utf8_lossy(&seen), &marker) {
                return Ok(pid);
            }
        }
    }
}

/// The digits between `marker` and `-E` in `text` (the typed line's echo, `$$`, is no answer).
fn answer(text: &str, marker: &str) -> Option<String> {
    text.match_indices(marker).find_map(|(at, _)| {
        let rest = &text[at + marker.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        (!digits.is_empty() && rest[digits.len()..].starts_with("-E")).then_some(digits)
    })
}

/// Wait for the shell's prompt, so that timing starts on a quiet terminal.
async fn ready(page: &mut Page) -> anyhow::Result<()> {
    page.send(b"echo READY-$((40+2))\r").await?;
    page.until(b"READY-42").await.map(drop)
}

/// The `i`th key of a run: a key, then its erasure.
fn key(i: usize) -> &'static [u8] {
    if i.is_multiple_of(2) { b"x" } else { b"\x7f" }
}

/// Whether `seen` ends with the whole echo of `key`: the character, or a backspace's erasure in
/// any of the forms a shell's line editing writes (`\b \b`, or the cursor moved back and the
/// line cleared).
fn echoed(key: &[u8], seen: &[u8]) -> bool {
    if key != b"\x7f" {
        return seen.ends_with(key);
    }
    [&b"\x08"[..], b"\x1b[K", b"\x1b[0K", b"\x1b[J", b"\x1b[D"].iter().any(|end| seen.ends_with(end))
}

/// The time from sending `key` to its whole echo. Output is read until it ends with the echo,
/// not just to the next message: an echo split over two messages left the second to be taken
/// for the next key's, which then took no time at all (a floor of p50 0.073 ms was seen so).
/// More than a line's worth of output is taken as the echo, whatever it ends with.
async fn echo(page: &mut Page, key: &[u8]) -> anyhow::Result<Duration> {
    let sent = Instant::now();
    page.send(key).await?;
    let mut seen = Vec::new();
    while !echoed(key, &seen) && seen.len() < 256 {
        seen.extend(page.output().await?);
    }
    Ok(sent.elapsed())
}

/// What printing a command took: the time until the page saw its end, the bytes and the
/// messages it got.
type Printed = (Duration, usize, usize);

/// Print `command` through `page`, as the page sees it.
async fn printing(page: &mut Page, command: &str) -> anyhow::Result<Printed> {
    ready(page).await?;
    let line = format!("{command}; echo; echo DONE-$((40+2))\r");
    let started = Instant::now();
    page.send(line.as_bytes()).await?;
    let (bytes, messages) = page.until(b"DONE-42").await?;
    Ok((started.elapsed(), bytes, messages))
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times.get(((times.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default()
}

fn median(mut times: Vec<Printed>) -> Printed {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A gateway process and where it serves.
struct Gateway {
    process: ManagedProcess,
    addr: String,
}

/// Starts gateways alike: the same certificate, flags and credentials, on ports of their own.
struct Gateways {
    dir: PathBuf,
    web: PathBuf,
    kubeconfig: PathBuf,
    started: usize,
}

impl Gateways {
    /// A new gateway process, ready.
    async fn start(&mut self) -> anyhow::Result<Gateway> {
        let name = format!("gateway-{}", self.started);
        self.started += 1;
        let port = myownshell_envtest::ports::free_port()?;
        let probe = myownshell_envtest::ports::free_port()?;
        let binary = myownshell_envtest::assets::target_dir().join("release/myownshell-gateway");
        let spec = ProcessSpec::new(name.clone(), binary, self.dir.join(format!("{name}.log"))).args([
            format!("--bind-address=127.0.0.1:{port}"),
            format!("--health-probe-bind-address=127.0.0.1:{probe}"),
            format!("--tls-cert-file={}", self.dir.join("tls.crt").display()),
            format!("--tls-private-key-file={}", self.dir.join("tls.key").display()),
            format!("--assets-dir={}", self.web.display()),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--max-terminals=100000".into(),
            "--max-terminals-per-user=100000".into(),
            "--log-format=json".into(),
        ]);
        let process = ManagedProcess::spawn(spec)?;
        let probe = std::net::SocketAddr::from(([127, 0, 0, 1], probe));
        myownshell_envtest::eventually(&format!("{name} ready"), TIMEOUT, || async {
            match myownshell_envtest::http::plain_get(probe, "/readyz").await {
                Ok((200, _)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", process.log_tail(20)))?;
        Ok(Gateway { process, addr: format!("127.0.0.1:{port}") })
    }
}

/// The cluster's pieces the measurements use.
struct Bench {
    kubectl: myownshell_envtest::Kubectl,
    door: Door,
    gateways: Gateways,
}

async fn measure(options: Options, web: PathBuf, image: PathBuf) -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = Cluster::start(ClusterOptions::default()).await?;
    cluster.import_image(&image).map_err(anyhow::Error::msg)?;
    println!("cluster with a node ready, the session image imported: {:.1?}", started.elapsed());
    let (mut bench, pods) = setup(&cluster, web, &options).await?;
    let first = bench.gateways.start().await?;
    let second = bench.gateways.start().await?;

    let mut plain = Page::attach(&bench.door, &first.addr, PLAIN, "").await?;
    let mut held = Page::attach(&bench.door, &first.addr, HELD, "new=1").await?;
    keystrokes(&mut plain.0, &mut held.0, options.keystrokes).await?;
    output(&mut plain.0, &mut held.0, &options).await?;
    drop((plain, held));

    let pod = pods.get(&format!("{MANY}-0")).context("the first holder pod")?;
    rollout(&mut bench, [first, second], pod, &options).await?;
    drop(bench);
    drop(cluster);
    Ok(())
}

/// Keystroke to echo through each path.
async fn keystrokes(plain: &mut Page, held: &mut Page, keystrokes: usize) -> anyhow::Result<()> {
    ready(plain).await?;
    ready(held).await?;
    // Warm both paths (connections, the shell's line editing), then one key each in turn, so
    // that both see the same machine.
    for i in 0..50 {
        echo(plain, key(i)).await?;
        echo(held, key(i)).await?;
    }
    let (mut floor, mut through) = (Vec::new(), Vec::new());
    for i in 0..keystrokes {
        floor.push(echo(plain, key(i)).await?);
        through.push(echo(held, key(i)).await?);
    }
    let (f50, f99) = (percentile(&mut floor, 0.5), percentile(&mut floor, 0.99));
    let (h50, h99) = (percentile(&mut through, 0.5), percentile(&mut through, 0.99));
    println!("keystroke to echo through the gateway, {} keys each:", floor.len());
    println!("  plain exec with a TTY (floor): p50 {:.3} ms  p99 {:.3} ms", ms(f50), ms(f99));
    println!("  held by the holder:            p50 {:.3} ms  p99 {:.3} ms", ms(h50), ms(h99));
    println!(
        "  added by the holder: p50 {:+.3} ms  p99 {:+.3} ms  (target: p99 <= 0.2 ms added)",
        ms(h50) - ms(f50),
        ms(h99) - ms(f99)
    );
    Ok(())
}

/// Output through each path: the long line, the short lines, and one line as long as those;
/// and the short lines and that line into a bare terminal on this machine.
async fn output(plain: &mut Page, held: &mut Page, options: &Options) -> anyhow::Result<()> {
    let long = format!("head -c {} /dev/zero | tr '\\0' x", options.long_bytes);
    let short = format!("yes | head -c {}", options.short_bytes);
    let same = format!("head -c {} /dev/zero | tr '\\0' x", options.short_bytes);
    let mut runs: HashMap<(&str, &str), Vec<Printed>> = HashMap::new();
    for _ in 0..options.rounds.max(1) {
        for (path, page) in [("plain", &mut *plain), ("held", &mut *held)] {
            for (what, command) in [("long", &long), ("short", &short), ("same", &same)] {
                runs.entry((path, what)).or_default().push(printing(page, command).await?);
            }
        }
        let bytes = options.short_bytes;
        for (what, command) in [("short", short.clone()), ("same", same.clone())] {
            let took = tokio::task::spawn_blocking(move || bare_terminal(&command)).await??;
            runs.entry(("bare", what)).or_default().push((took, bytes, 0));
        }
    }
    let mut get = |path, what| median(runs.remove(&(path, what)).unwrap_or_default());
    let (plain_long, held_long) = (get("plain", "long"), get("held", "long"));
    let rate = |(took, bytes, _): Printed| bytes as f64 / took.as_secs_f64() / 1e6;
    println!("output through the gateway (median of {} rounds):", options.rounds.max(1));
    println!(
        "  one line of {} bytes: plain {:.1} MB/s, held {:.1} MB/s",
        options.long_bytes,
        rate(plain_long),
        rate(held_long)
    );
    println!("  ratio held/plain: {:.2}  (target: >= 0.9)", rate(held_long) / rate(plain_long));
    println!("  a million short lines against one line of as many bytes ({}):", options.short_bytes);
    let (bare_short, bare_same) = (get("bare", "short"), get("bare", "same"));
    for path in ["plain", "held"] {
        let (short, same) = (get(path, "short"), get(path, "same"));
        println!(
            "    {path:5}: short lines {:.2} s ({} bytes shown in {} messages), one line {:.2} s ({} bytes in {}): time ratio {:.1}x, per byte shown {:.1}x; short lines {:.1}x a bare terminal's{}",
            short.0.as_secs_f64(),
            short.1,
            short.2,
            same.0.as_secs_f64(),
            same.1,
            same.2,
            short.0.as_secs_f64() / same.0.as_secs_f64(),
            (short.0.as_secs_f64() / short.1 as f64) / (same.0.as_secs_f64() / same.1 as f64),
            short.0.as_secs_f64() / bare_short.0.as_secs_f64(),
            if path == "held" { "  (target: time ratio <= 2x)" } else { "" },
        );
    }
    println!(
        "    a bare terminal (this machine, util-linux `script` reading a PTY into /dev/null): short lines {:.2} s, one line {:.3} s: time ratio {:.1}x (the program writes each line on its own: stdio flushes a terminal at every newline)",
        bare_short.0.as_secs_f64(),
        bare_same.0.as_secs_f64(),
        bare_short.0.as_secs_f64() / bare_same.0.as_secs_f64(),
    );
    Ok(())
}

/// The time `command` takes to print into a bare terminal: util-linux `script` runs it (with
/// busybox's applets, as in the shell image) on a PTY whose output it copies to /dev/null.
fn bare_terminal(command: &str) -> anyhow::Result<Duration> {
    let command = command.replace("yes", "busybox yes").replace("head", "busybox head").replace("tr ", "busybox tr ");
    let started = Instant::now();
    let status = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .context("running util-linux script")?;
    if !status.success() {
        bail!("script -c {command:?}: {status}");
    }
    Ok(started.elapsed())
}

/// The namespace, the shell's CRD, a user allowed to exec, the three shells and their pods, the
/// gateways' certificate; the pod of each shell.
async fn setup(cluster: &Cluster, web: PathBuf, options: &Options) -> anyhow::Result<(Bench, HashMap<String, String>)> {
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
            "bench-sessions-user".into(),
            "--clusterrole=cluster-admin".into(),
            format!("--serviceaccount={NS}:user"),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl.run(&args).await.map_err(anyhow::Error::msg)?.ok().map_err(anyhow::Error::msg)?;
    }
    kubectl.run(&["wait", "--for=condition=Established", "crd", names::CRD_NAME]).await.map_err(anyhow::Error::msg)?;
    let client = cp.client()?;
    let mut pods = HashMap::new();
    let mut shells = vec![(PLAIN.to_owned(), None), (HELD.to_owned(), Some(SPARE_SESSIONS))];
    let holding = options.terminals + SPARE_SESSIONS;
    shells.extend((0..options.pods).map(|pod| (format!("{MANY}-{pod}"), Some(holding))));
    for (shell, holder) in shells {
        let pod = shell_with_pod(&client, &shell, holder).await?;
        pods.insert(shell, pod);
    }
    for pod in pods.values() {
        running(&client, pod).await?;
    }
    let token = myownshell_envtest::service_account_token(&client, NS, "user", &[], 3600).await?;
    let tls = loopback("bench-sessions").map_err(anyhow::Error::msg)?;
    let dir = cp.layout().dir.join("bench-sessions");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("tls.crt"), &tls.leaf.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &tls.leaf.key_pem)?;
    let door = Door { tls: tls.client, token: token.into() };
    let gateways = Gateways { dir, web, kubeconfig: cp.kubeconfig_path(), started: 0 };
    Ok((Bench { kubectl, door, gateways }, pods))
}

/// A shell (its status's selector set, as the controller would) and its one pod, with the
/// holder keeping up to `holder` sessions, or without it; the pod's name.
async fn shell_with_pod(client: &Client, shell: &str, holder: Option<usize>) -> anyhow::Result<String> {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), NS);
    let object: MyOwnShell = serde_json::from_value(
        json!({"apiVersion": names::API_VERSION, "kind": names::KIND, "metadata": {"name": shell}, "spec": {"size": 1}}),
    )?;
    shells.create(&PostParams::default(), &object).await?;
    let selector = format!("{}={shell}", names::LABEL_INSTANCE);
    shells
        .patch_status(shell, &PatchParams::default(), &Patch::Merge(json!({"status": {"selector": selector}})))
        .await?;
    let name = format!("{shell}-5d8c7b9f4-bench");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &serde_json::from_value(pod(&name, shell, holder))?).await?;
    Ok(name)
}

/// A shell's pod as the controller makes it: non-root, read-only root, no capabilities; with
/// the holder as `controller/src/holder.rs` adds it (an init container copying the binary from
/// the session image into an emptyDir, the command wrapped in `serve`, `/run` an emptyDir).
fn pod(name: &str, shell: &str, holder: Option<usize>) -> Value {
    let security = json!({
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true,
        "runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"},
    });
    let sleep = json!(["sleep", "86400"]);
    let mut spec = json!({
        "containers": [{
            "name": "shell", "image": myownshell_api::defaults::IMAGE, "command": sleep,
            "env": [{"name": "HOME", "value": "/tmp"}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}], "securityContext": security,
        }],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "automountServiceAccountToken": false, "enableServiceLinks": false, "terminationGracePeriodSeconds": 5,
    });
    if let Some(max) = holder {
        let binary = myownshell_session_binary();
        spec["containers"][0]["command"] =
            json!([binary, "serve", format!("--max-sessions={max}"), "--", "sleep", "86400"]);
        for (volume, path, read_only) in
            [("myownshell-session", "/opt/myownshell", true), ("myownshell-run", "/run", false)]
        {
            if let Some(mounts) = spec["containers"][0]["volumeMounts"].as_array_mut() {
                mounts.push(json!({"name": volume, "mountPath": path, "readOnly": read_only}));
            }
            if let Some(volumes) = spec["volumes"].as_array_mut() {
                volumes.push(json!({"name": volume, "emptyDir": {}}));
            }
        }
        spec["initContainers"] = json!([{
            "name": "install-session", "image": SESSION_IMAGE,
            "command": ["/myownshell-session", "install", binary],
            "volumeMounts": [{"name": "myownshell-session", "mountPath": "/opt/myownshell"}],
            "securityContext": security,
        }]);
    }
    json!({"metadata": {"name": name, "labels": {names::LABEL_INSTANCE: shell}}, "spec": spec})
}

/// Where the holder's binary is in a shell's container (`myownshell_session::BINARY`; xtask
/// does not depend on the session crate).
fn myownshell_session_binary() -> &'static str {
    "/opt/myownshell/myownshell-session"
}

/// Wait for `name` to be ready.
async fn running(client: &Client, name: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    myownshell_envtest::eventually(&format!("pod {name} ready"), TIMEOUT, || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        let status = pod.status.unwrap_or_default();
        let ready = status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
        if ready { Ok(()) } else { Err(format!("{:?}", status.container_statuses)) }
    })
    .await
    .map_err(anyhow::Error::msg)
}

/// One terminal of the memory and rollout phases, as the bench sees it.
struct Terminal {
    /// The gateway replica its page is on.
    replica: usize,
    /// Whether its page stopped.
    stopped: bool,
}

/// What a terminal's task tells the bench.
enum Event {
    /// Its page reattached after its socket ended.
    Reattached {
        client: usize,
        from: usize,
        to: usize,
        /// From `handover` (a move) or the old socket's end (a drop) to the new `attached`.
        took: Duration,
        /// Whether the page moved before its old socket ended: no gap in its output.
        moved: bool,
        /// From the reattaching connection's start to `attached` (the page's backoff apart).
        opening: Duration,
    },
    /// Its page stopped, as gateway/web/app.js does when told the terminal ended or refused, or
    /// after [`REATTACH_FOR`]: why, and the session it held (which may still be in its pod).
    Stopped { client: usize, why: String, held: Held },
}

/// What every terminal's task shares.
struct Shared {
    door: Door,
    /// The replicas a page may reach (ready, not stopping), by number, and their addresses.
    live: Mutex<Vec<(usize, String)>>,
    next: AtomicUsize,
    events: mpsc::UnboundedSender<Event>,
}

impl Shared {
    /// A live replica for a new connection, in turn (as a Service spreads them).
    fn pick(&self) -> Option<(usize, String)> {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let i = self.next.fetch_add(1, Ordering::Relaxed) % live.len().max(1);
        live.get(i).cloned()
    }
}

/// A held terminal's identity: its shell, its session and its `sh`.
struct Held {
    shell: String,
    session: String,
    pid: String,
}

/// The shell of the `terminal`th terminal: the first `--sessions` in the first holder pod (whose
/// memory is measured), the others spread over the other pods (or there too, with one pod).
fn holder_shell(terminal: usize, options: &Options) -> String {
    let pod = match options.pods {
        0 | 1 => 0,
        _ if terminal < options.sessions => 0,
        pods => 1 + (terminal - options.sessions) % (pods - 1),
    };
    format!("{MANY}-{pod}")
}

/// Open the `client`th terminal, in `shell`, through `replica` (a new session that prints its
/// `sh`'s pid), and hand it to a task that keeps it open as a page does.
async fn open_one(
    shared: Arc<Shared>,
    (replica, addr): (usize, String),
    client: usize,
    shell: String,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let (mut page, attached) = Page::attach(&shared.door, &addr, &shell, "new=1").await?;
    let session = attached["session"].as_str().context("`attached` names no session")?.to_owned();
    let pid = page.shell_pid(0).await?;
    Ok(tokio::spawn(keep(shared, client, replica, page, Held { shell, session, pid })))
}

/// Keep a terminal open as the page does: read what comes (so the gateway's pings are
/// answered); when the socket ends without ending the terminal, reattach to the same session.
async fn keep(shared: Arc<Shared>, client: usize, mut replica: usize, mut page: Page, held: Held) {
    for n in 1usize.. {
        let left = loop {
            match page.next().await {
                Ok(Heard::Told(told)) if is_ending(&told) => break Left::Ended(told.to_string()),
                Ok(Heard::Told(told)) if told["type"] == "handover" => break Left::Handover,
                Ok(Heard::Output(_) | Heard::Told(_)) => {}
                Ok(Heard::Gone) | Err(_) => break Left::Dropped,
            }
        };
        let outcome = match left {
            Left::Ended(why) => Err(anyhow::anyhow!("told {why}")),
            Left::Dropped => {
                let ended = Instant::now();
                // The old socket finishes its close on its own, as a browser's does.
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(2), page.ws.next()).await;
                });
                reattach(&shared, &held, ended, n)
                    .await
                    .map(|(next, to, took, opening)| (next, to, took, opening, false))
            }
            Left::Handover => handover(&shared, &held, page, n).await,
        };
        match outcome {
            Ok((next, to, took, opening, moved)) => {
                let _ = shared.events.send(Event::Reattached { client, from: replica, to, took, opening, moved });
                (page, replica) = (next, to);
            }
            Err(why) => {
                let _ = shared.events.send(Event::Stopped { client, why: format!("{why:#}"), held });
                return;
            }
        }
    }
}

/// How a page's socket left it.
enum Left {
    /// Told the terminal ended (the page stops).
    Ended(String),
    /// Told to move (a stopping gateway's `handover`).
    Handover,
    /// The socket ended.
    Dropped,
}

/// Move `held` as gateway/web/app.js does when told `handover`: open its session through a live
/// replica at once while the old socket is still read (its pings answered, as a browser's), and
/// close the old one once attached. A move that fails waits, as the page does, for the old
/// gateway to let go, then reattaches as after a drop. The page, its replica, the time from
/// `handover` (or the drop) to `attached`, that of the connection, and whether it moved.
async fn handover(
    shared: &Shared,
    held: &Held,
    mut old: Page,
    n: usize,
) -> anyhow::Result<(Page, usize, Duration, Duration, bool)> {
    let told = Instant::now();
    let (let_go, letting_go) = tokio::sync::oneshot::channel::<()>();
    // The old socket, read until let go (then closed) or until its gateway ends it: when it ended.
    let reading = tokio::spawn(async move {
        let read = async {
            while let Ok(heard) = old.next().await {
                if matches!(heard, Heard::Gone) {
                    break;
                }
            }
        };
        tokio::select! {
            () = read => Some(Instant::now()),
            _ = letting_go => {
                let _ = SinkExt::close(&mut old.ws).await;
                let _ = tokio::time::timeout(Duration::from_secs(2), old.ws.next()).await;
                None
            }
        }
    });
    let moved = match shared.pick() {
        Some((to, addr)) => {
            match Page::open(&shared.door, &addr, &held.shell, &format!("session={}", held.session)).await {
                Ok(Ok((page, attached))) => Some((page, to, attached)),
                _ => None,
            }
        }
        None => None,
    };
    let Some((mut page, to, attached)) = moved else {
        let ended = reading.await.ok().flatten().unwrap_or_else(Instant::now);
        return reattach(shared, held, ended, n)
            .await
            .map(|(next, to, took, opening)| (next, to, took, opening, false));
    };
    let took = told.elapsed();
    let _ = let_go.send(());
    // Ended by its gateway before the page let it go: output stopped for a moment.
    let gap = reading.await.ok().flatten().is_some();
    same_session(held, &attached, &mut page, n).await?;
    Ok((page, to, took, took, !gap))
}

/// That `page`, just `attached`, is `held`'s session with the same `sh` (asked the `n`th time).
async fn same_session(held: &Held, attached: &Value, page: &mut Page, n: usize) -> anyhow::Result<()> {
    if attached["session"].as_str() != Some(held.session.as_str()) {
        bail!("attached to session {} instead of {}", attached["session"], held.session);
    }
    let pid = page.shell_pid(n).await?;
    if pid != held.pid {
        bail!("session {}: a different sh (pid {pid}, was {})", held.session, held.pid);
    }
    Ok(())
}

/// Reattach `held` as gateway/web/app.js does after its socket ended at `ended`: after its
/// backoff, to any live replica, with `session=ID`, for up to [`REATTACH_FOR`]; a refusal ends
/// it. Checked: the same session, the same `sh`. The page, its replica, the time from `ended` to
/// `attached`, and that of the connection that attached.
async fn reattach(
    shared: &Shared,
    held: &Held,
    ended: Instant,
    n: usize,
) -> anyhow::Result<(Page, usize, Duration, Duration)> {
    let mut last = String::from("no attempt");
    let mut retry = 0u64;
    loop {
        // The page's own backoff (500 ms times the retry, at most 5): its timing, not a wait
        // for some state.
        retry = (retry + 1).min(5);
        tokio::time::sleep(Duration::from_millis(500 * retry)).await;
        if ended.elapsed() > REATTACH_FOR {
            bail!("not reattached in {REATTACH_FOR:?}: {last}");
        }
        let Some((to, addr)) = shared.pick() else {
            last = "no live replica".into();
            continue;
        };
        let started = Instant::now();
        match Page::open(&shared.door, &addr, &held.shell, &format!("session={}", held.session)).await {
            Ok(Ok((mut page, attached))) => {
                let (took, opening) = (ended.elapsed(), started.elapsed());
                same_session(held, &attached, &mut page, n).await?;
                return Ok((page, to, took, opening));
            }
            Ok(Err(told)) => bail!("the gateway said {told}"),
            Err(e) => last = format!("{e:#}"),
        }
    }
}

/// Whether the session of a page that stopped is still in its pod with the same `sh`: opened
/// again by its id, as its user would.
async fn still_there(shared: &Shared, held: &Held) -> Result<(), String> {
    let (_, addr) = shared.pick().ok_or("no live replica")?;
    let query = format!("session={}", held.session);
    match Page::open(&shared.door, &addr, &held.shell, &query).await {
        // A question no earlier one asked, so the replay holds no answer to it.
        Ok(Ok((mut page, _))) => match page.shell_pid(1_000_000).await {
            Ok(pid) if pid == held.pid => Ok(()),
            Ok(pid) => Err(format!("a different sh (pid {pid}, was {})", held.pid)),
            Err(e) => Err(format!("{e:#}")),
        },
        Ok(Err(told)) => Err(told),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Memory in the holder's container, KiB: the holder's own (VmRSS of pid 1) and every
/// process's proportional set size (shared pages split between their sharers), by kind.
#[derive(Default)]
struct Memory {
    holder: u64,
    /// The sessions' shells: how many, and their PSS in all.
    shells: (usize, u64),
    /// The `attach --framed` clients of the gateways' execs.
    clients: (usize, u64),
    /// The holder's PSS and the rest (the container's command, this measurement's own).
    others: u64,
}

impl Memory {
    fn line(&self) -> String {
        let mib = |kib: u64| kib as f64 / 1024.0;
        let per = |(n, kib): (usize, u64)| kib as f64 / n.max(1) as f64;
        format!(
            "the container's processes (PSS): {} sh {:.1} MiB ({:.0} KiB each), {} attach clients {:.1} MiB ({:.0} KiB each), the holder and the rest {:.1} MiB",
            self.shells.0,
            mib(self.shells.1),
            per(self.shells),
            self.clients.0,
            mib(self.clients.1),
            per(self.clients),
            mib(self.others)
        )
    }
}

/// The memory of `pod`'s holder and of every process in its container.
async fn memory(kubectl: &myownshell_envtest::Kubectl, pod: &str) -> anyhow::Result<Memory> {
    let script = "grep VmRSS /proc/1/status; for d in /proc/[0-9]*; do p=$(grep '^Pss:' $d/smaps_rollup 2>/dev/null) || continue; read c < $d/comm; echo \"${d#/proc/} $c ${p#Pss:}\"; done";
    let out = kubectl.run(&["exec", "-n", NS, pod, "-c", "shell", "--", "sh", "-c", script]).await;
    let out = out.map_err(anyhow::Error::msg)?.ok().map_err(anyhow::Error::msg)?;
    let kib = |text: &str| text.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0);
    let mut memory = Memory::default();
    let mut holder = None;
    for line in out.lines() {
        if let Some(value) = line.strip_prefix("VmRSS:") {
            holder = Some(kib(value));
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(pid), Some(name), Some(pss)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let pss = kib(pss);
        match (pid, name) {
            ("1", _) => memory.others += pss,
            (_, "sh") => memory.shells = (memory.shells.0 + 1, memory.shells.1 + pss),
            (_, name) if name.starts_with("myownshell") => {
                memory.clients = (memory.clients.0 + 1, memory.clients.1 + pss);
            }
            _ => memory.others += pss,
        }
    }
    memory.holder = holder.with_context(|| format!("no VmRSS of pid 1 in {out:?}"))?;
    Ok(memory)
}

/// Open terminals `range`, alternately on the two first replicas; the tasks keeping them, and
/// why the others failed.
async fn open_range(
    shared: &Arc<Shared>,
    addrs: &[String; 2],
    range: std::ops::Range<usize>,
    options: &Options,
) -> (Vec<(usize, tokio::task::JoinHandle<()>)>, Vec<String>) {
    let opened: Vec<(usize, anyhow::Result<tokio::task::JoinHandle<()>>)> = futures::stream::iter(range)
        .map(|client| {
            let replica = client % 2;
            let shared = shared.clone();
            let addr = addrs[replica].clone();
            let shell = holder_shell(client, options);
            async move { (client, open_one(shared, (replica, addr), client, shell).await) }
        })
        .buffer_unordered(OPENING)
        .collect()
        .await;
    let mut kept = Vec::new();
    let mut failed = Vec::new();
    for (client, result) in opened {
        match result {
            Ok(task) => kept.push((client, task)),
            Err(e) => failed.push(format!("terminal {client}: {e:#}")),
        }
    }
    (kept, failed)
}

/// Fill the first holder pod with `--sessions` terminals and the rest (there, or in the other
/// pods), measuring the first holder's memory as they open; the tasks keeping them.
async fn fill(
    bench: &Bench,
    shared: &Arc<Shared>,
    addrs: &[String; 2],
    pod: &str,
    options: &Options,
) -> anyhow::Result<Vec<(usize, tokio::task::JoinHandle<()>)>> {
    let empty = memory(&bench.kubectl, pod).await?.holder;
    println!("holder memory (VmRSS of pid 1 in its pod; each session a page with `new=1` that ran a command):");
    println!("  no session: {empty} KiB");
    let mut tasks = Vec::new();
    let mut failures = Vec::new();
    for (from, to) in [(0, options.sessions), (options.sessions, options.terminals)] {
        if to <= from {
            continue;
        }
        let started = Instant::now();
        let (kept, failed) = open_range(shared, addrs, from..to, options).await;
        let opened = tasks.len() + kept.len();
        tasks.extend(kept);
        failures.extend(failed);
        if from > 0 && options.pods > 1 {
            println!(
                "  {} more terminals opened in {:.1?} over pods {MANY}-1..{MANY}-{} ({} failed so far)",
                to - from,
                started.elapsed(),
                options.pods - 1,
                failures.len()
            );
            continue;
        }
        let now = memory(&bench.kubectl, pod).await?;
        let per = now.holder.saturating_sub(empty) as f64 / opened.max(1) as f64;
        let target = if to == options.sessions { "  (target: <= 256 KiB per session at 100)" } else { "" };
        println!(
            "  {opened} sessions (opened in {:.1?}, {} failed so far): {} KiB, {per:.1} KiB per session{target}",
            started.elapsed(),
            failures.len(),
            now.holder,
        );
        println!("    {}", now.line());
    }
    if let Some(first) = failures.first() {
        println!("  the first failure: {first}");
    }
    Ok(tasks)
}

/// What one roll of a replica saw.
#[derive(Default)]
struct Roll {
    /// `handover` (or the old socket's end) to the new `attached`, of each page of the old
    /// replica.
    took: Vec<Duration>,
    /// Pages that moved before their old socket ended (no gap in their output).
    moved: usize,
    /// The reattaching connection's own part of it.
    opening: Vec<Duration>,
    /// Pages of other replicas that reattached meanwhile.
    elsewhere: usize,
    /// Pages that stopped: why, and their sessions.
    stopped: Vec<(String, Held)>,
}

/// Roll replica `old`: a new one started and ready, then `old` out of the live ones and
/// SIGTERMed; until each of its pages reattached or stopped. Prints what it saw.
async fn roll(
    bench: &mut Bench,
    shared: &Shared,
    (gateways, events): (&mut HashMap<usize, Gateway>, &mut mpsc::UnboundedReceiver<Event>),
    clients: &mut HashMap<usize, Terminal>,
    (old, new_id): (usize, usize),
) -> anyhow::Result<Roll> {
    let new = bench.gateways.start().await?;
    let moving: HashSet<usize> =
        clients.iter().filter(|(_, c)| c.replica == old && !c.stopped).map(|(id, _)| *id).collect();
    {
        let mut live = shared.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.push((new_id, new.addr.clone()));
        live.retain(|(id, _)| *id != old);
    }
    gateways.insert(new_id, new);
    let old_gateway = gateways.remove(&old).context("the old replica")?;
    let cpu = cpu_by_pid();
    let old_pid = old_gateway.process.pid();
    let old_cpu = myownshell_envtest::process::cpu_time(old_pid).unwrap_or_default();
    let sigterm = Instant::now();
    let process = Mutex::new(old_gateway.process);
    // The old process's CPU time as last seen alive, and whether it is gone: looked at together,
    // so the last look before it is reaped still sees it.
    let last_cpu = Mutex::new(old_cpu);
    let gone = || {
        if let Some(t) = myownshell_envtest::process::cpu_time(old_pid) {
            *last_cpu.lock().unwrap_or_else(PoisonError::into_inner) = t;
        }
        process.lock().unwrap_or_else(PoisonError::into_inner).exit_status().is_some()
    };
    process.lock().unwrap_or_else(PoisonError::into_inner).terminate()?;
    let mut seen = Roll::default();
    let mut pending = moving.clone();
    let deadline = tokio::time::Instant::now() + REATTACH_FOR + TIMEOUT;
    // When the old process is first seen gone, looked at while the pages come back.
    let mut exited = None;
    let mut look = tokio::time::interval(Duration::from_millis(20));
    while !pending.is_empty() {
        let event = tokio::select! {
            event = tokio::time::timeout_at(deadline, events.recv()) => event
                .with_context(|| format!("{} pages neither reattached nor stopped", pending.len()))?
                .context("every terminal's task ended")?,
            _ = look.tick(), if exited.is_none() => {
                if gone() {
                    exited = Some(sigterm.elapsed());
                }
                continue;
            }
        };
        match event {
            Event::Reattached { client, from, to, took, opening, moved } => {
                if let Some(c) = clients.get_mut(&client) {
                    c.replica = to;
                }
                if pending.remove(&client) && from == old {
                    seen.took.push(took);
                    seen.opening.push(opening);
                    seen.moved += usize::from(moved);
                } else {
                    seen.elsewhere += 1;
                }
            }
            Event::Stopped { client, why, held } => {
                if let Some(c) = clients.get_mut(&client) {
                    c.stopped = true;
                }
                pending.remove(&client);
                seen.stopped.push((why, held));
            }
        }
    }
    let back = sigterm.elapsed();
    let mut after = cpu_by_pid();
    // The old process is counted apart (it may be gone by now).
    after.remove(&old_pid);
    let exited = match exited {
        Some(exited) => exited,
        None => myownshell_envtest::eventually("the old replica exited", TIMEOUT, || {
            let exited = gone().then(|| sigterm.elapsed());
            std::future::ready(exited.ok_or_else(|| "still running".to_owned()))
        })
        .await
        .map_err(anyhow::Error::msg)?,
    };
    let old_spent = last_cpu.lock().unwrap_or_else(PoisonError::into_inner).saturating_sub(old_cpu);
    let spent = cpu_spent(&cpu, &after, ("myownshell-gate", old_spent.as_secs_f64()));
    println!(
        "rollout of replica {old} (replaced by {new_id}): {} pages on it, {} reattached ({} moved before their old socket ended: no gap), {} stopped ({} pages of the other replica reattached meanwhile)",
        moving.len(),
        seen.took.len(),
        seen.moved,
        seen.stopped.len(),
        seen.elsewhere
    );
    let (mut took, mut opening) = (seen.took.clone(), seen.opening.clone());
    println!(
        "  `handover` (or, for a page that did not move, the old socket's end) to the new `attached`: p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms (a drop's backoff included); the reattaching connection alone: p50 {:.0} ms  p99 {:.0} ms",
        ms(percentile(&mut took, 0.5)),
        ms(percentile(&mut took, 0.99)),
        ms(percentile(&mut took, 1.0)),
        ms(percentile(&mut opening, 0.5)),
        ms(percentile(&mut opening, 0.99)),
    );
    println!("  every page back or stopped {back:.1?} after SIGTERM; the old process exited after {exited:.1?}");
    println!("  CPU meanwhile: {spent}");
    Ok(seen)
}

/// The holder's memory as terminals are opened, then the rollout of both replicas with all of
/// them open: sessions lost, pages reattached and stopped, how long they took.
async fn rollout(bench: &mut Bench, replicas: [Gateway; 2], pod: &str, options: &Options) -> anyhow::Result<()> {
    let (tx, mut events) = mpsc::unbounded_channel();
    let addrs = [replicas[0].addr.clone(), replicas[1].addr.clone()];
    let live = addrs.iter().cloned().enumerate().collect();
    let shared =
        Arc::new(Shared { door: bench.door.clone(), live: Mutex::new(live), next: AtomicUsize::new(0), events: tx });
    let mut gateways: HashMap<usize, Gateway> = replicas.into_iter().enumerate().collect();
    let tasks = fill(bench, &shared, &addrs, pod, options).await?;
    let mut clients: HashMap<usize, Terminal> =
        tasks.iter().map(|(client, _)| (*client, Terminal { replica: client % 2, stopped: false })).collect();

    let mut took = Vec::new();
    let mut stopped = Vec::new();
    let (mut reattached, mut moved) = (0, 0);
    for (n, old) in [0usize, 1].into_iter().enumerate() {
        let seen = roll(bench, &shared, (&mut gateways, &mut events), &mut clients, (old, 2 + n)).await?;
        reattached += seen.took.len() + seen.elsewhere;
        moved += seen.moved;
        took.extend(seen.took);
        stopped.extend(seen.stopped);
    }
    // A page that stopped is not yet a session lost: is it still in its pod?
    let mut lost = Vec::new();
    for (why, held) in &stopped {
        if let Err(gone) = still_there(&shared, held).await {
            lost.push(format!("session {} ({why}): {gone}", held.session));
        }
    }
    println!(
        "rollout of the 2 replicas with {} terminals on {} holder pod(s): sessions lost {} (target 0), pages reattached {reattached} ({moved} moved with no gap), pages that stopped instead {} ({} of their sessions still in the pod), to `attached` p50 {:.0} ms  p99 {:.0} ms  (target: p99 <= 3 s)",
        clients.len(),
        options.pods.max(1),
        lost.len(),
        stopped.len(),
        stopped.len() - lost.len(),
        ms(percentile(&mut took, 0.5)),
        ms(percentile(&mut took, 0.99)),
    );
    if let Some((why, _)) = stopped.first() {
        println!("  the first page that stopped: {why}");
    }
    if let Some(first) = lost.first() {
        println!("  the first session lost: {first}");
    }
    let after = memory(&bench.kubectl, pod).await?;
    println!("  the first holder after the rollout: {} KiB; {}", after.holder, after.line());
    for (_, task) in tasks {
        task.abort();
    }
    drop(gateways);
    Ok(())
}

/// CPU ticks (user and system, with those of the children each reaped) of every process below
/// this one (the bench's clients, the gateways, the control plane, the node and its
/// containers), by pid, with its program's name. This process's own count no reaped children:
/// they are the gateways, whose time [`roll`] counts itself.
fn cpu_by_pid() -> HashMap<u32, (String, u64)> {
    let me = std::process::id();
    let mut parents = HashMap::new();
    let mut times = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let name = head.split_once('(').map(|(_, n)| n.to_owned()).unwrap_or_default();
        // After the name: state, ppid, ... utime (12th), stime, cutime, cstime.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        parents.insert(pid, number(1) as u32);
        let reaped = if pid == me { 0 } else { number(13) + number(14) };
        times.insert(pid, (name, number(11) + number(12) + reaped));
    }
    let ours = |mut pid: u32| {
        for _ in 0..64 {
            if pid == me {
                return true;
            }
            match parents.get(&pid) {
                Some(&parent) if parent != 0 => pid = parent,
                _ => return false,
            }
        }
        false
    };
    times.retain(|pid, _| ours(*pid));
    times
}

/// The programs that spent the most CPU between two [`cpu_by_pid`]s (a process that ended
/// meanwhile counts in its parent's, which reaped it), with `gone`'s (a program's name and
/// seconds, measured apart), as a line.
fn cpu_spent(before: &HashMap<u32, (String, u64)>, after: &HashMap<u32, (String, u64)>, gone: (&str, f64)) -> String {
    let mut by_name: HashMap<&str, f64> = HashMap::new();
    for (pid, (name, ticks)) in after {
        let earlier = before.get(pid).filter(|(n, _)| n == name).map_or(0, |(_, t)| *t);
        // The kernel's fixed 100 ticks a second.
        *by_name.entry(name).or_default() += ticks.saturating_sub(earlier) as f64 / 100.0;
    }
    *by_name.entry(gone.0).or_default() += gone.1;
    let mut spent: Vec<(&str, f64)> = by_name.into_iter().filter(|(_, t)| *t >= 0.05).collect();
    spent.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = spent.iter().map(|(_, t)| t).sum();
    let top: Vec<String> = spent.iter().take(10).map(|(name, t)| format!("{name} {t:.2} s")).collect();
    format!("{total:.1} CPU-s: {}", top.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_is_read_from_the_answer_not_from_the_typed_line() {
        let cases = [
            ("the echo of the line only", "echo K1-$$-E\r\n", None),
            ("the answer", "echo K1-$$-E\r\nK1-42-E\r\n$ ", Some("42")),
            ("an earlier answer in the replay", "K0-41-E\r\n$ echo K1-$$-E\r\n", None),
            ("split before the end", "K1-42", None),
        ];
        for (what, text, want) in cases {
            assert_eq!(answer(text, "K1-").as_deref(), want, "{what}");
        }
    }
}
