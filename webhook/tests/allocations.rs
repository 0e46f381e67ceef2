//! What one review allocates, counted by a global allocator (dhat's, in testing mode): the whole
//! answer of the admission port, from the request's head to the response written and counted
//! ([`myownshell_webhook::server::handle`]), for the three bodies of `cargo xtask bench webhook`
//! (a minimal review, the one kube-apiserver sends for `kubectl apply`, with managedFields and the
//! last-applied annotation, and a shell of a class that needs a grant, answered from the cached
//! SubjectAccessReview) on both paths. The bounds hold what the issue 41 work brought the answer
//! down to: the kubectl body must cost no more allocations than the minimal one (what it adds,
//! managedFields and the annotation, is skipped unread), and none may creep back up unnoticed.
//!
//! One test in its own binary, run on the process's only thread: dhat counts the whole process,
//! so anything else running would be counted too. That includes libtest's own main thread,
//! which files a test it has just started (a map entry, a timeout entry, a channel wait) while
//! the test runs. On a busy machine that filing landed inside a measured answer, 4 allocations
//! and 900 bytes more, in about 1 run of 50. So this binary has no libtest harness
//! (`harness = false`). libtest-mimic parses the same arguments and prints the same summary,
//! and is told to use one thread, which runs the test on the main thread and starts no other.
//! `cargo test -p myownshell-webhook --test allocations -- --nocapture` prints the table.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use myownshell_api::{ClassImages, ClassResources, MyOwnShellClass, MyOwnShellClassSpec, names};
use myownshell_webhook::admission::Policy;
use myownshell_webhook::classes::ClassIndex;
use myownshell_webhook::classes::usage::ClassUsage;
use myownshell_webhook::metrics::Metrics;
use myownshell_webhook::server::{AppState, handle};
use serde_json::json;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// The bench's kubectl body (`webhook/benches/fixtures`).
const KUBECTL_APPLY_REVIEW: &[u8] = include_bytes!("../benches/fixtures/review-kubectl-apply.json");

const CLASS: &str = "bench-team";

/// The most allocations one answer may make, by body and path. The classed validation's bound
/// leaves room for the review cache's own bookkeeping (moka's), which varies by a few. It made
/// 55 while the cached review copied its key and allocated room for a fetch at every hit; 32
/// once it looked up by reference (`myownshell_auth::cache::ReviewCache::get_or_fetch_by`); 24
/// since the user and the request are borrowed from the review too
/// (`myownshell_auth::borrowed`). The classed mutation made 19 while it read the whole spec to
/// find the class; 9 since it reads `className` alone for a class that fills nothing.
const BOUNDS: [(&str, &str, u64); 6] = [
    ("minimal", "mutate", 7),
    ("minimal", "validate", 18),
    ("kubectl", "mutate", 7),
    ("kubectl", "validate", 18),
    ("classed", "mutate", 9),
    ("classed", "validate", 27),
];

/// A CREATE of shell `bench` in `team-a` with `spec`, by `kubernetes-admin` (in `system:masters`),
/// as `webhook/benches/webhook.rs` builds it.
fn create_review(spec: serde_json::Value) -> Bytes {
    let object = json!({
        "apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell",
        "metadata": {"name": "bench", "namespace": "team-a", "uid": "8d5b7f0e-2b1c-4c1e-9b3a-1f2e3d4c5b6a",
                     "labels": {"team": "a"}, "annotations": {"owner": "someone@example.com"}},
        "spec": spec
    });
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "myownshell.io", "version": "v1alpha1", "kind": "MyOwnShell"},
            "resource": {"group": "myownshell.io", "version": "v1alpha1", "resource": "myownshells"},
            "requestKind": {"group": "myownshell.io", "version": "v1alpha1", "kind": "MyOwnShell"},
            "requestResource": {"group": "myownshell.io", "version": "v1alpha1", "resource": "myownshells"},
            "name": "bench", "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object, "oldObject": null, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    });
    Bytes::from(serde_json::to_vec(&review).unwrap())
}

fn spec() -> serde_json::Value {
    json!({"size": 3, "image": "registry.example.com/tools/shell:1.4.2",
           "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}})
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

/// A kube client whose apiserver says yes to every SubjectAccessReview.
fn allowing_client() -> kube::Client {
    let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
        let body = br#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{},"status":{"allowed":true}}"#;
        let mut response = http::Response::new(Full::new(Bytes::from_static(body)));
        response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        Ok::<_, std::convert::Infallible>(response)
    });
    kube::Client::new(service, "default")
}

/// A POST of `body` to `path`, as hyper hands it to the service.
fn request(path: &str, body: &Bytes) -> http::Request<Full<Bytes>> {
    http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CONTENT_LENGTH, body.len())
        .body(Full::new(body.clone()))
        .unwrap()
}

