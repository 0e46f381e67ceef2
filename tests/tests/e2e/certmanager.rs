//! The cert-manager phase: cert-manager itself (built by `cargo xtask e2e` from the Go module
//! proxy, see `xtask/src/certmanager.rs`), then this release from `config/overlays/cert-manager`.
//! The webhook serves the certificate cert-manager issued, both webhook configurations carry
//! the CA cainjector injected, admission works through the Service, and a renewal reaches the
//! webhook with no MyOwnShell refused meanwhile. Both are uninstalled afterwards, so the next
//! phase starts from a clean cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::ListParams;
use myownshell_envtest::eventually;
use myownshell_tests::tls_client::{HttpsConnection, served_certificate};
use rustls_pki_types::CertificateDer;

use super::{E2e, LOCAL_IMAGE, RELEASE_IMAGE, SYSTEM, TIMEOUT, shell};

const NAMESPACE: &str = "cert-manager";
const DEPLOYMENTS: [&str; 3] = ["cert-manager", "cert-manager-cainjector", "cert-manager-webhook"];
const SERVING_CERT: &str = "myownshell-serving-cert";
const SERVING_SECRET: &str = "myownshell-webhook-server-cert";
const SERVICE_NAME: &str = "myownshell-webhook-service.myownshell-system.svc";
const CONFIGURATIONS: [&str; 2] =
    ["myownshell-mutating-webhook-configuration", "myownshell-validating-webhook-configuration"];
/// How long a renewed certificate may take to be served: the kubelet refreshes a mounted
/// Secret when it next syncs the pod (the test nodes' `syncFrequency` of 10 s, a minute on a
/// default kubelet, plus jitter); the webhook reads the files every second.
const RENEWAL_TIMEOUT: Duration = Duration::from_secs(180);

