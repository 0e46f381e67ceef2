//! The gateway's sign-in through an identity provider, on the real programs: Ory Hydra with the
//! test bed's login page, the gateway as a process with `--oidc-*`, and kube-apiserver trusting
//! Hydra. A browser that clicks "Sign in with your identity provider" comes back signed in as
//! the user the apiserver names; a callback that is not the browser's own, or that the person
//! declined, signs nobody in and says why in one sentence; the gateway's log holds no token.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use http::Method;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Subject};
use kube::api::{Api, Patch, PatchParams};
use myownshell_envtest::control_plane::write_kubeconfig;
use myownshell_envtest::oidc::apiserver::{GROUPS_PREFIX, USERNAME_PREFIX};
use myownshell_envtest::oidc::browser::{Browser, Landed};
use myownshell_envtest::oidc::sign_in::log_in;
use myownshell_envtest::oidc::users::{ALICE, USERS_GROUP};
use myownshell_envtest::oidc::{TrustingCluster, shared};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::rbac;
use myownshell_tests::gateway::GatewayProcess;

/// The gateway's own identity: it asks TokenReview (`system:auth-delegator`), nothing more here.
const GATEWAY_USER: &str = "myownshell-oidc-gateway";
/// How long the provider's ID tokens for the gateway live.
const ID_TOKEN_LIFESPAN: Duration = Duration::from_secs(15);

/// A gateway signing people in through the test bed's provider, and where its files are.
struct Signing {
    gateway: GatewayProcess,
    origin: String,
    _files: tempfile::TempDir,
}

async fn gateway(bed: &TrustingCluster) -> Signing {
    let cp = &bed.control_plane;
    let subject = Subject {
        kind: "User".into(),
        name: GATEWAY_USER.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        namespace: None,
    };
    let binding = rbac::cluster_role_binding(GATEWAY_USER, "system:auth-delegator", subject);
    Api::<ClusterRoleBinding>::all(cp.client().unwrap())
        .patch(GATEWAY_USER, &PatchParams::apply("myownshell-tests").force(), &Patch::Apply(&binding))
        .await
        .unwrap();
    let files = tempfile::tempdir().unwrap();
    let kubeconfig = files.path().join("gateway.kubeconfig");
    write_kubeconfig(&kubeconfig, &cp.kubeconfig_for_user(GATEWAY_USER, &[]).unwrap()).unwrap();
    let port = free_port().unwrap();
    let origin = format!("https://127.0.0.1:{port}");
    // Short-lived ID tokens: the test sees a session outlive its first one by renewals.
    let mut flags = bed.provider.register_gateway(files.path(), &origin, Some(ID_TOKEN_LIFESPAN)).await.unwrap();
    flags.push(format!("--allowed-origins={origin}"));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let gateway = GatewayProcess::start_on(cp, kubeconfig, "oidc-gateway", port, &flags).await.unwrap();
    Signing { gateway, origin, _files: files }
}

/// Where a navigation landed: its URL and status, and its body.
fn page(landed: Landed) -> (String, u16, String) {
    match landed {
        Landed::Page(url, response) => (url, response.status, response.text()),
        Landed::Stopped(url) => panic!("stopped at {url}"),
    }
}

/// The first text message of a terminal's socket.
async fn first_text<S>(socket: &mut tokio_tungstenite::WebSocketStream<S>) -> String
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures::StreamExt as _;
    let deadline = Duration::from_secs(30);
    loop {
        match tokio::time::timeout(deadline, socket.next()).await {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text)))) => return text.to_string(),
            Ok(Some(Ok(_))) => continue,
            other => panic!("no text from the terminal in {deadline:?}: {other:?}"),
        }
    }
}

/// The sentence the page is sent back with after a failed sign-in.
fn sign_in_error(url: &str) -> String {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "sign-in-error")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_else(|| panic!("{url} says no sign-in error"))
}

