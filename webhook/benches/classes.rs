//! The class row of `cargo xtask bench webhook`: a CREATE of a shell of a class that needs a
//! grant, so both webhooks look the class up, hold the spec to its rules, and the answer waits
//! for RBAC's `use` (a SubjectAccessReview, cached), against the floor answering the same bytes,
//! at the bench's concurrencies. And the cold review: what the first request of a user costs,
//! the one that asks the apiserver (a real kube-apiserver of the envtest assets), against the
//! same request once its answer is cached.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use myownshell_api::{ClassImages, ClassResources, MyOwnShellClass, MyOwnShellClassSpec, names};
use myownshell_envtest::tls::LoopbackTls;
use myownshell_webhook::admission::Policy;
use myownshell_webhook::classes::ClassIndex;
use myownshell_webhook::classes::usage::ClassUsage;
use myownshell_webhook::dispatch::Webhook;
use myownshell_webhook::metrics::Metrics;
use myownshell_webhook::server::AppState;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{Figures, load, median, median_round, ms};

const CLASS: &str = "bench-team";

/// A CREATE of a shell of [`CLASS`] by `user` (in `system:masters`, whom RBAC allows anything,
/// so the review's answer is yes without any binding).
fn classed_review(user: &str) -> Bytes {
    let spec = json!({"className": CLASS, "size": 3, "image": "registry.example.com/tools/shell:1.4.2",
                      "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}});
    crate::create_review(spec, user)
}

fn class() -> MyOwnShellClass {
    let max = [("cpu", "2"), ("memory", "1Gi")]
        .map(|(k, v)| (k.to_owned(), k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.to_owned())));
    MyOwnShellClass::new(
        CLASS,
        MyOwnShellClassSpec {
            images: Some(ClassImages { allowed: Some(vec!["registry.example.com/tools/*".into()]), default: None }),
            resources: Some(ClassResources { default: None, max: Some(max.into_iter().collect()) }),
            max_size: Some(5),
            max_running_per_user: Some(3),
            ..MyOwnShellClassSpec::default()
        },
    )
}

/// One validating answer of `body` from `state`, and how long it took.
async fn timed(state: &AppState, body: &Bytes) -> (Duration, String) {
    let started = Instant::now();
    let response = myownshell_webhook::server::answer_checked(Webhook::Validate, body, state, started).await;
    let elapsed = started.elapsed();
    let bytes = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    (elapsed, String::from_utf8_lossy(&bytes).into_owned())
}

/// The class row and the cold review. Needs `KUBEBUILDER_ASSETS` (set by `cargo xtask bench
/// webhook`).
pub async fn measure(opts: &crate::Options, tls: &LoopbackTls, shutdown: &CancellationToken) {
    let cp = myownshell_envtest::ControlPlane::start().await.expect("a control plane (KUBEBUILDER_ASSETS)");
    let usage = Arc::new(ClassUsage::new(cp.client().unwrap(), Duration::from_secs(300), Duration::from_secs(30)));
    let state = AppState {
        classes: Arc::new(ClassIndex::of([class()])),
        class_usage: Some(usage),
        ..AppState::new(Policy::default(), Arc::new(Metrics::new()))
    };

    // Cold: each user's first review asks the apiserver; the second is answered from the cache.
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for i in 0..50 {
        let body = classed_review(&format!("user-{i}"));
        let (first, answer) = timed(&state, &body).await;
        assert!(answer.contains("\"allowed\":true"), "{answer}");
        cold.push(first.as_secs_f64());
        warm.push(timed(&state, &body).await.0.as_secs_f64());
    }
    cold.sort_by(f64::total_cmp);
    warm.sort_by(f64::total_cmp);
    let p = |v: &[f64], q: f64| Duration::from_secs_f64(v[((v.len() - 1) as f64 * q) as usize]);
    println!(
        "webhook bench: a review whose class needs a grant (validate, in process, 50 users): cold (one SubjectAccessReview to kube-apiserver) p50 {} p99 {}; cached p50 {} p99 {}",
        ms(p(&cold, 0.5)),
        ms(p(&cold, 0.99)),
        ms(p(&warm, 0.5)),
        ms(p(&warm, 0.99))
    );

    // Warm, over TLS: the class's lookup, rules and cached review on both paths, against the floor.
    let body = classed_review("kubernetes-admin");
    let _ = timed(&state, &body).await;
    let webhook = crate::start_webhook_with(tls.server.clone(), state.clone(), shutdown.clone()).await;
    let sample = myownshell_webhook::server::answer(Webhook::Mutate, &body, &state, Instant::now());
    let sample = sample.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let floor = crate::start_floor(tls.server.clone(), sample, shutdown.clone()).await;
    let paths = [names::MUTATE_PATH, names::VALIDATE_PATH];
    println!("webhook bench: a shell of a class that needs a grant (CREATE, cached review), TLS keep-alive");
    for &c in &opts.concurrency {
        let (mut w, mut f): (Vec<Figures>, Vec<Figures>) = (Vec::new(), Vec::new());
        for round in 0..opts.rounds {
            let run = |addr| load(addr, tls.client.clone(), c, Duration::from_secs(opts.seconds), paths, body.clone());
            if round % 2 == 0 {
                w.push(run(webhook).await);
                f.push(run(floor).await);
            } else {
                f.push(run(floor).await);
                w.push(run(webhook).await);
            }
        }
        let mut ratios: Vec<f64> = w.iter().zip(&f).map(|(a, b)| a.rps / b.rps).collect();
        ratios.sort_by(f64::total_cmp);
        let (wm, fm) = (median_round(&w), median_round(&f));
        println!(
            "{c:>11} classed  ratio = webhook/floor = {:.2}, webhook p50 {} p99 {}, floor p99 {}",
            median(&ratios),
            ms(wm.p50),
            ms(wm.p99),
            ms(fm.p99)
        );
        println!("result 2 {c} {:.4} {:.4} 0 0", median(&ratios), wm.p99.as_secs_f64() * 1e3);
    }
}