/// `cargo xtask e2e` builds cert-manager and names its directory (CRDs, manifests, images).
fn cert_manager_dir() -> PathBuf {
    std::env::var_os("MYOWNSHELL_CERT_MANAGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("MYOWNSHELL_CERT_MANAGER is not set: run the suite with `cargo xtask e2e`"))
}

pub async fn cert_manager(e2e: &E2e) {
    let dir = cert_manager_dir();
    let started = Instant::now();
    install_cert_manager(e2e, &dir).await;
    eprintln!("e2e: cert-manager installed, its webhook admitting: {:.1?}", started.elapsed());
    let started = Instant::now();
    let manifest = install_overlay(e2e).await;
    eprintln!(
        "e2e: config/overlays/cert-manager: certificates issued, both Deployments Ready: {:.1?}",
        started.elapsed()
    );
    let ca = injected_ca(e2e).await;
    let served = served_is_issued(e2e, &ca).await;
    let ns = e2e.namespace("e2e-cert-manager").await;
    admission(e2e, &ns).await;
    renewal(e2e, &ns, &ca, served).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
    let started = Instant::now();
    uninstall(e2e, &manifest, &dir).await;
    eprintln!("e2e: the overlay and cert-manager uninstalled: {:.1?}", started.elapsed());
}

/// Roll out a Deployment of `ns`; on failure, what its pods and their logs say.
async fn rollout(e2e: &E2e, ns: &str, deployment: &str) {
    let args = ["rollout", "status", "-n", ns, &format!("deployment/{deployment}"), "--timeout=120s"];
    if let Err(e) = e2e.try_run(&args).await {
        let pods = e2e.try_run(&["get", "pods", "-n", ns, "-o", "wide"]).await.unwrap_or_else(|e| e);
        let logs = e2e.try_run(&["logs", "-n", ns, &format!("deployment/{deployment}"), "--tail=40"]).await;
        panic!("{deployment} did not roll out: {e}\n{pods}\n{}\n{}", logs.unwrap_or_else(|e| e), e2e.diagnostics());
    }
}

/// The CRDs, then the components; ready once cert-manager's own webhook admits an Issuer (it
/// refuses until cainjector gave its configurations their CA: what cert-manager's
/// startupapicheck waits for).
async fn install_cert_manager(e2e: &E2e, dir: &std::path::Path) {
    let crds = dir.join("crds.yaml").display().to_string();
    // Server-side: the CRDs are too large for the last-applied annotation.
    e2e.run(&["apply", "--server-side", "-f", &crds]).await;
    e2e.run(&["wait", "--for=condition=Established", "-f", &crds, "--timeout=60s"]).await;
    e2e.run(&["apply", "--server-side", "-f", &dir.join("cert-manager.yaml").display().to_string()]).await;
    for deployment in DEPLOYMENTS {
        rollout(e2e, NAMESPACE, deployment).await;
    }
    let issuer = "apiVersion: cert-manager.io/v1\nkind: Issuer\nmetadata:\n  name: startup-check\n  namespace: default\nspec:\n  selfSigned: {}\n";
    eventually("cert-manager's webhook to admit an Issuer", TIMEOUT, || async {
        let out = e2e.kubectl.run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(issuer)).await?;
        if out.success { Ok(()) } else { Err(out.stderr) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
}

/// The overlay with the local image (as the production phase does); every Certificate Ready,
/// both Deployments rolled out. Returns what was applied, to delete it.
async fn install_overlay(e2e: &E2e) -> String {
    let manifest = e2e.apply_overlay(&E2e::overlay("cert-manager"), RELEASE_IMAGE, LOCAL_IMAGE).await;
    e2e.wait_for(
        "every Certificate of the overlay Ready",
        &[
            "get",
            "certificates",
            "-n",
            SYSTEM,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}",
        ],
        |out| out.split_whitespace().count() >= 2 && out.split_whitespace().all(|c| c.ends_with("=True")),
    )
    .await;
    e2e.rollout_operator().await;
    manifest
}

async fn secret_key(e2e: &E2e, name: &str, key: &str) -> Result<String, String> {
    let secrets: Api<Secret> = Api::namespaced(e2e.cluster.control_plane().client().unwrap(), SYSTEM);
    let secret = secrets.get(name).await.map_err(|e| e.to_string())?;
    let value = secret.data.as_ref().and_then(|d| d.get(key)).ok_or(format!("{name} has no {key}"))?;
    String::from_utf8(value.0.clone()).map_err(|e| e.to_string())
}

/// The leaf certificate of the serving Secret (the first of `tls.crt`).
async fn issued_leaf(e2e: &E2e) -> Result<CertificateDer<'static>, String> {
    let pem = secret_key(e2e, SERVING_SECRET, "tls.crt").await?;
    let certs = myownshell_runtime::tls::certs_from_pem(&pem).map_err(|e| e.to_string())?;
    certs.into_iter().next().ok_or("tls.crt holds no certificate".into())
}

/// Every caBundle of both configurations, as PEM.
async fn ca_bundles(e2e: &E2e) -> Result<Vec<String>, String> {
    let client = e2e.cluster.control_plane().client().unwrap();
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let m = mutating.get(CONFIGURATIONS[0]).await.map_err(|e| e.to_string())?;
    let v = validating.get(CONFIGURATIONS[1]).await.map_err(|e| e.to_string())?;
    let bundles = m
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.client_config.ca_bundle)
        .chain(v.webhooks.unwrap_or_default().into_iter().map(|w| w.client_config.ca_bundle));
    Ok(bundles.map(|b| b.map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default()).collect())
}

