//! The page without kubectl, in Chromium against the deployed gateway and real shells on the
//! node: a person with no class granted reads why they cannot create a shell; a new user with
//! only the page creates a shell from the default class (its description and home size as the
//! form), waits for it (the list is live: no reload), opens it and writes a file in `$HOME`,
//! stops it, starts it again and finds the file, extends it, and deletes it; and an axe-style
//! check of the page's labels, roles, names and contrast, listing what it checked.

use myownshell_tests::browser::{Browser, Tab};
use serde_json::Value;

use super::gateway_browser::{artifacts, run, screen, shot, sign_in, type_line, until};
use super::{E2e, gateway};

const ROW_STATE: &str = "document.querySelector('[data-row=\"{key}\"] [data-state]')?.dataset.state ?? 'none'";

fn class(name: &str, default: bool) -> String {
    let annotations = if default { "\n  annotations: {myownshell.io/is-default-class: \"true\"}" } else { "" };
    format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShellClass\nmetadata:\n  name: {name}{annotations}\nspec:\n  \
         description: {name} shells for the page's test\n  home: {{defaultSize: 64Mi}}\n  lifetime: {{idleTimeout: 1h}}\n"
    )
}

async fn state_is(browser: &mut Browser, tab: &Tab, key: &str, want: &str) {
    let js = ROW_STATE.replace("{key}", key);
    until(browser, tab, &format!("{key} {want} on the page"), &js, |v| v == want).await;
}

async fn press(browser: &mut Browser, tab: &Tab, key: &str, action: &str) {
    let js = format!(
        "(() => {{ const b = [...document.querySelectorAll('#shell-rows button')].find((b) => b.dataset.key === '{key}' \
         && b.dataset.action === '{action}'); if (!b) return false; b.click(); return true; }})()"
    );
    until(browser, tab, &format!("the {action} button of {key}"), &js, |v| v == true).await;
}

/// Open the shell from its row and run `line`; wait for `seen` on the screen; back to the list.
async fn in_terminal(browser: &mut Browser, tab: &Tab, key: &str, line: &str, seen: &str) {
    press(browser, tab, key, "open").await;
    until(browser, tab, "the terminal attached", "window.myownshell.status()", |v| {
        v.as_str().is_some_and(|s| s.starts_with("started session ") || s.starts_with("connected to pod "))
    })
    .await;
    type_line(browser, tab, line).await;
    screen(browser, tab, &format!("{seen:?} after {line:?}"), |s| s.lines().any(|l| l.trim() == seen)).await;
    browser.evaluate(tab, "document.getElementById('back').click(); true").await.unwrap();
    until(browser, tab, "back to the list", "!document.getElementById('shells').hidden", |v| v == true).await;
}

/// What an axe-style check looks at, each a rule and the elements that break it.
const ACCESSIBILITY: &str = include_str!("page_accessibility.js");

/// The phase.
pub async fn without_kubectl(e2e: &E2e) {
    let (_forward, port) = gateway::port_forward(e2e).await;
    let url = format!("https://127.0.0.1:{port}");
    let ns = e2e.namespace("e2e-page").await;
    let kubectl = &e2e.kubectl;
    for who in ["dana", "erin"] {
        run(kubectl, &["create", "serviceaccount", who, "-n", &ns]).await;
        let subject = format!("--serviceaccount={ns}:{who}");
        run(kubectl, &["create", "rolebinding", &format!("{who}-edit"), "--clusterrole=edit", &subject, "-n", &ns])
            .await;
    }
    let token = |who: &'static str| {
        let ns = ns.clone();
        async move { run(kubectl, &["create", "token", who, "-n", &ns]).await.trim().to_owned() }
    };
    let dir = artifacts();
    let mut browser = Browser::launch().await.unwrap();
    let tab = browser.new_tab().await.unwrap();

    // Only a class nobody granted: erin reads why, and gets no form.
    kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&class("e2e-page-gpu", false))).await.unwrap().ok().unwrap();
    sign_in(&mut browser, &tab, &url, &token("erin").await, &format!("system:serviceaccount:{ns}:erin")).await;
    let why = "document.getElementById('create-why').hidden ? '' : document.getElementById('create-why').textContent";
    let why = until(&mut browser, &tab, "why no class", why, |v| v.as_str().is_some_and(|s| !s.is_empty())).await;
    assert!(why.as_str().is_some_and(|s| s.contains("No shell class") && s.contains(&ns)), "{why}");
    shot(&mut browser, &tab, "page-1-no-class", &dir).await;

    // A default class: dana creates, opens, stops, starts, extends and deletes from the page.
    kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&class("e2e-page", true))).await.unwrap().ok().unwrap();
    sign_in(&mut browser, &tab, &url, &token("dana").await, &format!("system:serviceaccount:{ns}:dana")).await;
    let offered = "document.getElementById('create-class').selectedOptions[0]?.textContent + ' | ' + \
                   document.getElementById('class-description').textContent";
    until(&mut browser, &tab, "the default class as the form", offered, |v| {
        v.as_str().is_some_and(|s| s.starts_with("e2e-page (default)") && s.contains("e2e-page shells for the page"))
    })
    .await;
    let fill = format!(
        "document.getElementById('create-namespace').value = '{ns}'; document.getElementById('create-name').value = \
         'mine'; document.getElementById('create-home').checked = true; \
         document.getElementById('create-button').click(); true"
    );
    browser.evaluate(&tab, &fill).await.unwrap();
    let key = format!("{ns}/mine");
    state_is(&mut browser, &tab, &key, "Running").await;
    shot(&mut browser, &tab, "page-2-created", &dir).await;
    in_terminal(&mut browser, &tab, &key, "echo kept > ~/kept.txt && echo written-$?", "written-0").await;

    press(&mut browser, &tab, &key, "stop").await;
    state_is(&mut browser, &tab, &key, "Stopped").await;
    shot(&mut browser, &tab, "page-3-stopped", &dir).await;
    press(&mut browser, &tab, &key, "start").await;
    state_is(&mut browser, &tab, &key, "Running").await;
    in_terminal(&mut browser, &tab, &key, "cat ~/kept.txt", "kept").await;

    press(&mut browser, &tab, &key, "extend").await;
    let said = "document.getElementById('shells-status').textContent + ' | ' + \
                document.getElementById('shells-error').textContent";
    until(&mut browser, &tab, "extended", said, |v| v.as_str().is_some_and(|s| s.contains("no stop before"))).await;
    let extended =
        run(kubectl, &["get", "mos", "mine", "-n", &ns, "-o", "jsonpath={.spec.lifetime.extendedUntil}"]).await;
    assert!(!extended.is_empty(), "Extend wrote spec.lifetime.extendedUntil");

    let checked: Value = until(&mut browser, &tab, "the accessibility check", ACCESSIBILITY, |v| v.is_object()).await;
    eprintln!("e2e: page: accessibility: checked {}", checked["checked"]);
    assert_eq!(checked["failures"], serde_json::json!([]), "{checked}");

    press(&mut browser, &tab, &key, "delete").await;
    press(&mut browser, &tab, &key, "delete").await;
    state_is(&mut browser, &tab, &key, "none").await;
    shot(&mut browser, &tab, "page-4-deleted", &dir).await;
    run(kubectl, &["delete", "mosc", "e2e-page", "e2e-page-gpu"]).await;
    run(kubectl, &["delete", "namespace", &ns, "--wait=false"]).await;
}
