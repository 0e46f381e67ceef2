//! The auth layer in process (`SecureServer` / `serve_secure_metrics`), against the real
//! kube-apiserver: real ServiceAccount tokens, real TokenReview, real RBAC.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use http::StatusCode;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use myownshell_auth::config::ProxyConfig;
use myownshell_auth::{
    AuthOptions, ReviewCounts, SecureServer, SecureServingOptions, ServeError, TlsFiles, serve_secure_metrics,
};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{create_namespace, eventually, service_account_token, service_account_user, shared};
use myownshell_tests::rbac_proxy::*;
use myownshell_tests::tokens::forge_service_account_token;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(300);
/// Slack for "the cache entry has expired, so the next poll sees the new answer".
const SLACK: Duration = Duration::from_secs(3);

fn assert_unauthorized(reply: &Reply, secret: &str, case: &str) {
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{case}: {}", reply.text());
    assert_eq!(reply.headers.get("www-authenticate").map(|v| v.to_str().unwrap()), Some("Bearer"), "{case}");
    assert!(secret.is_empty() || !reply.text().contains(secret), "{case}: the body echoes the token");
}

#[tokio::test]
async fn missing_garbage_forged_and_foreign_tokens_get_401() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-401").await.unwrap();
    let server = MetricsServer::start(admin.clone(), auth_options(LONG, LONG, LONG), None).await;
    let valid = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let foreign =
        service_account_token(&admin, &ns, "scraper", &["https://another-cluster.example"], 600).await.unwrap();
    let forged = format!("{valid}x");

    let no_token = server.get("/metrics", None).await;
    assert_unauthorized(&no_token, "", "no token");
    for (token, case) in
        [("garbage", "garbage"), (forged.as_str(), "forged signature"), (foreign.as_str(), "other audience")]
    {
        assert_unauthorized(&server.get("/metrics", Some(token)).await, token, case);
    }
    let basic = server.https.get_with(server.addr, "/metrics", None, &[("authorization", "Basic YWRtaW46YWRtaW4=")]);
    assert_unauthorized(&basic.await.unwrap(), "YWRtaW46YWRtaW4=", "basic auth");
    // The valid token is authenticated: without RBAC it is a 403, not a 401.
    assert_eq!(server.get("/metrics", Some(&valid)).await.status, StatusCode::FORBIDDEN);
    server.stop().await;
}

#[tokio::test]
async fn configured_audiences_are_required() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-audience").await.unwrap();
    let audience = "https://metrics.myownshell.example";
    let options = AuthOptions { token_audiences: vec![audience.into()], ..auth_options(LONG, LONG, LONG) };
    let server = MetricsServer::start(admin.clone(), options, None).await;
    let for_us = service_account_token(&admin, &ns, "scraper", &[audience], 600).await.unwrap();
    let for_apiserver = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    assert_eq!(server.get("/metrics", Some(&for_us)).await.status, StatusCode::FORBIDDEN, "authenticated, no RBAC");
    assert_unauthorized(&server.get("/metrics", Some(&for_apiserver)).await, &for_apiserver, "apiserver audience");
    server.stop().await;
}

#[tokio::test]
async fn rbac_decides_between_403_and_200_with_the_real_body() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-rbac").await.unwrap();
    let server = MetricsServer::start(admin.clone(), auth_options(LONG, LONG, Duration::from_millis(200)), None).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let user = service_account_user(&ns, "scraper");

    let denied = server.get("/metrics", Some(&token)).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.text());
    let body = denied.text();
    assert!(body.contains(&user) && body.contains(r#"get non-resource URL "/metrics""#), "{body}");
    assert!(!body.contains(&token), "the 403 body echoes the token");

    let role = format!("{ns}-metrics-reader");
    create_reader_role(&admin, &role, &["/metrics", "/whoami"]).await;
    bind_cluster_role(&admin, &role, &role, service_account_subject(&ns, "scraper")).await;
    wait_for_rbac(&admin, &user, &[], "/metrics", true).await;

    let ok = eventually("/metrics to answer 200", TIMEOUT, || async {
        let reply = server.https.get(server.addr, "/metrics", Some(&token)).await?;
        if reply.status == StatusCode::OK { Ok(reply) } else { Err(format!("{} {}", reply.status, reply.text())) }
    })
    .await
    .unwrap();
    assert_eq!(ok.text(), METRICS_BODY);
    // The handler behind the layer sees who called.
    let whoami = server.get("/whoami", Some(&token)).await;
    assert_eq!(whoami.status, StatusCode::OK);
    assert!(whoami.text().starts_with(&format!("{user} BearerToken ")), "{}", whoami.text());
    assert!(whoami.text().contains("system:serviceaccounts"), "{}", whoami.text());
    // A path nobody is granted is still refused for the same user.
    assert_eq!(server.get("/debug/pprof", Some(&token)).await.status, StatusCode::FORBIDDEN);
    server.stop().await;
}

/// A token bound to a Secret, from the TokenRequest API.
async fn bound_token(admin: &kube::Client, ns: &str, sa: &str, secret: &Secret) -> String {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(600),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Secret".into()),
                name: secret.metadata.name.clone(),
                uid: secret.metadata.uid.clone(),
            }),
        },
        ..TokenRequest::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    api.create_token_request(sa, &PostParams::default(), &request).await.unwrap().status.unwrap().token
}

