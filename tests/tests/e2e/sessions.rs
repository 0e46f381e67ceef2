//! The sessions phase (issue 39): terminals held in the shell's pod by its session holder,
//! through the gateway's two replicas on the real node, reached at the gateway Service's own
//! address (kube-proxy spreads pages over whichever replicas are ready, as an Ingress would).
//!
//! - a page runs a command that prints a line a second until it is told to stop; the gateway is
//!   rolled out (a new pod ready before an old one goes) while it prints; the page reattaches by
//!   itself to the same session (the same `sh`, its pid unchanged); the command is stopped a few
//!   lines after that, and every line is on its screen;
//! - bob, whom the shell is shared with, joins it read-only (he sees it, his keys type nothing,
//!   and everyone attached sees him); carol, an editor it is not shared with, is refused by the
//!   gate even with the session's id;
//! - access lost is access ended (issue 38): bob's own terminal closes, saying why, once alice
//!   takes him off `sharedWith`; dave's closes once his ServiceAccount is deleted;
//! - a page's message over `--max-message-bytes` closes its socket (1009);
//! - `kubectl myownshell connect` killed mid-command (a dropped client), then `connect --session
//!   ID`: the command finished, its output is on the redrawn screen, and the session's exit code is
//!   the plugin's;
//! - the session ends with `exit`, and no process of it is left in the pod.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use myownshell_envtest::eventually;
use myownshell_tests::browser::Browser;
use myownshell_tests::gateway::GatewayClient;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use super::gateway_browser::{screen, shell_pid, sign_in, type_line, until};
use super::{E2e, GATEWAY, SYSTEM, wait_running};

const SHELL: &str = "work";
const STEP: Duration = Duration::from_secs(120);
/// The most lines the printing command prints, a second each, if nobody stops it: longer than
/// the rollout's own timeout (120 s), so only a failed test leaves it printing, and not for long.
const MOST_LINES: usize = 240;
/// The file whose making stops the printing command.
const STOP_LINES: &str = "/tmp/stop-lines";

/// The highest `line-N` on `screen`; 0 if none.
fn last_line(screen: &str) -> usize {
    screen.lines().filter_map(|l| l.trim().strip_prefix("line-")?.parse().ok()).max().unwrap_or(0)
}

/// The gateway at its Service's address, as a page's client (its certificate is self-signed).
async fn gateway(e2e: &E2e) -> GatewayClient {
    let ip = e2e.run(&["get", "svc", GATEWAY, "-n", SYSTEM, "-o", "jsonpath={.spec.clusterIP}"]).await;
    let addr: SocketAddr = format!("{}:443", ip.trim()).parse().unwrap();
    let tls = myownshell_tests::tls_client::tls_client(None).unwrap();
    let client = GatewayClient { addr, tls: Arc::new(tls) };
    eventually("the gateway's Service answers", STEP, || async {
        let (status, _, body) = client.request(http::Method::GET, "/", &[], None).await?;
        if status == 200 { Ok(()) } else { Err(format!("{status}: {body}")) }
    })
    .await
    .unwrap();
    client
}

/// `who`'s ServiceAccount in `ns`, a namespace editor; its user name and a token.
async fn person(e2e: &E2e, ns: &str, who: &str) -> (String, String) {
    e2e.run(&["create", "serviceaccount", who, "-n", ns]).await;
    let subject = format!("--serviceaccount={ns}:{who}");
    e2e.run(&["create", "rolebinding", &format!("{who}-edit"), "--clusterrole=edit", &subject, "-n", ns]).await;
    let token = e2e.run(&["create", "token", who, "-n", ns]).await.trim().to_owned();
    (format!("system:serviceaccount:{ns}:{who}"), token)
}

/// A terminal's socket through the gateway, as `cookie`'s page with `query`.
struct Page {
    socket: tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>,
}

impl Page {
    async fn open(gw: &GatewayClient, ns: &str, cookie: &str, query: &str) -> Result<Page, String> {
        let origin = gw.origin();
        let path = format!("/api/terminal/{ns}/{SHELL}?cols=100&rows=30&{query}");
        Ok(Page { socket: gw.websocket(&path, &[("cookie", cookie), ("origin", &origin)]).await? })
    }