/// Allocations and bytes of one answer of `body` on `path` by `state`.
fn counted(runtime: &tokio::runtime::Runtime, state: &AppState, path: &str, body: &Bytes) -> (u64, u64) {
    // Twice first: what is made once per process (the defaults' patch, a metric's series, the
    // cached SubjectAccessReview) is not a review's cost.
    // Pinned here, not handed over whole: the runtime boxes a large future it is given.
    for _ in 0..2 {
        let response = runtime.block_on(std::pin::pin!(handle(state, request(path, body))));
        assert_eq!(response.status(), 200);
    }
    let answering = std::pin::pin!(handle(state, request(path, body)));
    let before = dhat::HeapStats::get();
    let response = runtime.block_on(answering);
    let after = dhat::HeapStats::get();
    let answer = runtime.block_on(response.into_body().collect()).unwrap().to_bytes();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.contains("\"allowed\":true"), "{path}: {answer}");
    (after.total_blocks - before.total_blocks, after.total_bytes - before.total_bytes)
}

/// The most bytes the future of one answer may take: hyper moves it into the connection at every
/// request (8.6 KB while it held room for the apiserver's questions, which few reviews ask;
/// 1128 bytes in a debug build since).
const FUTURE_BYTES: usize = 1280;

fn main() {
    let mut arguments = libtest_mimic::Arguments::from_args();
    // One thread: the test on the main thread, beside no other.
    arguments.test_threads = Some(1);
    let tests = vec![libtest_mimic::Trial::test("a_review_allocates_what_it_must_and_no_more", || {
        a_review_allocates_what_it_must_and_no_more();
        Ok(())
    })];
    libtest_mimic::run(&arguments, tests).exit();
}

fn a_review_allocates_what_it_must_and_no_more() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // The kube client's buffer is a task of this runtime.
    let _entered = runtime.enter();
    let _profiler = dhat::Profiler::builder().testing().build();
    let plain = AppState::new(Policy::default(), Arc::new(Metrics::new()));
    let usage = ClassUsage::new(allowing_client(), Duration::from_secs(300), Duration::from_secs(30));
    let classed = AppState {
        classes: Arc::new(ClassIndex::of([class()])),
        class_usage: Some(Arc::new(usage)),
        ..AppState::new(Policy::default(), Arc::new(Metrics::new()))
    };
    let mut classed_spec = spec();
    classed_spec["className"] = json!(CLASS);
    let bodies = [
        ("minimal", create_review(spec()), &plain),
        ("kubectl", Bytes::from_static(KUBECTL_APPLY_REVIEW), &plain),
        ("classed", create_review(classed_spec), &classed),
    ];
    let future = std::mem::size_of_val(&handle(&plain, request(names::MUTATE_PATH, &bodies[0].1)));
    println!("the future of one answer: {future} bytes");
    dhat::assert!(future <= FUTURE_BYTES, "the future of one answer takes {future} bytes");
    let mut counts = Vec::new();
    println!("{:<8} {:<9} {:>11} {:>6}", "body", "path", "allocations", "bytes");
    for (name, body, state) in &bodies {
        for (path, short) in [(names::MUTATE_PATH, "mutate"), (names::VALIDATE_PATH, "validate")] {
            let (blocks, bytes) = counted(&runtime, state, path, body);
            println!("{name:<8} {short:<9} {blocks:>11} {bytes:>6}");
            counts.push(((*name, short), blocks, bytes));
        }
    }
    for ((name, path), blocks, _) in &counts {
        let bound = BOUNDS.iter().find(|b| (b.0, b.1) == (*name, *path)).map_or(0, |b| b.2);
        dhat::assert!(*blocks <= bound, "{name} {path}: {blocks} allocations, at most {bound} expected");
    }
    let of = |name: &str, path: &str| counts.iter().find(|(key, ..)| *key == (name, path)).map_or(0, |c| c.1);
    for path in ["mutate", "validate"] {
        // What the kubectl body adds (managedFields, the last-applied annotation, userInfo's
        // extra) is skipped unread: it costs no allocation the minimal body does not.
        dhat::assert!(of("kubectl", path) <= of("minimal", path), "{path}: the kubectl body allocates more");
    }
}