#[tokio::test]
async fn tokens_stop_working_when_their_bound_object_or_account_is_deleted() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-revoked").await.unwrap();
    // Short authentication TTL: the revocation must show once the cached "authenticated" ends.
    let authn_ttl = Duration::from_secs(1);
    let server = MetricsServer::start(admin.clone(), auth_options(authn_ttl, LONG, LONG), None).await;

    let plain = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let anchor =
        Secret { metadata: ObjectMeta { name: Some("anchor".into()), ..ObjectMeta::default() }, ..Secret::default() };
    let anchor = secrets.create(&PostParams::default(), &anchor).await.unwrap();
    let bound = bound_token(&admin, &ns, "scraper", &anchor).await;
    for token in [&plain, &bound] {
        assert_eq!(server.get("/metrics", Some(token)).await.status, StatusCode::FORBIDDEN, "authenticated, no RBAC");
    }

    // kube-apiserver caches token authentication itself (10 s), so this takes about that long.
    secrets.delete("anchor", &DeleteParams::default()).await.unwrap();
    server
        .https
        .wait_for_status(
            server.addr,
            Some(&bound),
            StatusCode::UNAUTHORIZED,
            "the token bound to the deleted Secret to be refused",
        )
        .await;
    // The account's unbound token still authenticates until the account itself goes.
    assert_eq!(server.get("/metrics", Some(&plain)).await.status, StatusCode::FORBIDDEN);
    Api::<ServiceAccount>::namespaced(admin.clone(), &ns).delete("scraper", &DeleteParams::default()).await.unwrap();
    server
        .https
        .wait_for_status(
            server.addr,
            Some(&plain),
            StatusCode::UNAUTHORIZED,
            "the deleted account's token to be refused",
        )
        .await;
    server.stop().await;
}