#[tokio::test]
async fn a_person_signs_in_through_the_provider_as_the_user_the_apiserver_names() {
    let bed = shared();
    let Signing { gateway, origin, _files } = gateway(bed).await;
    let tls = myownshell_tests::tls_client::trusting(&[bed.provider.ca_pem(), &gateway.ca_pem()]).unwrap();

    // The page is told where to sign in.
    let (status, _, body) = gateway.request(Method::GET, "/api/session", &[], None).await.unwrap();
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, answer["signIn"].as_str()), (401, Some("/oidc/login")), "{body}");

    // Sign in: off to the provider, the login form, back through the callback to the page.
    let mut browser = Browser::new(tls.clone(), "https://nowhere.invalid/");
    let at_provider = browser.get(&format!("{origin}/oidc/login")).await.unwrap();
    let (url, status, _) = page(log_in(&mut browser, at_provider, ALICE.name, ALICE.password).await.unwrap());
    assert_eq!((url.as_str(), status), (format!("{origin}/").as_str(), 200), "back on the page, signed in");
    let (_, status, body) = page(browser.get(&format!("{origin}/api/session")).await.unwrap());
    assert_eq!(status, 200, "{body}\n{}", gateway.log_tail());
    let who: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(who["user"], format!("{USERNAME_PREFIX}{}", ALICE.name), "the apiserver's name for her: {body}");
    let groups: Vec<&str> = who["groups"].as_array().unwrap().iter().filter_map(|g| g.as_str()).collect();
    assert!(groups.contains(&format!("{GROUPS_PREFIX}{USERS_GROUP}").as_str()), "{groups:?}");

    // A callback this browser did not start signs nobody in: the link of alice's next sign-in,
    // opened in another browser (no pending sign-in there), and with another state in hers.
    let mut alices = Browser::new(tls.clone(), &format!("{origin}/oidc/callback"));
    let at_provider = alices.get(&format!("{origin}/oidc/login")).await.unwrap();
    let callback = match log_in(&mut alices, at_provider, ALICE.name, ALICE.password).await.unwrap() {
        Landed::Stopped(callback) => callback,
        Landed::Page(url, response) => panic!("expected the callback, landed at {url}: {}", response.status),
    };
    let mut elsewhere = Browser::new(tls.clone(), "https://nowhere.invalid/");
    let (url, _, _) = page(elsewhere.get(&callback).await.unwrap());
    assert!(sign_in_error(&url).contains("started in another browser"), "{url}");
    let forged = callback.replace("state=", "state=x");
    let (url, _, _) = page(alices.get(&forged).await.unwrap());
    assert!(sign_in_error(&url).contains("state does not match"), "{url}");
    let (_, status, _) = page(elsewhere.get(&format!("{origin}/api/session")).await.unwrap());
    assert_eq!(status, 401, "the other browser is not signed in");

    // Declined at the provider: said in one sentence.
    let mut declining = Browser::new(tls.clone(), &bed.provider.issuer());
    let authorize = match declining.get(&format!("{origin}/oidc/login")).await.unwrap() {
        Landed::Stopped(url) => url,
        Landed::Page(url, _) => panic!("expected a redirect to the provider, landed at {url}"),
    };
    let query = authorize.split_once('?').unwrap().1;
    let state = form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == "state").unwrap().1.into_owned();
    let declined = format!(
        "{origin}/oidc/callback?error=access_denied&error_description=The+resource+owner+denied+the+request&state={state}"
    );
    let (url, _, _) = page(declining.get(&declined).await.unwrap());
    assert_eq!(
        sign_in_error(&url),
        "the identity provider: the sign-in was declined at the identity provider (access_denied: The resource \
         owner denied the request)"
    );

    // The session outlives its first ID token: the gateway renews it with the refresh token
    // whenever the page asks who is signed in, and a terminal opened after the first token
    // expired is checked with the renewed one.
    // The page asks every 2 s here (every few minutes in life) until the first token is past
    // its expiry: a wait for the clock, not for a state.
    let signed_in_at = Instant::now();
    let host = "127.0.0.1";
    while signed_in_at.elapsed() < ID_TOKEN_LIFESPAN + Duration::from_secs(5) {
        let (_, status, body) = page(browser.get(&format!("{origin}/api/session")).await.unwrap());
        assert_eq!(status, 200, "{body}\n{}", gateway.log_tail());
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let cookie = format!("__Host-myownshell-session={}", browser.cookie(host, "__Host-myownshell-session").unwrap());
    let mut terminal = gateway
        .websocket("/api/terminal/default/no-such-shell", &[("origin", &origin), ("cookie", &cookie)])
        .await
        .unwrap_or_else(|e| panic!("a terminal after the first ID token expired: {e}\n{}", gateway.log_tail()));
    // Past sign-in, the terminal is opened for her (this gateway may not impersonate anyone, so
    // it goes no further): the renewed token was taken.
    let said = first_text(&mut terminal).await;
    assert!(said.contains("oidc:alice") && !said.contains("sign in"), "the terminal said: {said}");

    // Signing out ends the session (and revokes its refresh token at the provider).
    let (_, _, body) = page(browser.get(&format!("{origin}/api/session")).await.unwrap());
    let csrf = serde_json::from_str::<serde_json::Value>(&body).unwrap()["csrf"].as_str().unwrap().to_owned();
    let cookie = format!("__Host-myownshell-session={}", browser.cookie(host, "__Host-myownshell-session").unwrap());
    let headers = [("origin", origin.as_str()), ("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str())];
    let (status, _, body) = gateway.request(Method::DELETE, "/api/session", &headers, None).await.unwrap();
    assert_eq!(status, 204, "{body}");
    let (status, _, _) = gateway.request(Method::GET, "/api/session", &[("cookie", &cookie)], None).await.unwrap();
    assert_eq!(status, 401, "the signed-out cookie is no session");

    // No token, code or secret in the gateway's log.
    let log = std::fs::read_to_string(&gateway.log).unwrap();
    let code = form_urlencoded::parse(callback.split_once('?').unwrap().1.as_bytes())
        .find(|(n, _)| n == "code")
        .unwrap()
        .1
        .into_owned();
    assert!(!log.contains("eyJ") && !log.contains(&code), "the gateway's log holds a token or a code:\n{log}");
    assert!(log.contains("signed in through the identity provider"), "{log}");
    assert!(!log.contains("could not be revoked"), "{log}");
}
