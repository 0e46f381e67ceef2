//! A stranger against the gateway's sign-in through the identity provider, on the real
//! programs (Ory Hydra, kube-apiserver trusting it, the gateway as a process): a callback that
//! is not this browser's own sign-in (login CSRF: someone else's code, a missing or wrong
//! `state`), a code used twice, a return address that would lead off the page, an ID token of
//! another audience or another issuer, and a token in a URL. None signs anybody in, and no token
//! reaches the gateway's log. Each attack has its control beside it: the same step done rightly
//! signs in, so a refusal is the check's and not a broken sign-in's.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod oidc_gateway;

use http::Method;
use myownshell_envtest::oidc::browser::{Browser, Landed};
use myownshell_envtest::oidc::sign_in::log_in;
use myownshell_envtest::oidc::users::{ALICE, BOB, User};
use myownshell_envtest::oidc::{GATEWAY_CLIENT_IDS, shared};
use oidc_gateway::{HOST, PENDING, World, cluster_name, query_value, session_cookie, sign_in_error};
use secrecy::ExposeSecret as _;
use serde_json::json;

/// The words of a refused callback for another sign-in's `state`.
const WRONG_STATE: &str = "state does not match";

impl World<'_> {
    /// A browser of `user` half-way through a sign-in: logged in at the provider, stopped on
    /// its way back; the callback URL it was sent to.
    async fn half_way(&self, user: &User) -> (Browser, String) {
        let mut browser = self.browser(&format!("{}/oidc/callback", self.origin));
        let callback = self.callback_for(&mut browser, user).await;
        (browser, callback)
    }

    /// Who `browser` is signed in as (`None`: nobody).
    async fn who(&self, browser: &Browser) -> Option<String> {
        let cookie = session_cookie(browser)?;
        let (status, body) = self.session(&cookie).await;
        (status == 200).then(|| serde_json::from_str::<serde_json::Value>(&body).unwrap()["user"].to_string())
    }
}

/// `url` with its query parameter `name` set to `value` (or removed, for `None`).
fn with_param(url: &str, name: &str, value: Option<&str>) -> String {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (n, v) in form_urlencoded::parse(query.as_bytes()).filter(|(n, _)| n != name) {
        out.append_pair(&n, &v);
    }
    if let Some(value) = value {
        out.append_pair(name, value);
    }
    format!("{path}?{}", out.finish())
}

#[tokio::test]
async fn a_callback_signs_nobody_in_unless_it_is_this_browsers_own_sign_in() {
    let w = World::start(shared(), "oidc-csrf", &[]).await;

    // Login CSRF: bob's code and state, planted in alice's browser (which has a sign-in of her
    // own under way), would sign her in as bob.
    let (_, bobs) = w.half_way(&BOB).await;
    let (mut alices, _) = w.half_way(&ALICE).await;
    let (url, _, _) = w.follow(&mut alices, &bobs).await;
    assert!(sign_in_error(&url).contains(WRONG_STATE), "{url}");
    assert_eq!(w.who(&alices).await, None, "alice's browser signed in with bob's code");

    // alice's code with the stranger's own sign-in and its state: the code was given for
    // alice's PKCE challenge and nonce, not the stranger's.
    let (alices_browser, alices_callback) = w.half_way(&ALICE).await;
    let mut strangers = w.browser("https://nowhere.invalid/");
    let to_provider = w.gateway.request(Method::GET, "/oidc/login", &[], None).await.unwrap();
    let location = to_provider.1.get("location").unwrap().to_str().unwrap().to_owned();
    let set_cookie = to_provider.1.get("set-cookie").unwrap().to_str().unwrap().to_owned();
    let pending = set_cookie.split(';').next().unwrap().split_once('=').unwrap().1;
    strangers.set_cookie(HOST, PENDING, pending);
    let own_state = query_value(&location, "state").unwrap();
    let (url, _, _) = w.follow(&mut strangers, &with_param(&alices_callback, "state", Some(&own_state))).await;
    let said = sign_in_error(&url);
    assert!(said.starts_with("the identity provider") && said.contains("invalid_grant"), "{said}");
    assert_eq!(w.who(&strangers).await, None, "the stranger signed in with alice's code: {said}");
    drop(alices_browser);

    // A callback without its state, or with another, in the very browser that started it.
    let (mut browser, callback) = w.half_way(&ALICE).await;
    let (url, _, _) = w.follow(&mut browser, &with_param(&callback, "state", None)).await;
    assert!(sign_in_error(&url).contains(WRONG_STATE), "no state: {url}");
    assert_eq!(w.who(&browser).await, None);
    let (mut browser, callback) = w.half_way(&ALICE).await;
    let state = query_value(&callback, "state").unwrap();
    let other = format!("{}x", &state[..state.len() - 1]);
    let (url, _, _) = w.follow(&mut browser, &with_param(&callback, "state", Some(&other))).await;
    assert!(sign_in_error(&url).contains(WRONG_STATE), "another state: {url}");
    assert_eq!(w.who(&browser).await, None);

    // An ID token in place of the code (the implicit flow's answer, which the gateway never
    // asked for): nobody signed in.
    let (mut browser, callback) = w.half_way(&ALICE).await;
    let bed = shared();
    let token = bed.sign_in(&bed.client, BOB.name, BOB.password).await.unwrap().id_token;
    let smuggled = with_param(&with_param(&callback, "code", None), "id_token", Some(token.expose_secret()));
    let (url, _, _) = w.follow(&mut browser, &smuggled).await;
    assert!(sign_in_error(&url).contains("sent no code back"), "{url}");
    assert_eq!(w.who(&browser).await, None);

    // The control: the browser's own callback, untouched, signs its person in.
    let (mut browser, callback) = w.half_way(&BOB).await;
    let (url, status, _) = w.follow(&mut browser, &callback).await;
    assert_eq!((url, status), (format!("{}/", w.origin), 200));
    assert_eq!(w.who(&browser).await, Some(format!("\"{}\"", cluster_name(&BOB))));
    let log = std::fs::read_to_string(&w.gateway.log).unwrap();
    assert!(!log.contains("eyJ") && !log.contains(token.expose_secret()), "a token in the log:\n{log}");
}