/// Poll until `path` answers `want`; return when that answer was first seen.
async fn first_seen(server: &MetricsServer, token: &str, want: StatusCode, other: StatusCode) -> Instant {
    eventually(&format!("/metrics to turn {want}"), TIMEOUT, || async {
        let status = server.https.status(server.addr, "/metrics", Some(token)).await?;
        match status {
            s if s == want => Ok(Instant::now()),
            s if s == other => Err(format!("still {s}")),
            s => panic!("unexpected {s} while waiting for {want}"),
        }
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_removed_binding_still_allows_until_the_cached_allow_expires() {
    let allow_ttl = Duration::from_secs(6);
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-allow-ttl").await.unwrap();
    let server =
        MetricsServer::start(admin.clone(), auth_options(LONG, allow_ttl, Duration::from_millis(100)), None).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let user = service_account_user(&ns, "scraper");
    let role = format!("{ns}-metrics-reader");
    create_reader_role(&admin, &role, &["/metrics"]).await;
    bind_cluster_role(&admin, &role, &role, service_account_subject(&ns, "scraper")).await;
    wait_for_rbac(&admin, &user, &[], "/metrics", true).await;

    // The first request makes the one SubjectAccessReview whose "allow" gets cached.
    let asked_at = Instant::now();
    assert_eq!(server.get("/metrics", Some(&token)).await.status, StatusCode::OK);
    let answered_at = Instant::now();
    let reviews = server.auth.counts().subject_access_reviews;
    assert_eq!(reviews, 1);

    delete_cluster_role_binding(&admin, &role).await;
    wait_for_rbac(&admin, &user, &[], "/metrics", false).await;
    assert!(
        asked_at.elapsed() < allow_ttl,
        "RBAC took {:?} to drop the binding, longer than the allow TTL {allow_ttl:?}: the cached edge cannot be observed",
        asked_at.elapsed()
    );
    // Edge 1: RBAC already says no, the cached allow still answers.
    assert_eq!(server.get("/metrics", Some(&token)).await.status, StatusCode::OK, "cached allow");
    assert_eq!(server.auth.counts().subject_access_reviews, reviews, "served from the cache");

    // Edge 2: once the allow TTL has run out, the next request is reviewed again and denied.
    let denied_at = first_seen(&server, &token, StatusCode::FORBIDDEN, StatusCode::OK).await;
    assert!(denied_at >= asked_at + allow_ttl, "denied after {:?}, before the allow TTL", denied_at - asked_at);
    assert!(denied_at <= answered_at + allow_ttl + SLACK, "still allowed {:?} after caching", denied_at - answered_at);
    server.stop().await;
}

#[tokio::test]
async fn a_cached_denial_turns_into_200_after_a_binding_and_the_deny_ttl() {
    let deny_ttl = Duration::from_secs(5);
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-deny-ttl").await.unwrap();
    let server = MetricsServer::start(admin.clone(), auth_options(LONG, LONG, deny_ttl), None).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let user = service_account_user(&ns, "scraper");

    let asked_at = Instant::now();
    assert_eq!(server.get("/metrics", Some(&token)).await.status, StatusCode::FORBIDDEN);
    let answered_at = Instant::now();
    assert_eq!(server.auth.counts().subject_access_reviews, 1);

    let role = format!("{ns}-metrics-reader");
    create_reader_role(&admin, &role, &["/metrics"]).await;
    bind_cluster_role(&admin, &role, &role, service_account_subject(&ns, "scraper")).await;
    wait_for_rbac(&admin, &user, &[], "/metrics", true).await;
    assert!(asked_at.elapsed() < deny_ttl, "RBAC took {:?} to see the binding", asked_at.elapsed());
    assert_eq!(server.get("/metrics", Some(&token)).await.status, StatusCode::FORBIDDEN, "cached denial");
    assert_eq!(server.auth.counts().subject_access_reviews, 1, "served from the cache");

    let allowed_at = first_seen(&server, &token, StatusCode::OK, StatusCode::FORBIDDEN).await;
    assert!(allowed_at >= asked_at + deny_ttl, "allowed after {:?}, before the deny TTL", allowed_at - asked_at);
    assert!(allowed_at <= answered_at + deny_ttl + SLACK, "still denied {:?} after caching", allowed_at - answered_at);
    server.stop().await;
}

#[tokio::test]
async fn steady_state_scrapes_make_no_api_calls() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-counting").await.unwrap();
    // The production defaults (2 min / 5 min / 30 s).
    let server = MetricsServer::start(admin.clone(), AuthOptions::default(), None).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let user = service_account_user(&ns, "scraper");
    let role = format!("{ns}-metrics-reader");
    create_reader_role(&admin, &role, &["/metrics"]).await;
    bind_cluster_role(&admin, &role, &role, service_account_subject(&ns, "scraper")).await;
    wait_for_rbac(&admin, &user, &[], "/metrics", true).await;

    assert_eq!(server.auth.counts(), ReviewCounts::default());
    assert_eq!(server.get("/metrics", Some(&token)).await.status, StatusCode::OK);
    let warm = ReviewCounts { token_reviews: 1, subject_access_reviews: 1 };
    assert_eq!(server.auth.counts(), warm);
    for scrape in 0..25 {
        let reply = server.get("/metrics", Some(&token)).await;
        assert_eq!(reply.status, StatusCode::OK, "scrape {scrape}");
        assert_eq!(reply.text(), METRICS_BODY);
    }
    assert_eq!(server.auth.counts(), warm, "steady-state scrapes called the API");

    // A burst of concurrent requests with a new token of the same account costs one review of
    // each kind: the token is new, and so is its identity (kube-apiserver puts the token's
    // credential id into the user's `extra`, which the SubjectAccessReview carries).
    let fresh = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let burst = (0..16).map(|_| server.https.status(server.addr, "/metrics", Some(&fresh)));
    for status in futures::future::join_all(burst).await {
        assert_eq!(status.unwrap(), StatusCode::OK);
    }
    assert_eq!(server.auth.counts(), ReviewCounts { token_reviews: 2, subject_access_reviews: 2 });
    server.stop().await;
}

#[tokio::test]
async fn client_certificates_from_the_configured_ca_are_checked_before_tokens() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-mtls").await.unwrap();
    let trusted = ClientPki::new("rbac-proxy-test-client-ca");
    let stranger = ClientPki::new("some-other-ca");
    let server = MetricsServer::start(
        admin.clone(),
        auth_options(LONG, LONG, Duration::from_millis(200)),
        Some(trusted.ca_file.clone()),
    )
    .await;
    let user = format!("{ns}-alice");
    let with_cert = Https::with_client_cert(server.pki.ca_pem(), &trusted.client_cert(&user, &["metrics-team"]));

    let denied = with_cert.get(server.addr, "/metrics", None).await.unwrap();
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.text());
    assert!(denied.text().contains(&user), "{}", denied.text());
    // The certificate decides before any token: a garbage token does not turn this into a 401.
    assert_eq!(with_cert.get(server.addr, "/metrics", Some("garbage")).await.unwrap().status, StatusCode::FORBIDDEN);

    let role = format!("{ns}-metrics-reader");
    create_reader_role(&admin, &role, &["/metrics", "/whoami"]).await;
    bind_cluster_role(&admin, &role, &role, user_subject(&user)).await;
    wait_for_rbac(&admin, &user, &["metrics-team"], "/metrics", true).await;
    with_cert.wait_for_status(server.addr, None, StatusCode::OK, "the certificate user to get 200").await;
    let whoami = with_cert.get(server.addr, "/whoami", None).await.unwrap().text();
    assert_eq!(whoami, format!("{user} ClientCertificate metrics-team"));

    // A certificate from another CA never gets an HTTP answer.
    let foreign = Https::with_client_cert(server.pki.ca_pem(), &stranger.client_cert(&user, &[]));
    let refused = foreign.get(server.addr, "/metrics", None).await;
    assert!(refused.is_err(), "a foreign client certificate got an answer: {refused:?}");
    // Callers without a certificate still authenticate with tokens.
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    assert_eq!(server.get("/metrics", Some(&token)).await.status, StatusCode::FORBIDDEN);
    assert_unauthorized(&server.get("/metrics", None).await, "", "no certificate, no token");
    server.stop().await;
}

