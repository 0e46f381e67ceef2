//! The auth layer with kube-apiserver stopped: it must never fail open. Its own test binary,
//! because it stops the control plane that every test in the binary shares.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use http::StatusCode;
use myownshell_envtest::{create_namespace, service_account_token, service_account_user, shared};
use myownshell_tests::rbac_proxy::*;

const LONG: Duration = Duration::from_secs(300);

#[tokio::test]
async fn with_the_apiserver_down_uncached_tokens_never_get_200() {
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-apiserver-down").await.unwrap();
    let server = MetricsServer::start(admin.clone(), auth_options(LONG, LONG, Duration::from_millis(200)), None).await;
    let role = format!("{ns}-metrics-reader");
    create_reader_role(&admin, &role, &["/metrics"]).await;
    // Both accounts may read metrics: only the cache state differs between them.
    for sa in ["warm", "cold"] {
        bind_cluster_role(&admin, &format!("{role}-{sa}"), &role, service_account_subject(&ns, sa)).await;
    }
    let warm = service_account_token(&admin, &ns, "warm", &[], 600).await.unwrap();
    let cold = service_account_token(&admin, &ns, "cold", &[], 600).await.unwrap();
    for sa in ["warm", "cold"] {
        wait_for_rbac(&admin, &service_account_user(&ns, sa), &[], "/metrics", true).await;
    }
    assert_eq!(server.get("/metrics", Some(&warm)).await.status, StatusCode::OK);

    cp.stop_apiserver().unwrap();
    let down = server.get("/metrics", Some(&cold)).await;
    assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE, "{}", down.text());
    assert!(!down.text().contains(&cold), "the token is in the body");
    let garbage = server.get("/metrics", Some("garbage")).await;
    assert_eq!(garbage.status, StatusCode::SERVICE_UNAVAILABLE, "an unverifiable token is not a 401 either");
    // What was decided while the apiserver was up keeps being served from the caches.
    assert_eq!(server.get("/metrics", Some(&warm)).await.status, StatusCode::OK);

    cp.start_apiserver().await.unwrap();
    server
        .https
        .wait_for_status(server.addr, Some(&cold), StatusCode::OK, "the same token to work once the apiserver is back")
        .await;
    server.stop().await;
}
