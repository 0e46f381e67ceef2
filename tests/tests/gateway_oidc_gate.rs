//! People signed in through the identity provider at the connect gate, on the real programs:
//! Ory Hydra, kube-apiserver trusting it, the gateway and the gate (`myownshell-webhook`) as
//! processes. bob, signed in by Hydra, is refused alice's shell in the gate's words naming him,
//! until alice shares it with a group the provider says he is in (named as the cluster names
//! it); and a provider that goes down makes a sign-in fail with one sentence on the page while
//! those signed in go on: their sessions, an open terminal, and new terminals' gate decisions.
//!
//! No pod runs on the API-only plane: an exec the gate lets through ends at the apiserver with
//! "does not have a host assigned", as in `tests/tests/gateway.rs`.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod oidc_gateway;

use std::time::Duration;

use http::Method;
use myownshell_envtest::oidc::users::{ALICE, BOB};
use myownshell_envtest::oidc::{TrustingCluster, shared};
use oidc_gateway::{World, cluster_name, next_json, page, refusal, session_cookie, sign_in_error};

/// The gate let the exec through: it then ends at the apiserver for want of a node.
const PAST_THE_GATE: &str = "does not have a host assigned";

#[tokio::test]
async fn bob_is_refused_alices_shell_until_she_shares_it_with_his_providers_group() {
    let w = World::start(shared(), "oidc-gate", &[]).await;
    w.shell(&ALICE, "web").await;
    let pod = w.ready_pod("web").await;
    let (_, alice) = w.sign_in(&ALICE).await;
    let (_, bob) = w.sign_in(&BOB).await;

    // The gate refuses bob by the name the provider gave him, and says who may connect.
    let said = refusal(&w.terminal_messages(&bob, "web").await);
    for words in [cluster_name(&BOB).as_str(), pod.as_str(), "which only its owner", &cluster_name(&ALICE)] {
        assert!(said.contains(words), "bob's refusal lacks {words:?}: {said}");
    }
    // alice, its owner, is let through.
    let said = refusal(&w.terminal_messages(&alice, "web").await);
    assert!(said.contains(PAST_THE_GATE), "alice was not let through: {said}\n{}", w.gateway.log_tail());

    // Shared with `admins`, the provider's own word for bob's group: not the cluster's name for
    // it (`oidc:admins`), so bob is still refused.
    w.share_with_groups(&ALICE, "web", &["admins"]).await;
    let said = refusal(&w.terminal_messages(&bob, "web").await);
    assert!(said.contains(&format!("{} may not exec", cluster_name(&BOB))), "{said}");

    // Shared with `oidc:admins`, the group the apiserver names from his ID token's `groups`:
    // bob is let through (the change takes effect for the next connection).
    w.share_with_groups(&ALICE, "web", &["oidc:admins"]).await;
    let said = refusal(&w.terminal_messages(&bob, "web").await);
    assert!(said.contains(PAST_THE_GATE), "bob was not let through: {said}\n{}", w.gateway.log_tail());
}

/// The test bed's Hydra, stopped (this test has a test bed of its own: the shared one must stay
/// up for the other tests), and seen gone: its issuer refuses connections.
async fn provider_down(bed: &TrustingCluster) {
    bed.provider.stop().unwrap();
    let issuer = bed.provider.issuer();
    let address = issuer.trim_start_matches("https://").to_owned();
    myownshell_envtest::eventually("Hydra's port to refuse connections", Duration::from_secs(10), || async {
        match tokio::net::TcpStream::connect(&address).await {
            Err(_) => Ok(()),
            Ok(_) => Err(format!("{issuer} still takes connections")),
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn with_the_provider_down_a_sign_in_says_so_and_those_signed_in_go_on() {
    let bed = TrustingCluster::start().await.unwrap();
    // ID tokens of 5 minutes, under the gateway's 10 minutes' margin: every request of a
    // session is one that renews it, so each one below asks the provider that is down. A
    // terminal may wait for its shell's pod long enough for the provider to go down meanwhile.
    let lifespan = Some(Duration::from_secs(300));
    let w = World::start_with(&bed, "oidc-down", &["--connect-timeout=120s"], lifespan).await;
    w.shell(&ALICE, "web").await;
    let (_, alice) = w.sign_in(&ALICE).await;
    let (_, bob) = w.sign_in(&BOB).await;
    // alice's terminal, open and waiting for the shell's pod.
    let mut open = w.terminal(&alice, "web").await;
    let first = next_json(&mut open, Duration::from_secs(30)).await;
    let waiting = first.as_ref().and_then(|m| m["message"].as_str()).unwrap_or_default().to_owned();
    assert!(waiting.starts_with("waiting for shell web"), "{first:?}");
    // bob's second browser is half-way: logged in at the provider, on his way
    // back with a code.
    let mut late = w.browser(&format!("{}/oidc/callback", w.origin));
    let callback = w.callback_for(&mut late, &BOB).await;

    provider_down(&bed).await;

    // The callback cannot trade its code: the page says so in one sentence, nobody signed in.
    let (url, _, _) = page(late.get(&callback).await.unwrap());
    let said = sign_in_error(&url);
    assert!(said.starts_with("the identity provider cannot be reached: "), "{said}");
    assert!(!said.contains('\n') && said.len() < 400, "one sentence: {said:?}");
    assert!(session_cookie(&late).is_none(), "a session without the provider");
    eprintln!("the page says: {said}");

    // A new sign-in with the provider down: the page says so, rather than the browser's error
    // page at the provider's address.
    let mut fresh = w.browser(&bed.provider.issuer());
    let (url, status, _) = page(fresh.get(&format!("{}/oidc/login", w.origin)).await.unwrap());
    let said = sign_in_error(&url);
    assert!(status == 200 && said.starts_with("the identity provider cannot be reached: "), "{status} {url}");
    assert!(said.contains("Connection refused"), "why, not only hyper's summary: {said}");

    // Those signed in go on: their sessions, the shells they may see.
    let (status, body) = w.session(&alice).await;
    assert_eq!(status, 200, "alice's session: {body}");
    let shells = format!("/api/shells?namespace={}", w.ns);
    let (status, _, body) = w.gateway.request(Method::GET, &shells, &[("cookie", &bob)], None).await.unwrap();
    assert!(status == 200 && body.contains("\"name\":\"web\""), "bob's list: {status} {body}");

    // alice's open terminal goes on: once the pod is ready it is let through the gate on the
    // same socket, opened before the provider went down.
    let pod = w.ready_pod("web").await;
    let mut seen = Vec::new();
    while let Some(message) = next_json(&mut open, Duration::from_secs(30)).await {
        seen.push(message);
    }
    assert!(refusal(&seen).contains(PAST_THE_GATE), "alice's open terminal: {seen:?}\n{}", w.gateway.log_tail());
    // New terminals are still decided by the gate: bob's refused by name, alice's let through.
    let said = refusal(&w.terminal_messages(&bob, "web").await);
    assert!(said.contains(&cluster_name(&BOB)) && said.contains(&pod), "{said}");
    let said = refusal(&w.terminal_messages(&alice, "web").await);
    assert!(said.contains(PAST_THE_GATE), "{said}");
    let log = std::fs::read_to_string(&w.gateway.log).unwrap();
    assert!(!log.contains("eyJ"), "the gateway's log holds a token:\n{log}");
}