#[tokio::test]
async fn resource_attributes_and_static_rules_come_from_the_config_file() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-config").await.unwrap();
    let statically_allowed = service_account_user(&ns, "prometheus");
    let config = ProxyConfig::parse(
        &format!(
            r#"
authorization:
  resourceAttributes:
    namespace: {ns}
    apiVersion: v1
    resource: services
    subresource: proxy
    name: metrics
  static:
    - user:
        name: {statically_allowed}
      verb: get
      resourceRequest: true
      resource: services
      subresource: proxy
"#
        ),
        "test config",
    )
    .unwrap();
    let options =
        AuthOptions { authorization: config.authorization, ..auth_options(LONG, LONG, Duration::from_millis(200)) };
    let server = MetricsServer::start(admin.clone(), options, None).await;
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();

    let denied = server.get("/metrics", Some(&token)).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert!(
        denied.text().contains(&format!(r#"get services/proxy "metrics" in namespace "{ns}""#)),
        "{}",
        denied.text()
    );

    // The static rule allows without a SubjectAccessReview.
    let before = server.auth.counts().subject_access_reviews;
    let prometheus = service_account_token(&admin, &ns, "prometheus", &[], 600).await.unwrap();
    assert_eq!(server.get("/metrics", Some(&prometheus)).await.status, StatusCode::OK);
    assert_eq!(server.auth.counts().subject_access_reviews, before);

    // A namespaced Role on the service's proxy subresource is what RBAC checks.
    let role = Role {
        metadata: ObjectMeta { name: Some("metrics-proxy".into()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["services/proxy".into()]),
            resource_names: Some(vec!["metrics".into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &role).await.unwrap();
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some("metrics-proxy".into()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "metrics-proxy".into(),
        },
        subjects: Some(vec![service_account_subject(&ns, "scraper")]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &binding).await.unwrap();
    server.https.wait_for_status(server.addr, Some(&token), StatusCode::OK, "the Role to allow the scraper").await;
    server.stop().await;
}

#[tokio::test]
async fn without_cert_files_the_server_is_self_signed_and_http1_only() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let server = SecureServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        admin.clone(),
        metrics_router(),
        SecureServingOptions::default(),
    )
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    let pinned = Https::pinned(server.serving_certificate().unwrap());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));

    assert_unauthorized(&pinned.get(addr, "/metrics", None).await.unwrap(), "", "self-signed, no token");
    let alpn = pinned.negotiated_alpn(addr, &[b"h2", b"http/1.1"]).await.unwrap();
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]), "HTTP/2 must be off");
    // A client that trusts some other CA does not get through the handshake.
    let unrelated = ServingPki::new();
    assert!(Https::trusting(unrelated.ca_pem()).get(addr, "/metrics", None).await.is_err());

    shutdown.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn serve_secure_metrics_is_one_call_and_stops_on_shutdown() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-one-call").await.unwrap();
    let addr = format!("127.0.0.1:{}", free_port().unwrap()).parse().unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(serve_secure_metrics(
        addr,
        admin.clone(),
        metrics_router(),
        SecureServingOptions::default(),
        shutdown.clone(),
    ));
    let https = Https::any_server();
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let status = eventually("serve_secure_metrics to answer", TIMEOUT, || https.status(addr, "/metrics", Some(&token)))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN);
    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert!(https.get(addr, "/metrics", None).await.is_err(), "still serving after shutdown");

    // A busy port is an error naming the address, not a panic.
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = holder.local_addr().unwrap();
    let err =
        serve_secure_metrics(busy, admin, metrics_router(), SecureServingOptions::default(), CancellationToken::new())
            .await
            .unwrap_err();
    assert!(matches!(err, ServeError::Bind { .. }) && err.to_string().contains(&busy.to_string()), "{err}");
}