#[tokio::test]
async fn a_code_is_taken_once_and_no_return_address_leads_off_the_page() {
    let w = World::start(shared(), "oidc-replay", &[]).await;

    // Whatever the login is given to come back to, the provider is asked to send the person
    // back to the gateway's own callback, and the callback sends them to the page.
    let evil = "https://evil.example/steal";
    let mut login = "/oidc/login".to_owned();
    for name in ["return_to", "returnTo", "next", "redirect", "redirect_uri", "url", "continue"] {
        login = with_param(&login, name, Some(evil));
        login = with_param(&login, &format!("{name}2"), Some("//evil.example/"));
    }
    let (status, headers, _) = w.gateway.request(Method::GET, &login, &[], None).await.unwrap();
    let location = headers.get("location").unwrap().to_str().unwrap().to_owned();
    assert_eq!(status, 303);
    let callback_url = format!("{}/oidc/callback", w.origin);
    assert_eq!(query_value(&location, "redirect_uri").as_deref(), Some(callback_url.as_str()), "{location}");
    assert!(!location.contains("evil"), "{location}");
    let mut browser = w.browser(&callback_url);
    let one = w.provider.one_flow_at_a_time().await;
    let at_provider = browser.get(&format!("{}{login}", w.origin)).await.unwrap();
    let landed = match log_in(&mut browser, at_provider, ALICE.name, ALICE.password).await.unwrap() {
        Landed::Stopped(callback) => callback,
        other => panic!("expected the callback: {other:?}"),
    };
    drop(one);
    let pending = browser.cookie(HOST, PENDING).unwrap().to_owned();
    let elsewhere = with_param(&with_param(&landed, "next", Some(evil)), "return_to", Some("//evil.example/"));
    let (url, status, _) = w.follow(&mut browser, &elsewhere).await;
    assert_eq!((url, status), (format!("{}/", w.origin), 200), "back on the page, nowhere else");
    assert_eq!(w.who(&browser).await, Some(format!("\"{}\"", cluster_name(&ALICE))));

    // The same callback again, with a copy of the pending sign-in's cookie it came back to (a
    // code and a cookie seen in transit): the provider takes a code once.
    let mut copy = w.browser("https://nowhere.invalid/");
    copy.set_cookie(HOST, PENDING, &pending);
    let (url, _, _) = w.follow(&mut copy, &landed).await;
    let said = sign_in_error(&url);
    assert!(said.contains("already used") && said.contains("invalid_grant"), "{said}");
    assert_eq!(w.who(&copy).await, None, "a replayed code signed someone in: {said}");
    // And in the browser that used it: its pending sign-in is over.
    let mut again = w.browser("https://nowhere.invalid/");
    let (url, _, _) = w.follow(&mut again, &landed).await;
    assert!(sign_in_error(&url).contains("started in another browser"), "{url}");
    let code = query_value(&landed, "code").unwrap();
    let log = std::fs::read_to_string(&w.gateway.log).unwrap();
    assert!(!log.contains(&code) && !log.contains("eyJ"), "a code or a token in the log:\n{log}");
}