    /// Messages until `accept` takes a text one (its JSON), or the socket ends (`Err` with what
    /// came); output is kept in `screen`.
    async fn until(&mut self, screen: &mut String, accept: impl Fn(&Value) -> bool) -> Result<Value, String> {
        let mut seen = Vec::new();
        loop {
            let next =
                tokio::time::timeout(STEP, self.socket.next()).await.map_err(|_| format!("timed out: {seen:?}"))?;
            match next {
                Some(Ok(Message::Binary(bytes))) => screen.push_str(&String::from_utf8_lossy(&bytes)),
                Some(Ok(Message::Text(text))) => {
                    let value: Value = serde_json::from_str(text.as_str()).map_err(|e| e.to_string())?;
                    if accept(&value) {
                        return Ok(value);
                    }
                    seen.push(value);
                }
                Some(Ok(Message::Close(frame))) => return Err(format!("closed ({frame:?}) after {seen:?}")),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("{e} after {seen:?}")),
                None => return Err(format!("ended after {seen:?}")),
            }
        }
    }
}

/// The phase.
pub async fn sessions_and_rollout(e2e: &E2e) {
    let ns = e2e.namespace("e2e-sessions").await;
    let (alice, alice_token) = person(e2e, &ns, "alice").await;
    let (bob, bob_token) = person(e2e, &ns, "bob").await;
    let (_, carol_token) = person(e2e, &ns, "carol").await;
    let (dave, dave_token) = person(e2e, &ns, "dave").await;
    let manifest = format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata: {{name: {SHELL}}}\nspec: {{size: 1, sharedWith: {{users: [\"{bob}\", \"{dave}\"]}}}}\n"
    );
    let as_alice =
        ["--as", alice.as_str(), "--as-group", "system:authenticated", "--as-group", "system:serviceaccounts"];
    let mut apply = as_alice.to_vec();
    apply.extend(["apply", "-n", &ns, "-f", "-"]);
    let out = e2e.kubectl.run_with_stdin(&apply, Some(&manifest)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    let pod = wait_running(e2e, &ns, SHELL, 1).await.remove(0);
    let gw = gateway(e2e).await;
    let url = format!("https://{}/", gw.addr);

    // A minute of lines, across a rollout of the gateway.
    let mut browser = Browser::launch().await.unwrap();
    let tab = browser.new_tab().await.unwrap();
    sign_in(&mut browser, &tab, &url, &alice_token, &alice).await;
    browser.evaluate(&tab, &format!("location.hash = '#/{ns}/{SHELL}'; true")).await.unwrap();
    until(&mut browser, &tab, "a session started", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.starts_with("started session "))
    })
    .await;
    let pid = shell_pid(&mut browser, &tab, 1).await;
    let session = browser.evaluate(&tab, "window.myownshell.terminal()").await.unwrap();
    let session = session.as_str().expect("the session's id").to_owned();
    // Lines until told to stop (a file the test makes once the rollout is over), at most
    // [`MOST_LINES`]: no fixed minute to wait out. The marker is printed by arithmetic, so that
    // the typed command's echo is not it.
    let printing = format!(
        "i=0; while [ $i -lt {MOST_LINES} ] && [ ! -e {STOP_LINES} ]; do i=$((i+1)); echo line-$i; sleep 1; done; echo all-$((40+2)) lines=$i"
    );
    type_line(&mut browser, &tab, &printing).await;
    screen(&mut browser, &tab, "line-5", |s| s.contains("line-5")).await;
    // The rollout also gives the gateway a short authentication cache, for dave's case below.
    let patch =
        r#"[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--auth-cache-ttl=10s"}]"#;
    e2e.run(&["patch", "deployment", GATEWAY, "-n", SYSTEM, "--type=json", "-p", patch]).await;
    e2e.rollout(GATEWAY).await;
    eprintln!("e2e: sessions: the gateway rolled out with a terminal printing");
    // `rollout status` returns once the new replicas are ready, while the old ones may still be
    // stopping, and the page moves only when its old gateway stops: wait for that, then for a
    // few lines printed through the gateway it moved to; then stop the printing.
    until(&mut browser, &tab, "the page reattached to its session", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.starts_with(&format!("reattached to session {session}")))
    })
    .await;
    let after = last_line(&screen(&mut browser, &tab, "a line after the move", |s| last_line(s) > 0).await) + 3;
    screen(&mut browser, &tab, &format!("line-{after}"), |s| last_line(s) >= after).await;
    e2e.run(&["exec", "-n", &ns, &pod, "-c", "shell", "--", "touch", STOP_LINES]).await;
    let text = screen(&mut browser, &tab, "every line, after the rollout", |s| s.contains("all-42")).await;
    let printed = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("all-42 lines="))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no count after all-42:\n{text}"));
    assert!(printed >= after, "the lines stopped at {printed}, before line-{after}, which the screen showed");
    let missing: Vec<usize> =
        (1..=printed).filter(|i| !text.lines().any(|l| l.trim() == format!("line-{i}"))).collect();
    assert!(missing.is_empty(), "lines missing from the screen after the rollout: {missing:?}\n{text}");
    let status = browser.evaluate(&tab, "window.myownshell.status()").await.unwrap();
    assert!(status.as_str().is_some_and(|s| s.starts_with(&format!("reattached to session {session}"))), "{status}");
    assert_eq!(shell_pid(&mut browser, &tab, 2).await, pid, "the same sh after the rollout");
    // Its gateway stopped, so the page moved: handed over to another replica before the old
    // socket went (no gap), not reattached after a drop.
    let moves = browser.evaluate(&tab, "window.myownshell.moves()").await.unwrap();
    assert!(moves.as_u64().is_some_and(|m| m >= 1), "the page was never handed over (moves: {moves})");

    shared_read_only_and_a_stranger_refused(&gw, &ns, &session, (&bob_token, &carol_token)).await;
    let presence = browser.evaluate(&tab, "window.myownshell.presence()").await.unwrap();
    eprintln!("e2e: sessions: alice's page saw {presence}");
    access_lost(e2e, &gw, &ns, (&as_alice, &bob, &bob_token), &dave_token).await;
    too_big_a_message(&gw, &ns, &alice_token).await;
    plugin_killed_mid_command(e2e, &ns, &pod, &alice_token).await;

    // The session ends with its shell, and takes every process of it along: a job left in the
    // background included.
    type_line(&mut browser, &tab, "sleep 600 & echo bg-$((1+1))").await;
    screen(&mut browser, &tab, "the background job started", |s| s.contains("bg-2")).await;
    type_line(&mut browser, &tab, "exit").await;
    until(&mut browser, &tab, "the session ended", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.contains("exited with code 0"))
    })
    .await;
    // Every process's command line, one per line: a `sleep 600` is exactly "sleep 600 ".
    let check = format!(
        "test -d /proc/{pid} && echo alive || echo gone; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -cx 'sleep 600 ' || true"
    );
    let left = eventually("no process of the session left", STEP, || async {
        let out = e2e.try_run(&["exec", "-n", &ns, &pod, "-c", "shell", "--", "sh", "-c", &check]).await?;
        // The shell gone, and its background job (ended with it, SIGKILL after the holder's grace).
        if out.starts_with("gone") && out.lines().nth(1).is_some_and(|n| n.trim() == "0") { Ok(out) } else { Err(out) }
    })
    .await
    .unwrap_or_else(|e| panic!("the session's shell or its background job left: {e}"));
    eprintln!("e2e: sessions: the session ended with its shell and its background job: {}", left.replace('\n', " "));
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

