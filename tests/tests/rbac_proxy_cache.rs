//! The review caches under load, against the real kube-apiserver: a flood of distinct bad
//! tokens keeps the authentication cache bounded and leaves the good caller fast and cached,
//! and a burst of requests with one new token makes one TokenReview. Its own test binary (its
//! own control plane), so ten thousand TokenReviews do not slow the TTL-edge tests in
//! `rbac_proxy.rs`.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use futures::StreamExt;
use http::{Request, StatusCode};
use myownshell_auth::authn::{AuthnCacheOptions, ReviewCounters, TokenAuthenticator, TokenOutcome};
use myownshell_auth::{RbacAuth, ReviewCounts};
use myownshell_envtest::{create_namespace, eventually, service_account_token, shared};
use myownshell_tests::rbac_proxy::review_gate::ReviewGate;
use myownshell_tests::rbac_proxy::*;
use tower::{Layer, ServiceExt};

const LONG: Duration = Duration::from_secs(300);

/// The good token's authentication time: the median of this many calls.
const SAMPLES: usize = 1001;

async fn median_authentication_time(authn: &TokenAuthenticator, token: &str) -> Duration {
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let outcome = authn.authenticate(token).await.unwrap();
        samples.push(started.elapsed());
        assert!(matches!(outcome, TokenOutcome::Authenticated(_)), "the good token was rejected");
    }
    samples.sort_unstable();
    samples[SAMPLES / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_bad_tokens_keeps_the_cache_bounded_and_the_good_token_fast_and_cached() {
    const BAD_TOKENS: u64 = 10_000;
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-flood").await.unwrap();
    let good = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    // Rejections live as long as the good answer, so nothing expires during the flood: only
    // the capacity bound can keep the cache small, and only the eviction policy decides
    // whether the good entry stays.
    let options = AuthnCacheOptions { ttl: LONG, rejected_ttl: LONG, ..AuthnCacheOptions::default() };
    let capacity = options.capacity as u64;
    let counters = Arc::new(ReviewCounters::default());
    let authn = TokenAuthenticator::new(admin.clone(), vec![], options, counters.clone());
    let token_reviews = || counters.token_reviews.load(Ordering::SeqCst);

    // The good caller scrapes for a while: one review, then hits.
    let before = median_authentication_time(&authn, &good).await;
    assert_eq!(token_reviews(), 1);

    // Ten thousand distinct bad tokens, 32 at a time, each a real TokenReview; the good caller
    // keeps scraping meanwhile (once every hundred).
    let flood = futures::stream::iter(0..BAD_TOKENS)
        .map(|i| {
            let authn = &authn;
            async move { (i, authn.authenticate(&format!("not-a-token-{i:05}")).await) }
        })
        .buffer_unordered(32);
    let mut flood = std::pin::pin!(flood);
    let mut done = 0;
    while let Some((i, outcome)) = flood.next().await {
        assert!(matches!(outcome, Ok(TokenOutcome::Rejected)), "bad token {i}: {outcome:?}");
        done += 1;
        if done % 100 == 0 {
            let outcome = authn.authenticate(&good).await.unwrap();
            assert!(matches!(outcome, TokenOutcome::Authenticated(_)), "the good token was rejected");
        }
        if done % 1000 == 0 {
            let len = authn.cached_tokens().await;
            assert!(len <= capacity, "{len} cached tokens after {done} bad ones, capacity {capacity}");
        }
    }
    // Each bad token reviewed once, the good one never again: it stayed cached.
    assert_eq!(token_reviews(), 1 + BAD_TOKENS, "the flood pushed the good token out of the cache");

    let after = median_authentication_time(&authn, &good).await;
    assert_eq!(token_reviews(), 1 + BAD_TOKENS, "the good token was reviewed again after the flood");
    // Generous: what this catches is a hit whose cost grows with what the flood left behind
    // (both medians are microseconds, measured the same way in one process).
    assert!(after <= before * 10, "the good token took {after:?} after the flood, {before:?} before");
    let len = authn.cached_tokens().await;
    assert!(len <= capacity, "{len} cached tokens, capacity {capacity}");
    eprintln!("good token: {before:?} before, {after:?} after {BAD_TOKENS} bad tokens; {len} cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_with_one_new_token_make_one_token_review() {
    const REQUESTS: usize = 100;
    let cp = shared();
    let admin = cp.client().unwrap();
    let ns = create_namespace(&admin, "proxy-coalesce").await.unwrap();
    let token = service_account_token(&admin, &ns, "scraper", &[], 600).await.unwrap();
    // The proxy talks to the real apiserver, but its TokenReviews wait at the gate until every
    // request is waiting too: without coalescing each would have sent its own by then.
    let gate = ReviewGate::new();
    let auth = RbacAuth::new(gate.client(cp.kubeconfig()).await, auth_options(LONG, LONG, LONG));
    let service = auth.layer(metrics_router());

    let waiting = Arc::new(AtomicUsize::new(0));
    let requests: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let request = Request::get("/metrics")
                .header("authorization", format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap();
            let mut response = Box::pin(service.clone().oneshot(request));
            let waiting = waiting.clone();
            let mut counted = false;
            // Counted the first time it cannot go on: it is waiting for a review.
            tokio::spawn(std::future::poll_fn(move |cx| {
                let poll = response.as_mut().poll(cx);
                if poll.is_pending() && !counted {
                    counted = true;
                    waiting.fetch_add(1, Ordering::SeqCst);
                }
                poll
            }))
        })
        .collect();
    eventually("every request to wait on a TokenReview", TIMEOUT, || async {
        match waiting.load(Ordering::SeqCst) {
            REQUESTS => Ok(()),
            n => Err(format!("{n} of {REQUESTS} waiting")),
        }
    })
    .await
    .unwrap();
    assert_eq!(gate.token_reviews(), 1, "TokenReviews sent for {REQUESTS} requests with one token");

    gate.open();
    for request in requests {
        let response = request.await.unwrap().unwrap();
        // Authenticated (not 401), and without RBAC not allowed.
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }
    assert_eq!(gate.token_reviews(), 1);
    assert_eq!(auth.counts(), ReviewCounts { token_reviews: 1, subject_access_reviews: 1 });
}