#[tokio::test]
async fn rotated_certificate_files_are_served_without_a_restart() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let pki = ServingPki::new();
    let options = SecureServingOptions {
        tls: TlsFiles {
            cert_file: Some(pki.cert_file.clone()),
            key_file: Some(pki.key_file.clone()),
            client_ca_file: None,
        },
        cert_reload_interval: Duration::from_millis(100),
        ..SecureServingOptions::default()
    };
    let server = SecureServer::bind("127.0.0.1:0".parse().unwrap(), admin, metrics_router(), options).await.unwrap();
    let addr = server.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));
    let before = Https::trusting(pki.ca_pem());
    assert_unauthorized(&before.get(addr, "/metrics", None).await.unwrap(), "", "before the rotation");

    // Key first, then certificate: a reload that reads in between sees a mismatched pair and
    // keeps serving the old certificate.
    let rotated = ServingPki::new();
    std::fs::copy(&rotated.key_file, &pki.key_file).unwrap();
    std::fs::copy(&rotated.cert_file, &pki.cert_file).unwrap();
    let after = Https::trusting(rotated.ca_pem());
    let status = eventually("the rotated certificate to be served", TIMEOUT, || after.status(addr, "/metrics", None))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(before.get(addr, "/metrics", None).await.is_err(), "the old certificate is still served");
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_expired_token_gets_401() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-expired").await.unwrap();
    // The account exists, so the only thing wrong with the expired token is its expiry.
    service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    let uid = Api::<ServiceAccount>::namespaced(admin.clone(), &ns).get("scraper").await.unwrap().metadata.uid.unwrap();
    let server = MetricsServer::start(admin.clone(), AuthOptions::default(), None).await;

    // Control: the same forgery, still valid, authenticates (403: no RBAC yet), so the harness
    // key and the claims are right and a 401 below can only come from the expiry.
    let valid = forge_service_account_token(cp, &ns, "scraper", &uid, 600);
    assert_eq!(server.get("/metrics", Some(&valid)).await.status, StatusCode::FORBIDDEN);

    let expired = forge_service_account_token(cp, &ns, "scraper", &uid, -60);
    let reply = server.get("/metrics", Some(&expired)).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text());
    assert!(reply.headers.get("www-authenticate").is_some());
    server.stop().await;
}