/// bob, whom the shell is shared with, joins alice's session read-only: he gets its screen, his
/// keys type nothing; carol, an editor it is not shared with, is refused by the gate with its id.
async fn shared_read_only_and_a_stranger_refused(
    gw: &GatewayClient,
    ns: &str,
    session: &str,
    (bob_token, carol_token): (&str, &str),
) {
    let (cookie, _) = gw.sign_in(bob_token).await.unwrap();
    let mut bob = Page::open(gw, ns, &cookie, &format!("session={session}&readOnly=1")).await.unwrap();
    let mut screen = String::new();
    let hello = bob.until(&mut screen, |v| v["type"] == "attached").await.unwrap();
    assert_eq!((hello["session"].as_str(), hello["readOnly"].as_bool()), (Some(session), Some(true)), "{hello}");
    bob.socket.send(Message::binary(b"echo bob-was-here\r".to_vec())).await.unwrap();
    let refused = bob.until(&mut screen, |v| v["type"] == "notice").await.unwrap();
    eprintln!("e2e: sessions: bob's keys, read-only: {}", refused["message"]);
    let (cookie, _) = gw.sign_in(carol_token).await.unwrap();
    let mut carol = Page::open(gw, ns, &cookie, &format!("session={session}")).await.unwrap();
    let mut seen = String::new();
    let refusal = carol.until(&mut seen, |v| v["type"] == "refused").await.unwrap();
    assert!(refusal["message"].as_str().is_some_and(|m| m.contains("may not")), "{refusal}");
    assert!(!seen.contains("line-"), "carol saw alice's screen: {seen}");
    let _ = bob.socket.close(None).await;
}

