//! The injected `caBundle` drifting, through the real kube-apiserver: emptied, replaced by a
//! foreign CA, or with a foreign CA appended, in either configuration. The webhook watches both
//! configurations, so each drift is repaired within moments; until it is, the apiserver cannot
//! reach the webhook (`failurePolicy: Fail`) or trusts a CA it should not.
//!
//! The webhook runs as its own ServiceAccount with the RBAC of `config/default`, and the
//! configurations are `config/default`'s (this binary has its apiserver to itself), so the
//! test also shows that the production permissions allow the watches.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::Client;
use kube::api::{Api, PostParams};
use myownshell_certs::pki::CertificateAuthority;
use myownshell_certs::trust::same_certificates;
use myownshell_envtest::control_plane::write_kubeconfig;
use myownshell_envtest::kustomize::{as_list, render};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{ControlPlane, create_namespace, eventually, service_account_token, shared};
use myownshell_tests::webhooks::{
    InstalledWebhooks, WebhookOptions, WebhookProcess, secret_pem, wait_until_defaulting,
};
use serde_json::Value;

/// Every repair must land within this long of the drift: room for a loaded machine, and still
/// far below the periodic re-read (10 s before, a 60 s backstop now).
const REPAIR_LIMIT: Duration = Duration::from_secs(5);
/// The median repair must land within this long: the watch repairs in tens of milliseconds, so
/// a median over a second means it is not the watch doing the work.
const MEDIAN_REPAIR_LIMIT: Duration = Duration::from_secs(1);
/// How often the configurations are read while waiting: finer than the harness's usual poll,
/// since the time taken is what is measured.
const POLL: Duration = Duration::from_millis(10);

/// Names `config/default` gives.
const SYSTEM_NAMESPACE: &str = "myownshell-system";
const WEBHOOK_SERVICE_ACCOUNT: &str = "myownshell-webhook";
const SECRET: &str = "myownshell-webhook-server-cert";
const MUTATING: &str = "myownshell-mutating-webhook-configuration";
const VALIDATING: &str = "myownshell-validating-webhook-configuration";
const RBAC_KINDS: [&str; 6] =
    ["Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];

async fn kubectl_apply(cp: &ControlPlane, objects: &[&Value]) {
    let out = cp.kubectl().run_with_stdin(&["apply", "-f", "-"], Some(&as_list(objects))).await.unwrap();
    assert!(out.success, "kubectl apply: {}", out.stderr);
}

/// Install `config/default`'s namespace, RBAC and webhook configurations (each webhook sent to
/// `https://127.0.0.1:<port><its path>`, the CA left for the webhook to inject), and return a
/// kubeconfig with the webhook ServiceAccount's token.
async fn install_as_in_production(cp: &ControlPlane, port: u16) -> PathBuf {
    let objects = render("default").unwrap();
    let rbac: Vec<&Value> =
        objects.iter().filter(|o| RBAC_KINDS.contains(&o["kind"].as_str().unwrap_or_default())).collect();
    kubectl_apply(cp, &rbac).await;
    let mut configurations: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "MutatingWebhookConfiguration" || o["kind"] == "ValidatingWebhookConfiguration")
        .cloned()
        .collect();
    for hook in configurations.iter_mut().flat_map(|c| c["webhooks"].as_array_mut().unwrap()) {
        let path = hook["clientConfig"]["service"]["path"].as_str().unwrap().to_owned();
        hook["clientConfig"] = serde_json::json!({ "url": format!("https://127.0.0.1:{port}{path}") });
    }
    kubectl_apply(cp, &configurations.iter().collect::<Vec<_>>()).await;
    let token = service_account_token(&cp.client().unwrap(), SYSTEM_NAMESPACE, WEBHOOK_SERVICE_ACCOUNT, &[], 3600)
        .await
        .unwrap();
    let kubeconfig = cp.layout().dir.join("ca-drift-webhook.kubeconfig");
    write_kubeconfig(&kubeconfig, &cp.kubeconfig_for_token(&token)).unwrap();
    kubeconfig
}

#[derive(Debug, Clone, Copy)]
enum Which {
    Mutating,
    Validating,
}

