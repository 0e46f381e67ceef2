//! The gateway's page in a real browser (Chromium, headless, over the DevTools protocol) against
//! a real shell on the node: the owner signs in with a token, opens her shell and types `id -u`
//! into xterm.js; a reload finds the same `sh` (the same PID); her typing is the shell's last
//! connection; a stranger signed in from another browser gets the connect gate's refusal in the
//! terminal; a shell about to stop as idle says so and Extend pushes the stop back; a recorded
//! shell says so and only an auditor reads its recording. Screenshots of each step are saved.

use std::path::{Path, PathBuf};
use std::time::Duration;

use myownshell_envtest::{Kubectl, eventually};
use myownshell_tests::browser::{Browser, Tab};
use serde_json::Value;

const STEP: Duration = Duration::from_secs(60);

/// Where the screenshots go: `target/artifacts/gateway/`.
pub fn artifacts() -> PathBuf {
    myownshell_envtest::assets::target_dir().join("artifacts").join("gateway")
}

pub(super) async fn run(kubectl: &Kubectl, args: &[&str]) -> String {
    let out = kubectl.run(args).await.unwrap();
    assert!(out.success, "kubectl {}: {}{}", args.join(" "), out.stdout, out.stderr);
    out.stdout
}

/// A page's JavaScript value, polled until `accept` takes it; the last one on timeout.
pub(super) async fn until(
    browser: &mut Browser,
    tab: &Tab,
    what: &str,
    js: &str,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    let started = std::time::Instant::now();
    let mut last = Value::Null;
    while started.elapsed() < STEP {
        match browser.evaluate(tab, js).await {
            Ok(value) if accept(&value) => return value,
            Ok(value) => last = value,
            Err(e) => last = Value::String(e),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what}: not seen in {STEP:?}; last: {last}\n{}", browser.log())
}

/// The terminal's text.
pub(super) async fn screen(browser: &mut Browser, tab: &Tab, what: &str, accept: impl Fn(&str) -> bool) -> String {
    let value = until(browser, tab, what, "window.myownshell.screen()", |v| v.as_str().is_some_and(&accept)).await;
    value.as_str().unwrap_or_default().to_owned()
}

/// Sign in on the page at `url` with `token` (signing out whoever was signed in there); wait
/// until it names `user`.
pub(super) async fn sign_in(browser: &mut Browser, tab: &Tab, url: &str, token: &str, user: &str) {
    browser.navigate(tab, url).await.unwrap();
    let settled = "!document.getElementById('sign-in').hidden || !document.getElementById('who').hidden";
    until(browser, tab, "the page settled", settled, |v| v == true).await;
    browser
        .evaluate(tab, "document.getElementById('who').hidden || document.getElementById('sign-out').click(); true")
        .await
        .unwrap();
    until(browser, tab, "the sign-in form", "!document.getElementById('sign-in').hidden", |v| v == true).await;
    let fill = format!(
        "document.getElementById('token').value = {}; document.getElementById('sign-in-button').click(); true",
        serde_json::to_string(token).unwrap()
    );
    browser.evaluate(tab, &fill).await.unwrap();
    until(browser, tab, "signed in", "document.getElementById('who').textContent", |v| v == user).await;
}

/// Type a line into the terminal.
pub(super) async fn type_line(browser: &mut Browser, tab: &Tab, line: &str) {
    browser.evaluate(tab, "document.querySelector('.xterm-helper-textarea').focus(); true").await.unwrap();
    browser.type_text(tab, line).await.unwrap();
    browser.press_enter(tab).await.unwrap();
}

/// The PID the shell prints for `echo pid-$$-`, the `n`th time.
pub(super) async fn shell_pid(browser: &mut Browser, tab: &Tab, n: usize) -> String {
    type_line(browser, tab, "echo pid-$$-").await;
    let text = screen(browser, tab, "the shell's PID", |s| pids(s).len() >= n).await;
    pids(&text)[n - 1].clone()
}

pub(super) fn pids(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pid-")?.strip_suffix('-'))
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .collect()
}

pub(super) async fn shot(browser: &mut Browser, tab: &Tab, name: &str, dir: &Path) {
    browser.screenshot(tab, &dir.join(format!("{name}.png"))).await.unwrap();
}

/// The whole flow, against the gateway at `url` and a namespace `ns` opened to shells.
pub async fn owner_stranger_and_reload(kubectl: &Kubectl, ns: &str, url: &str) {
    let dir = artifacts();
    for who in ["alice", "bob"] {
        run(kubectl, &["create", "serviceaccount", who, "-n", ns]).await;
        let subject = format!("--serviceaccount={ns}:{who}");
        run(kubectl, &["create", "rolebinding", &format!("{who}-edit"), "--clusterrole=edit", &subject, "-n", ns])
            .await;
    }
    let alice = format!("system:serviceaccount:{ns}:alice");
    let bob = format!("system:serviceaccount:{ns}:bob");
    let shell = "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata: {name: web}\nspec: {size: 1}\n";
    let as_alice =
        ["--as", alice.as_str(), "--as-group", "system:authenticated", "--as-group", "system:serviceaccounts"];
    let mut apply = as_alice.to_vec();
    apply.extend(["apply", "-n", ns, "-f", "-"]);
    let out = kubectl.run_with_stdin(&apply, Some(shell)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    eventually("shell web available", STEP, || async {
        let out = kubectl.run(&["get", "mos", "web", "-n", ns, "-o", "jsonpath={.status.readyReplicas}"]).await?;
        if out.stdout.trim() == "1" { Ok(()) } else { Err(format!("ready: {:?} {}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();
    let alice_token = run(kubectl, &["create", "token", "alice", "-n", ns]).await.trim().to_owned();
    let bob_token = run(kubectl, &["create", "token", "bob", "-n", ns]).await.trim().to_owned();

    let mut browser = Browser::launch().await.unwrap();
    let tab = browser.new_tab().await.unwrap();
    sign_in(&mut browser, &tab, url, &alice_token, &alice).await;
    until(&mut browser, &tab, "the list of shells", "document.querySelectorAll('[data-shell]').length", |v| {
        v.as_u64().is_some_and(|n| n >= 1)
    })
    .await;
    shot(&mut browser, &tab, "1-shells", &dir).await;
    browser.evaluate(&tab, &format!("location.hash = '#/{ns}/web'; true")).await.unwrap();
    until(&mut browser, &tab, "connected", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.starts_with("started session ") && s.contains(" in pod web-"))
    })
    .await;
    type_line(&mut browser, &tab, "id -u").await;
    screen(&mut browser, &tab, "`id -u` answered 65534", |s| s.lines().any(|l| l.trim() == "65534")).await;
    shot(&mut browser, &tab, "2-owner-id-u", &dir).await;
    let before = shell_pid(&mut browser, &tab, 1).await;

    browser.reload(&tab).await.unwrap();
    until(&mut browser, &tab, "reattached", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.starts_with("reattached to session ") && s.contains(" in pod web-"))
    })
    .await;
    // The recent screen is drawn again, then the same `sh` answers.
    screen(&mut browser, &tab, "the screen drawn again", |s| s.contains("65534")).await;
    let after = shell_pid(&mut browser, &tab, 2).await;
    assert_eq!(before, after, "a reload reattaches to the same shell process");
    shot(&mut browser, &tab, "3-reloaded-same-pid", &dir).await;

    // The stranger even knows alice's session id (as if it leaked) and asks to join it: the
    // exec that would join it is his, and the gate refuses it.
    let alices_terminal = browser.evaluate(&tab, "window.myownshell.terminal()").await.unwrap();
    let alices_terminal = alices_terminal.as_str().expect("alice's terminal id").to_owned();
    let stranger = browser.new_tab().await.unwrap();
    sign_in(&mut browser, &stranger, url, &bob_token, &bob).await;
    let steal = format!(
        "sessionStorage.setItem('terminal:{ns}/web', JSON.stringify({{held: true, session: '{alices_terminal}'}})); location.hash = '#/{ns}/web'; true"
    );
    browser.evaluate(&stranger, &steal).await.unwrap();
    let refusal = until(&mut browser, &stranger, "the stranger's refusal", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.contains("may not"))
    })
    .await;
    let refusal = refusal.as_str().unwrap_or_default();
    assert!(
        refusal.contains(&bob) && refusal.contains("which only its owner") && refusal.contains(&alice),
        "{refusal}"
    );
    let seen = screen(&mut browser, &stranger, "the refusal in the terminal", |s| s.contains("may not")).await;
    assert!(!seen.contains("65534"), "the stranger saw alice's screen:\n{seen}");
    shot(&mut browser, &stranger, "4-stranger-refused", &dir).await;
    // Alice's terminal is still hers, the same shell process.
    assert_eq!(shell_pid(&mut browser, &tab, 3).await, after, "alice's terminal is the same shell process");

    // Typing in the gateway's terminal is use: it is the shell's last connection.
    let last = run(kubectl, &["get", "mos", "web", "-n", ns, "-o", "jsonpath={.status.lastConnection}"]).await;
    eventually("the terminal's use recorded as web's last connection", STEP, || async {
        let last = run(kubectl, &["get", "mos", "web", "-n", ns, "-o", "jsonpath={.status.lastConnection}"]).await;
        let value: Value = serde_json::from_str(&last).map_err(|e| format!("{e}: {last}"))?;
        if value["kind"] == "gateway" && value["user"] == alice.as_str() { Ok(()) } else { Err(last) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e} (before: {last})"));

    stop_warning_and_extend(kubectl, &mut browser, &tab, ns, &as_alice, &dir).await;
    recorded_for_auditors_only(kubectl, &mut browser, (&tab, &stranger), ns, &as_alice, url).await;
    eprintln!("e2e: gateway screenshots in {}", dir.display());
}

/// A shell that asks for its sessions to be recorded: the terminal says so; what it shows is
/// in an asciicast file that an auditor (bound to `myownshell-recordings-reader`) downloads
/// through the gateway, and that its owner, who has no such grant, may not.
async fn recorded_for_auditors_only(
    kubectl: &Kubectl,
    browser: &mut Browser,
    (tab, other): (&Tab, &Tab),
    ns: &str,
    as_alice: &[&str],
    url: &str,
) {
    let shell = "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata: {name: recorded}\n\
                 spec: {size: 1, recordSessions: true}\n";
    let mut apply = as_alice.to_vec();
    apply.extend(["apply", "-n", ns, "-f", "-"]);
    let out = kubectl.run_with_stdin(&apply, Some(shell)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    browser.evaluate(tab, &format!("location.hash = '#/{ns}/recorded'; true")).await.unwrap();
    // The notice comes right after the terminal is attached.
    screen(browser, tab, "the recording notice", |s| s.contains("this session is recorded")).await;
    type_line(browser, tab, "echo rec-$((40+2))").await;
    screen(browser, tab, "the command's output", |s| s.lines().any(|l| l.trim() == "rec-42")).await;

    run(kubectl, &["create", "serviceaccount", "auditor", "-n", ns]).await;
    let subject = format!("--serviceaccount={ns}:auditor");
    let role = "--clusterrole=myownshell-recordings-reader";
    run(kubectl, &["create", "rolebinding", "auditor-recordings", role, &subject, "-n", ns]).await;
    let auditor_token = run(kubectl, &["create", "token", "auditor", "-n", ns]).await.trim().to_owned();
    let auditor = format!("system:serviceaccount:{ns}:auditor");
    // The owner's tab: no grant, no recordings.
    let list = format!("fetch('/api/recordings/{ns}/recorded').then(r => r.status + ' ' + r.statusText)");
    let owner = browser.evaluate(tab, &list).await.unwrap();
    assert_eq!(owner, "403 Forbidden", "the owner may not read recordings without the grant");
    // The auditor, signed in in the other browser.
    sign_in(browser, other, url, &auditor_token, &auditor).await;
    let read = format!(
        "fetch('/api/recordings/{ns}/recorded').then(r => r.json()).then(l => l.recordings.length ? \
         fetch('/api/recordings/{ns}/recorded/' + l.recordings[0].name).then(r => r.text()) : '')"
    );
    let cast = until(browser, other, "the recording holds the output", &read, |v| {
        v.as_str().is_some_and(|t| t.contains("rec-42"))
    })
    .await;
    let cast = cast.as_str().unwrap_or_default();
    assert!(cast.starts_with('{') && cast.lines().next().unwrap_or_default().contains("\"version\":2"), "{cast}");
}

/// A shell with a short idle timeout: with its terminal open and nobody typing, the stop
/// warning reaches the page, and its Extend button (the owner's) pushes the stop back.
async fn stop_warning_and_extend(
    kubectl: &Kubectl,
    browser: &mut Browser,
    tab: &Tab,
    ns: &str,
    as_alice: &[&str],
    dir: &Path,
) {
    let shell = "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata: {name: brief}\n\
                 spec: {size: 1, lifetime: {idleTimeout: 45s, warnBefore: 40s}}\n";
    let mut apply = as_alice.to_vec();
    apply.extend(["apply", "-n", ns, "-f", "-"]);
    let out = kubectl.run_with_stdin(&apply, Some(shell)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    browser.evaluate(tab, &format!("location.hash = '#/{ns}/brief'; true")).await.unwrap();
    until(browser, tab, "connected to brief", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.starts_with("started session ") && s.contains(" in pod brief-"))
    })
    .await;
    let warning = until(browser, tab, "the stop warning", "window.myownshell.stopping()", |v| v.is_string()).await;
    let warning = warning.as_str().unwrap_or_default().to_owned();
    assert!(warning.contains("brief"), "{warning}");
    screen(browser, tab, "the warning in the terminal", |s| s.contains(&warning)).await;
    shot(browser, tab, "5-stop-warning", dir).await;
    browser.evaluate(tab, "document.getElementById('extend').click(); true").await.unwrap();
    until(browser, tab, "extended", "window.myownshell.stopping()", |v| {
        v.as_str().is_some_and(|s| s.starts_with("Extended: no stop before"))
    })
    .await;
    let until_time =
        run(kubectl, &["get", "mos", "brief", "-n", ns, "-o", "jsonpath={.spec.lifetime.extendedUntil}"]).await;
    assert!(!until_time.is_empty(), "the extend button wrote spec.lifetime.extendedUntil");
    shot(browser, tab, "6-extended", dir).await;
}