/// Each webhook of both configurations trusts the Secret's `ca.crt`, and cainjector wrote it (in
/// `--cert-dir` mode the operator's webhook injects nothing). Returns the CA.
async fn injected_ca(e2e: &E2e) -> String {
    let ca = secret_key(e2e, SERVING_SECRET, "ca.crt").await.unwrap();
    assert!(ca.contains("BEGIN CERTIFICATE"), "ca.crt: {ca}");
    let bundles = eventually("cainjector to inject ca.crt into every webhook", TIMEOUT, || async {
        let bundles = ca_bundles(e2e).await?;
        if bundles.iter().all(|b| *b == ca) { Ok(bundles) } else { Err(format!("{bundles:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
    assert!(bundles.len() >= 3, "the mutating configuration's two webhooks and the validating one: {bundles:?}");
    for (kind, name) in ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"].iter().zip(CONFIGURATIONS) {
        let managers = e2e.run(&["get", kind, name, "-o", "jsonpath={.metadata.managedFields[*].manager}"]).await;
        assert!(managers.contains("cainjector"), "{name} was not written by cainjector: {managers}");
    }
    ca
}

/// The webhook pod's address (the one replica of the overlay).
async fn webhook_addr(e2e: &E2e) -> SocketAddr {
    let pods: Api<Pod> = Api::namespaced(e2e.cluster.control_plane().client().unwrap(), SYSTEM);
    let list = pods.list(&ListParams::default().labels("app.kubernetes.io/component=webhook")).await.unwrap();
    let ips: Vec<String> = list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.status.and_then(|s| s.pod_ip))
        .collect();
    assert_eq!(ips.len(), 1, "one webhook pod: {ips:?}");
    format!("{}:9443", ips[0]).parse().unwrap()
}

/// Wait until the webhook serves `leaf`.
async fn wait_served(e2e: &E2e, addr: SocketAddr, leaf: &CertificateDer<'static>, timeout: Duration) {
    eventually("the webhook to serve the issued certificate", timeout, || async {
        let served = served_certificate(addr).await?;
        if served == *leaf { Ok(()) } else { Err("another certificate".to_owned()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
}

/// The webhook serves the Secret's leaf, which a client trusting only the injected CA accepts
/// for the Service's name. Returns the leaf.
async fn served_is_issued(e2e: &E2e, ca: &str) -> CertificateDer<'static> {
    let addr = webhook_addr(e2e).await;
    let leaf = issued_leaf(e2e).await.unwrap();
    wait_served(e2e, addr, &leaf, TIMEOUT).await;
    HttpsConnection::connect(addr, Some(ca), SERVICE_NAME)
        .await
        .unwrap_or_else(|e| panic!("the served certificate does not verify against the injected CA: {e}"));
    leaf
}

/// Through the Service, as the apiserver calls it: a bad spec is denied by field, a good one
/// is defaulted with the finalizer.
async fn admission(e2e: &E2e, ns: &str) {
    let denied = e2e.apply(ns, &shell("too-big", 500)).await.unwrap_err();
    assert!(denied.contains("spec.size: must be between 0 and 50, got 500"), "{denied}");
    e2e.apply(ns, "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: defaulted\nspec: {}\n")
        .await
        .unwrap();
    let defaulted = e2e
        .run(&["get", "mos", "defaulted", "-n", ns, "-o", "jsonpath={.spec.size} {.spec.image} {.metadata.finalizers}"])
        .await;
    assert_eq!(defaulted, format!("1 {} [\"myownshell.io/finalizer\"]", myownshell_api::defaults::IMAGE));
}

/// How many MyOwnShells the renewal phase applies to, in turn: each apply changes one of them
/// (a label), so every apply goes through both webhooks, without a renewal's worth of shells
/// (one every 250 ms for as long as the kubelet takes) and their Deployments to clean up after.
const RENEWAL_SHELLS: usize = 8;

/// Apply a MyOwnShell every 250 ms until `stop`, each a change (of one of [`RENEWAL_SHELLS`]);
/// counts them in `applied`; the refusals.
async fn keep_applying(
    e2e: &E2e,
    ns: &str,
    applied: &AtomicUsize,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<String> {
    let mut ticks = tokio::time::interval(Duration::from_millis(250));
    let mut errors = Vec::new();
    while !*stop.borrow() {
        ticks.tick().await;
        let n = applied.load(Ordering::SeqCst);
        let manifest = shell(&format!("renewal-{}", n % RENEWAL_SHELLS), 0)
            .replace("metadata:\n", &format!("metadata:\n  labels:\n    round: \"{n}\"\n"));
        if let Err(e) = e2e.apply(ns, &manifest).await {
            errors.push(e);
        }
        applied.fetch_add(1, Ordering::SeqCst);
    }
    errors
}

/// A renewal as `cmctl renew` asks for one (the Certificate's `Issuing` condition): a new leaf
/// from the same CA, so the caBundles stay as they are, and the webhook serves it once the
/// kubelet updated the mounted Secret; not one MyOwnShell applied meanwhile is refused.
async fn renewal(e2e: &E2e, ns: &str, ca: &str, old: CertificateDer<'static>) {
    let addr = webhook_addr(e2e).await;
    let applied = AtomicUsize::new(0);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let applying = keep_applying(e2e, ns, &applied, stop_rx);
    let renewing = async {
        let started = Instant::now();
        e2e.run(&[
            "patch",
            "certificate",
            SERVING_CERT,
            "-n",
            SYSTEM,
            "--subresource=status",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered","message":"Certificate re-issuance manually triggered"}}]"#,
        ])
        .await;
        let renewed = eventually("cert-manager to write a renewed certificate", TIMEOUT, || async {
            let leaf = issued_leaf(e2e).await?;
            if leaf != old { Ok(leaf) } else { Err("the old certificate".to_owned()) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()));
        let issued = started.elapsed();
        wait_served(e2e, addr, &renewed, RENEWAL_TIMEOUT).await;
        let served = started.elapsed();
        // A few more applies against the renewed certificate alone.
        let then = applied.load(Ordering::SeqCst);
        eventually("four more applies", TIMEOUT, || async {
            let now = applied.load(Ordering::SeqCst);
            if now >= then + 4 { Ok(()) } else { Err(now.to_string()) }
        })
        .await
        .unwrap();
        let _ = stop_tx.send(true);
        (issued, served)
    };
    let (errors, (issued, served)) = tokio::join!(applying, renewing);
    eprintln!(
        "e2e: renewal: the new certificate in the Secret after {issued:.1?}, served after {served:.1?}; {} MyOwnShells applied meanwhile, {} refused",
        applied.load(Ordering::SeqCst),
        errors.len()
    );
    assert!(errors.is_empty(), "applies refused during the renewal: {errors:?}");
    assert_eq!(secret_key(e2e, SERVING_SECRET, "ca.crt").await.unwrap(), ca, "the renewal changed the CA");
    let bundles = ca_bundles(e2e).await.unwrap();
    assert!(bundles.iter().all(|b| b == ca), "the caBundles changed: {bundles:?}");
}

/// The shells, the overlay (waiting for its namespace to go), then cert-manager, its CRDs and
/// the leader election Leases it left in kube-system.
async fn uninstall(e2e: &E2e, manifest: &str, dir: &std::path::Path) {
    e2e.delete_every_shell().await;
    let delete = e2e.kubectl.run_with_stdin(&["delete", "--timeout=120s", "-f", "-"], Some(manifest));
    let (out, ()) = tokio::join!(delete, e2e.namespaces_gone(&[SYSTEM]));
    let out = out.unwrap();
    assert!(out.success, "deleting the overlay: {}{}", out.stdout, out.stderr);
    let components = dir.join("cert-manager.yaml").display().to_string();
    let args = ["delete", "--timeout=120s", "-f", &components];
    tokio::join!(e2e.run(&args), e2e.namespaces_gone(&[NAMESPACE]));
    e2e.run(&["delete", "--timeout=120s", "-f", &dir.join("crds.yaml").display().to_string()]).await;
    e2e.run(&[
        "delete",
        "lease",
        "-n",
        "kube-system",
        "--ignore-not-found",
        "cert-manager-controller",
        "cert-manager-cainjector-leader-election",
        "cert-manager-cainjector-leader-election-core",
    ])
    .await;
}
