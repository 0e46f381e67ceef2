//! Quantities the apiserver rewrites (`1.5Mi` → `1536Ki`, `.5` → `500m`, `8Ei` → capped): the
//! controller builds Deployments with `myownshell_api::quantity::canonical` text, so the
//! Deployment it wants is the one the apiserver stores, and it writes it once. Here the real
//! kube-apiserver is the reference for that text, and a real controller is held to one write.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use myownshell_api::quantity::{canonical, parse};
use myownshell_api::{MyOwnShell, MyOwnShellSpec, ResourceList, ShellResources};
use myownshell_envtest::eventually;
use myownshell_tests::controller::ShellNamespace;
use myownshell_tests::controller::{ControllerTest, TIMEOUT};
use serde_json::json;

/// Texts whose stored form is worth knowing: canonical and not, every suffix family, the
/// rounding to 10⁻³, the binary cap, and the parser's quirks (kept signs, zeros and dots).
const TEXTS: &str = "
    0 1 10m 16Mi 64Mi 200m 1.5Mi 1.5Gi .5 0.5 1.5 1.500 1.0 1000 1000m 1k 1e3 1E3 1e03 1.5e3
    100e-3 1e-40 1e-3 1n 1u 0.1m 1500u 1.0001 1024 1024Ki 1025Ki 1536Ki 12Ki 16Ki 0.5Ki 1.Ki
    1.Mi +1 01 5. +1Ki 01Ki 8Ki 1Ei 7Ei 8Ei 9E 10E 9223372036854775807 9223372036854775808 1000E
    2e18 12345678901234567890 0.000000001 1Pi 1.5Pi 3Ti 100Gi 2Mi 123456789012345678
    1234567890123456789 0000001 00 0m 0Ki 0e3 . Ki e3 m 1.0e3 0.0 1e-9 1e+3 1E-3 1.5e-3 1.2345m
    1.2345 999999999999999999 1000000000000000000 7.999Ei 8191Pi 8192Pi 0.5Mi 1023 1023Ki
    1.000Ki 1.25Ti 4096Ki 1e30 1.5e20 0.001 0.0015 2.000m
";

/// Quantity-shaped texts from a fixed seed (the same on every run): digits before and after a
/// point, and any suffix, kept to what the webhook admits.
fn generated(count: usize) -> Vec<String> {
    const SUFFIXES: &[&str] =
        &["", "", "m", "n", "u", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e", "E"];
    // xorshift64*: enough spread for test inputs, without a dependency.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |bound: usize| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        usize::try_from(state.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound as u64).unwrap()
    };
    let mut texts = Vec::new();
    while texts.len() < count {
        let mut text = String::new();
        let int_len = next(8);
        text.extend((0..int_len).map(|_| char::from(b"0123456789"[next(10)])));
        if next(2) == 0 {
            text.push('.');
            let fraction_len = next(12);
            text.extend((0..fraction_len).map(|_| char::from(b"0123456789"[next(10)])));
        }
        let suffix = SUFFIXES[next(SUFFIXES.len())];
        text.push_str(suffix);
        if suffix.eq_ignore_ascii_case("e") {
            text.push_str(&(next(40) as i64 - 24).to_string());
        }
        if parse(&text).is_ok_and(|q| !q.exceeds_max()) {
            texts.push(text);
        }
    }
    texts
}

