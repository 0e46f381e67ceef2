//! The CONNECT row of `cargo xtask bench webhook`: what the connect check adds to every
//! `kubectl exec` (attach, port-forward, …) in a namespace it serves, for a shell's pod and for
//! a pod that is no shell's, with 10,000 shells known (1,000 of them in the pod's namespace).
//!
//! Two figures: the decision alone, in process (decode, find the pod's shells, decide, encode:
//! [`review`] called in a loop), and the whole answer over TLS with keep-alive against the floor
//! server answering the same bytes (the difference is what the webhook's work adds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use myownshell_api::names;
use myownshell_envtest::tls::LoopbackTls;
use myownshell_webhook::admission::Policy;
use myownshell_webhook::connect::access::ShellAccess;
use myownshell_webhook::connect::shell_index::ShellIndex;
use myownshell_webhook::dispatch::{Answer, Webhook, review};
use myownshell_webhook::metrics::Metrics;
use myownshell_webhook::server::AppState;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{Figures, load, median_round, ms};

/// The namespace of the pods connected to.
const NAMESPACE: &str = "team";

/// 10,000 shells: `shell-0000` … `shell-0999` in `team`, the rest in 90 other namespaces.
fn index() -> ShellIndex {
    let shell = |i: usize| ShellAccess {
        name: format!("shell-{:04}", i % 1000),
        uid: Some(format!("uid-{i}")),
        owner: Some(format!("user-{i}")),
        users: vec!["bob".into()],
        groups: vec!["devs".into()],
        ..ShellAccess::default()
    };
    ShellIndex::of((0..10_000).map(|i| {
        let namespace = if i < 1000 { NAMESPACE.to_owned() } else { format!("ns-{}", i / 1000 * 10 + i % 10) };
        (namespace, shell(i))
    }))
}

/// A `kubectl exec` review of `pod` by `user`, as kube-apiserver 1.35 sends it.
fn exec_review(pod: &str, user: &str) -> Bytes {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "3f0a9a06-1b6f-4f7a-9a55-0c1d2e3f4a5b",
            "kind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "exec",
            "requestKind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "exec",
            "name": pod, "namespace": NAMESPACE, "operation": "CONNECT",
            "userInfo": {"username": user, "uid": "5e4d3c2b-1a09-4f8e-8d7c-6b5a49382716", "groups": ["devs", "system:authenticated"]},
            "object": {"kind": "PodExecOptions", "apiVersion": "v1", "stdin": true, "stdout": true, "stderr": true,
                       "tty": true, "container": "shell", "command": ["/bin/sh"]},
            "oldObject": null, "dryRun": false, "options": null
        }
    });
    Bytes::from(serde_json::to_vec(&review).unwrap_or_default())
}

/// p50 and p99 of `f` over `n` calls.
fn time_calls(n: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    (times[n / 2], times[n * 99 / 100])
}

/// The CONNECT row: decision in process, then over TLS against the floor.
pub async fn measure(tls: &LoopbackTls, seconds: u64, rounds: usize, shutdown: &CancellationToken) {
    let shells = Arc::new(index());
    let state = AppState { shells: shells.clone(), ..AppState::new(Policy::default(), Arc::new(Metrics::new())) };
    let webhook = crate::start_webhook_with(tls.server.clone(), state.clone(), shutdown.clone()).await;
    let cases = [
        ("a shell's pod, its owner", exec_review("shell-0042-7d9f8c6b4-x2x4z", "user-42")),
        ("a shell's pod, a stranger (refused)", exec_review("shell-0042-7d9f8c6b4-x2x4z", "mallory")),
        ("a pod that is no shell's", exec_review("api-7d9f8c6b4-x2x4z", "mallory")),
    ];
    println!("webhook bench: CONNECT (kubectl exec), {} shells known, 1000 in the pod's namespace", shells.len());
    println!("{:<38} {:>13} {:>13} {:>13} {:>13}", "case", "decide p50", "decide p99", "added p50", "added p99");
    for (what, body) in cases {
        let policy = Policy::default();
        let (p50, p99) = time_calls(200_000, || {
            let answer = review(Webhook::Connect, &body, &policy, &shells);
            if let Answer::Review { response, .. } = answer {
                std::hint::black_box(response.to_review_json());
            }
        });
        let sample = myownshell_webhook::server::answer(Webhook::Connect, &body, &state, Instant::now());
        let sample = sample.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let floor = crate::start_floor(tls.server.clone(), sample, shutdown.clone()).await;
        let paths = [names::CONNECT_PATH, names::CONNECT_PATH];
        let duration = Duration::from_secs(seconds);
        let (mut w, mut f): (Vec<Figures>, Vec<Figures>) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let run = |addr| load(addr, tls.client.clone(), 1, duration, paths, body.clone());
            if round % 2 == 0 {
                w.push(run(webhook).await);
                f.push(run(floor).await);
            } else {
                f.push(run(floor).await);
                w.push(run(webhook).await);
            }
        }
        let (w, f) = (median_round(&w), median_round(&f));
        let added = |a: Duration, b: Duration| ms(a.saturating_sub(b));
        println!("{what:<38} {:>13} {:>13} {:>13} {:>13}", ms(p50), ms(p99), added(w.p50, f.p50), added(w.p99, f.p99));
        println!(
            "connect {} {:.4} {:.4}",
            what.replace(' ', "_"),
            p99.as_secs_f64() * 1e3,
            w.p99.saturating_sub(f.p99).as_secs_f64() * 1e3
        );
    }
}