/// An ES256 JWT for `claims`, signed with a key made here (no issuer the cluster trusts has it).
fn forged(claims: &serde_json::Value) -> String {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let header = json!({ "alg": "ES256", "typ": "JWT", "kid": "forged" });
    let input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
    let signature = key.sign(&rng, input.as_bytes()).unwrap();
    format!("{input}.{}", B64.encode(signature.as_ref()))
}

/// ID tokens naming alice that the cluster must refuse: `(what, token)`.
async fn foreign_tokens() -> Vec<(&'static str, String)> {
    let bed = shared();
    let other = bed.sign_in(&bed.other_audience, ALICE.name, ALICE.password).await.unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = |iss: &str| {
        json!({ "iss": iss, "aud": GATEWAY_CLIENT_IDS[0], "sub": ALICE.name, "groups": ALICE.groups,
                "iat": now, "nbf": now, "exp": now + 600 })
    };
    vec![
        ("another audience", other.id_token.expose_secret().to_owned()),
        ("another issuer", forged(&claims("https://issuer.example"))),
        ("the provider's issuer, another key", forged(&claims(&bed.provider.issuer()))),
    ]
}

#[tokio::test]
async fn a_token_from_elsewhere_or_in_a_url_signs_nobody_in() {
    let w = World::start(shared(), "oidc-tokens", &[]).await;
    let bed = shared();
    let origin = w.origin.as_str();
    // The control: alice's ID token for an audience the cluster takes, as a bearer token.
    let alices = bed.sign_in(&bed.client, ALICE.name, ALICE.password).await.unwrap().id_token;
    let alices = alices.expose_secret().to_owned();
    let bearer = format!("Bearer {alices}");
    let (status, _, body) =
        w.gateway.request(Method::GET, "/api/session", &[("authorization", &bearer)], None).await.unwrap();
    assert!(status == 200 && body.contains(&cluster_name(&ALICE)), "alice's own token: {status} {body}");

    // Another audience's, another issuer's, or the provider's issuer signed with another key:
    // neither a bearer token nor pasted into the sign-in.
    let foreign = foreign_tokens().await;
    for (what, token) in &foreign {
        let bearer = format!("Bearer {token}");
        let (status, _, body) =
            w.gateway.request(Method::GET, "/api/session", &[("authorization", &bearer)], None).await.unwrap();
        assert_eq!(status, 401, "{what} as a bearer token: {body}");
        let pasted = Some(json!({ "token": token }));
        let (status, headers, body) =
            w.gateway.request(Method::POST, "/api/session", &[("origin", origin)], pasted).await.unwrap();
        assert_eq!(status, 401, "{what} pasted: {body}");
        assert!(headers.get("set-cookie").is_none(), "{what} pasted: a cookie");
    }

    // alice's good token in a URL, under any name: never taken, on the API or the terminal.
    for name in ["access_token", "token", "id_token"] {
        let query = format!("{name}={alices}");
        for path in ["/api/session".to_owned(), format!("/api/shells?namespace={}", w.ns)] {
            let path = format!("{path}{}{query}", if path.contains('?') { '&' } else { '?' });
            let (status, _, body) = w.gateway.request(Method::GET, &path, &[], None).await.unwrap();
            assert_eq!(status, 401, "{path}: {body}");
            assert!(!body.contains(&cluster_name(&ALICE)), "{body}");
        }
        let terminal = format!("/api/terminal/{}/web?cols=80&rows=24&{query}", w.ns);
        let refused = w.gateway.websocket(&terminal, &[("origin", origin)]).await.err();
        let refused = refused.unwrap_or_else(|| panic!("a terminal opened for ?{name}="));
        assert!(refused.starts_with("HTTP 401"), "?{name}= on the terminal: {refused}");
    }

    let log = std::fs::read_to_string(&w.gateway.log).unwrap();
    assert!(!log.contains(&alices), "alice's token in the gateway's log:\n{log}");
    for (what, token) in &foreign {
        assert!(!log.contains(token.as_str()), "{what} in the gateway's log");
    }
    assert!(!log.contains("eyJ"), "a token in the gateway's log:\n{log}");
}