/// Set `caBundle` of every webhook in one configuration, as someone else would.
async fn drift(client: &Client, installed: &InstalledWebhooks, which: Which, bundle: Option<&str>) {
    let ca = bundle.map(|b| ByteString(b.as_bytes().to_vec()));
    // A conflict means the webhook wrote in between: read again and drift once more.
    for _ in 0..5 {
        let written = match which {
            Which::Mutating => {
                let api = Api::<MutatingWebhookConfiguration>::all(client.clone());
                let mut config = api.get(&installed.mutating_name).await.unwrap();
                for w in config.webhooks.iter_mut().flatten() {
                    w.client_config.ca_bundle = ca.clone();
                }
                api.replace(&installed.mutating_name, &PostParams::default(), &config).await.map(drop)
            }
            Which::Validating => {
                let api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
                let mut config = api.get(&installed.validating_name).await.unwrap();
                for w in config.webhooks.iter_mut().flatten() {
                    w.client_config.ca_bundle = ca.clone();
                }
                api.replace(&installed.validating_name, &PostParams::default(), &config).await.map(drop)
            }
        };
        match written {
            Ok(()) => return,
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => panic!("drifting the {which:?} configuration: {e}"),
        }
    }
    panic!("drifting the {which:?} configuration: five conflicts in a row");
}

/// Whether every webhook of both configurations trusts exactly the CAs in `ca` (the Secret's).
async fn repaired(installed: &InstalledWebhooks, ca: &str) -> Result<(), String> {
    let bundles = installed.ca_bundles().await.map_err(|e| e.to_string())?;
    match bundles.iter().find(|b| !same_certificates(b, ca)) {
        None if !bundles.is_empty() => Ok(()),
        None => Err("no webhooks".into()),
        Some(wrong) => Err(format!("a caBundle of {} bytes that is not the Secret's", wrong.len())),
    }
}

/// How long until [`repaired`], or what was seen last at `limit`.
async fn time_to_repair(installed: &InstalledWebhooks, ca: &str, limit: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        let seen = match repaired(installed, ca).await {
            Ok(()) => return Ok(started.elapsed()),
            Err(seen) => seen,
        };
        if started.elapsed() >= limit {
            return Err(format!("not repaired after {:.2?}; last seen: {seen}", started.elapsed()));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test]
async fn a_drifted_ca_bundle_is_repaired_within_moments() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_namespace(&client, "ca-drift").await.unwrap();
    let port = free_port().unwrap();
    let kubeconfig = install_as_in_production(cp, port).await;
    let installed = InstalledWebhooks::named(&client, MUTATING, VALIDATING);
    let options = WebhookOptions {
        namespace: SYSTEM_NAMESPACE.into(),
        secret_name: SECRET.into(),
        kubeconfig: Some(kubeconfig),
        log_name: "webhook-ca-drift".into(),
        ..WebhookOptions::for_installed(&installed, SYSTEM_NAMESPACE, port)
    };
    let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
    webhook.wait_ready(Duration::from_secs(60)).await.unwrap();
    let ca = secret_pem(&client, SYSTEM_NAMESPACE, SECRET, "ca.crt").await.unwrap();
    eventually("the first injection", Duration::from_secs(10), || repaired(&installed, &ca)).await.unwrap();

    let foreign =
        CertificateAuthority::generate("foreign-ca", Duration::from_secs(3600)).unwrap().cert_pem().to_owned();
    let appended = format!("{}\n{foreign}", ca.trim_end());
    let drifts: [(&str, Option<&str>); 3] =
        [("emptied", None), ("replaced by a foreign CA", Some(&foreign)), ("a foreign CA appended", Some(&appended))];
    let mut repairs = Vec::new();
    for (what, bundle) in drifts {
        for which in [Which::Mutating, Which::Validating] {
            drift(&client, &installed, which, bundle).await;
            match time_to_repair(&installed, &ca, REPAIR_LIMIT).await {
                Ok(took) => {
                    eprintln!("{which:?} caBundle {what}: repaired in {took:.2?}");
                    repairs.push(took);
                }
                Err(e) => panic!("{which:?} caBundle {what}: {e}\n--- webhook log ---\n{}", webhook.log_tail(30)),
            }
        }
    }
    repairs.sort();
    let median = repairs[repairs.len() / 2];
    assert!(median < MEDIAN_REPAIR_LIMIT, "median repair {median:.2?}, all: {repairs:.2?}");

    // The apiserver calls the webhook again with the repaired bundle.
    wait_until_defaulting(&client, &ns, "after-drift", Duration::from_secs(30)).await.unwrap();
    assert!(webhook.is_running());
}