/// A Deployment with one container per text, each text as its memory limit.
fn probe(texts: &[&str]) -> Deployment {
    let labels = BTreeMap::from([("app".to_owned(), "probe".to_owned())]);
    let containers = texts
        .iter()
        .enumerate()
        .map(|(i, text)| Container {
            name: format!("c{i}"),
            image: Some("busybox:1".to_owned()),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([("memory".to_owned(), Quantity((*text).to_owned()))])),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        })
        .collect();
    Deployment {
        metadata: ObjectMeta { name: Some("probe".to_owned()), ..ObjectMeta::default() },
        spec: Some(DeploymentSpec {
            selector: LabelSelector { match_labels: Some(labels.clone()), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..ObjectMeta::default() }),
                spec: Some(PodSpec { containers, ..PodSpec::default() }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// What the apiserver stores for each of `texts` (a server-side dry run: nothing is persisted).
async fn stored(t: &ShellNamespace, texts: &[&str]) -> Vec<String> {
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    let stored = t.deployments.create(&dry, &probe(texts)).await.unwrap();
    let containers = stored.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(containers.len(), texts.len());
    containers
        .iter()
        .map(|c| {
            let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
            limits.and_then(|l| l.get("memory")).map_or_else(|| "<none>".to_owned(), |q| q.0.clone())
        })
        .collect()
}

#[tokio::test]
async fn canonical_text_is_what_the_apiserver_stores() {
    let t = ShellNamespace::create("qty-canonical").await.unwrap();
    let generated = generated(400);
    // The apiserver trims quantities: one text with spaces around it.
    let texts: Vec<&str> =
        TEXTS.split_whitespace().chain([" 1 "]).chain(generated.iter().map(String::as_str)).collect();
    let mut wrong = Vec::new();
    for chunk in texts.chunks(100) {
        for (text, theirs) in chunk.iter().zip(stored(&t, chunk).await) {
            let ours = canonical(text);
            if ours != theirs {
                wrong.push(format!("{text:?}: the apiserver stores {theirs:?}, canonical() says {ours:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {} differ:\n{}", wrong.len(), texts.len(), wrong.join("\n"));
}

fn list(entries: &[(&str, &str)]) -> ResourceList {
    entries.iter().map(|(name, q)| ((*name).to_owned(), Quantity((*q).to_owned()))).collect()
}

const DEPLOYMENT_WRITES: &str = "myownshell_controller_writes_total{kind=\"deployment\"}";

#[tokio::test]
async fn quantities_the_apiserver_rewrites_cost_no_write_per_reconcile() {
    let t = ControllerTest::start("qty-writes").await;
    let written = ShellResources {
        requests: Some(list(&[("cpu", ".5"), ("memory", "1.5Mi"), ("ephemeral-storage", "0.5Gi")])),
        limits: Some(list(&[("cpu", "1.0"), ("memory", "16384Ki"), ("ephemeral-storage", "1000M")])),
    };
    let spec = MyOwnShellSpec { size: Some(2), resources: Some(written.clone()), ..MyOwnShellSpec::default() };
    t.shells.create(&PostParams::default(), &MyOwnShell::new("quant", spec)).await.unwrap();

    // The Deployment carries the apiserver's text; the MyOwnShell keeps what was written.
    let resources = eventually("the Deployment", TIMEOUT, || async {
        let d = t.deployments.get_opt("quant").await.map_err(|e| e.to_string())?.ok_or("no Deployment yet")?;
        let pod = d.spec.and_then(|s| s.template.spec).ok_or("no pod template")?;
        pod.containers.into_iter().next().and_then(|c| c.resources).ok_or_else(|| "no resources".to_owned())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
    assert_eq!(
        resources.requests,
        Some(list(&[("cpu", "500m"), ("memory", "1536Ki"), ("ephemeral-storage", "512Mi")]))
    );
    assert_eq!(resources.limits, Some(list(&[("cpu", "1"), ("memory", "16Mi"), ("ephemeral-storage", "1G")])));
    assert_eq!(t.shells.get("quant").await.unwrap().spec.resources, Some(written));

    let converged = t.settled_metric(DEPLOYMENT_WRITES).await;
    assert_eq!(converged, 1.0, "the Deployment is written once");

    // Each Deployment status change is a watch event, so a reconcile; none may write it again.
    for ready in [1, 2, 1] {
        let status = json!({"status": {"replicas": 2, "updatedReplicas": 2, "readyReplicas": ready, "availableReplicas": ready}});
        t.deployments.patch_status("quant", &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
        eventually(&format!("the MyOwnShell to report {ready} ready"), TIMEOUT, || async {
            let status = t.shells.get("quant").await.map_err(|e| e.to_string())?.status;
            match status.map(|s| s.ready_replicas) {
                Some(r) if r == ready => Ok(()),
                other => Err(format!("readyReplicas {other:?}")),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", t.controller.log_tail(30)));
        let writes = t.settled_metric(DEPLOYMENT_WRITES).await;
        assert_eq!(writes, converged, "a Deployment write after its status became {ready} ready");
    }
}