/// Access lost is access ended: bob's own terminal closes, saying why, once alice takes him
/// off `sharedWith`; dave's once his ServiceAccount is deleted (within the gateway's
/// authentication cache, shortened to 10 s here, and its look at open terminals).
async fn access_lost(
    e2e: &E2e,
    gw: &GatewayClient,
    ns: &str,
    (as_alice, bob, bob_token): (&[&str], &str, &str),
    dave_token: &str,
) {
    let (cookie, _) = gw.sign_in(bob_token).await.unwrap();
    let mut bobs = Page::open(gw, ns, &cookie, "new=1").await.unwrap();
    let mut screen = String::new();
    bobs.until(&mut screen, |v| v["type"] == "attached").await.unwrap();
    let (cookie, _) = gw.sign_in(dave_token).await.unwrap();
    let mut daves = Page::open(gw, ns, &cookie, "new=1").await.unwrap();
    daves.until(&mut screen, |v| v["type"] == "attached").await.unwrap();
    let unshare = format!(r#"{{"spec":{{"sharedWith":{{"users":["system:serviceaccount:{ns}:dave"]}}}}}}"#);
    let mut patch = as_alice.to_vec();
    patch.extend(["patch", "mos", SHELL, "-n", ns, "--type=merge", "-p", &unshare]);
    let out = e2e.kubectl.run(&patch).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    let closed = bobs.until(&mut screen, |v| v["type"] == "closed").await.unwrap();
    assert!(closed["message"].as_str().is_some_and(|m| m.contains("no longer")), "bob ({bob}): {closed}");
    eprintln!("e2e: sessions: bob's terminal closed: {}", closed["message"]);
    e2e.run(&["delete", "serviceaccount", "dave", "-n", ns]).await;
    let closed = daves.until(&mut screen, |v| v["type"] == "closed").await.unwrap();
    assert!(closed["message"].as_str().is_some_and(|m| m.contains("no longer accepts")), "dave: {closed}");
    eprintln!("e2e: sessions: dave's terminal closed: {}", closed["message"]);
}

/// A message over the page's limit (`--max-message-bytes`, 1 MiB) closes the socket with 1009.
async fn too_big_a_message(gw: &GatewayClient, ns: &str, token: &str) {
    let (cookie, _) = gw.sign_in(token).await.unwrap();
    let mut page = Page::open(gw, ns, &cookie, "new=1").await.unwrap();
    let mut screen = String::new();
    page.until(&mut screen, |v| v["type"] == "attached").await.unwrap();
    let _ = page.socket.send(Message::binary(vec![b'x'; 2 * 1024 * 1024])).await;
    let ended = page.until(&mut screen, |_| false).await.unwrap_err();
    assert!(ended.contains("1009") || ended.contains("Size"), "a 2 MiB message: {ended}");
}

/// `kubectl myownshell connect` as alice, killed (SIGKILL: a dropped client, nothing said to
/// anyone) while a command runs in its session; the session goes on without it, the command
/// finishes; `connect --session ID` comes back to it, its output on the redrawn screen, and
/// the plugin exits with the session's code.
async fn plugin_killed_mid_command(e2e: &E2e, ns: &str, pod: &str, token: &str) {
    let kubeconfig = e2e.cluster.control_plane().kubeconfig_path();
    let plugin = myownshell_envtest::assets::workspace_binary("kubectl-myownshell").unwrap();
    let global = [format!("--kubeconfig={}", kubeconfig.display()), format!("--token={token}"), format!("-n={ns}")];
    let listed_before = session_ids(&kubeconfig, ns, &global[1]);
    let mut connect = tokio::process::Command::new(&plugin)
        .args(&global)
        .args(["connect", SHELL, "--new"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = connect.stdin.take().unwrap();
    let mut stdout = connect.stdout.take().unwrap();
    // Typed twice, as in the gateway phase: piped input can reach busybox's sh before it reads.
    let command = "echo started-$((1+1)); sleep 3; echo done-$((40+2)); touch /tmp/plugin-done\n";
    tokio::io::AsyncWriteExt::write_all(&mut stdin, command.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let started = tokio::time::timeout(STEP, async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("started-2") {
            let n = tokio::io::AsyncReadExt::read(&mut stdout, &mut buf).await.unwrap_or(0);
            if n == 0 {
                return false;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        true
    })
    .await;
    if started != Ok(true) {
        let _ = connect.start_kill();
        let out = connect.wait_with_output().await.unwrap();
        panic!(
            "connect never ran the command: {}\nstderr: {}",
            String::from_utf8_lossy(&seen),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Through a pipe the plugin says nothing of its session: it is the one the listing did not
    // have before.
    let now_listed = session_ids(&kubeconfig, ns, &global[1]);
    let id = now_listed
        .iter()
        .find(|id| !listed_before.contains(id))
        .unwrap_or_else(|| panic!("no new session: before {listed_before:?}, now {now_listed:?}"))
        .clone();
    connect.start_kill().unwrap();
    connect.wait().await.unwrap();
    // The command finishes with nobody attached.
    let done = ["exec", "-n", ns, pod, "-c", "shell", "--", "sh", "-c", "test -f /tmp/plugin-done && echo yes"];
    e2e.wait_for("the command finished in the dropped session", &done, |out| out.trim() == "yes").await;
    eventually("the dropped session, detached", STEP, || async {
        let out = myownshell_tests::plugin::run(&kubeconfig, ns, &[&global[1], "sessions", SHELL, "-o", "json"])?;
        let sessions: Vec<Value> = serde_json::from_str(&out.stdout).map_err(|e| format!("{e}: {out:?}"))?;
        let detached =
            sessions.iter().any(|s| s["id"] == id.as_str() && s["attached"].as_array().is_some_and(Vec::is_empty));
        if detached { Ok(()) } else { Err(format!("{out:?}")) }
    })
    .await
    .unwrap();
    let back = myownshell_tests::plugin::run_with_stdin(
        &kubeconfig,
        ns,
        &[&global[1], "connect", SHELL, "--session", &id],
        "exit 7\nexit 7\n",
    )
    .unwrap();
    assert!(back.stdout.contains("done-42"), "the command's output on the redrawn screen: {back:?}");
    assert_eq!(back.code, 7, "the session's exit code: {back:?}");
    eprintln!("e2e: sessions: connect killed mid-command, then connect --session {id}: done-42 on the screen, exit 7");
}

/// The ids of the sessions `kubectl myownshell sessions -o json` shows the holder of `token`.
fn session_ids(kubeconfig: &std::path::Path, ns: &str, token: &str) -> Vec<String> {
    let out = myownshell_tests::plugin::run(kubeconfig, ns, &[token, "sessions", SHELL, "-o", "json"]).unwrap();
    let sessions: Vec<Value> =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("sessions -o json: {e}: {out:?}"));
    sessions.iter().filter_map(|s| s["id"].as_str().map(str::to_owned)).collect()
}
