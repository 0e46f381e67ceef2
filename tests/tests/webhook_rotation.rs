//! Certificate rotation under load, through the real kube-apiserver: the webhook renews its
//! serving certificate and rotates its CA every few seconds while a client keeps sending
//! admission requests through the apiserver. Not one may fail. (Its own test binary, so its own
//! apiserver: the load does not slow other tests down.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use myownshell_api::{MyOwnShell, MyOwnShellSpec, defaults};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{create_namespace, eventually, shared};
use myownshell_tests::webhooks::{
    InstalledWebhooks, Target, WebhookOptions, WebhookProcess, secret_pem, wait_until_defaulting,
};
use tokio::sync::Mutex;

/// Serving certificates live 8 s and are renewed 3 s before expiry (every ~5 s); the CA lives
/// 24 s and is rotated 6 s before its end.
const ROTATION_FLAGS: [&str; 3] = ["--cert-validity=8s", "--renew-before=3s", "--ca-validity=24s"];
const CLIENTS: usize = 4;
/// The most the test waits for the rotations it needs.
const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn rotations_under_load_fail_no_request() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_namespace(&client, "wh-rotation").await.unwrap();
    let port = free_port().unwrap();
    let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.clone() };
    let installed = InstalledWebhooks::install(&client, &ns, &target).await.unwrap();
    let mut options = WebhookOptions::for_installed(&installed, &ns, port);
    options.args = ROTATION_FLAGS.iter().map(|f| (*f).to_owned()).collect();
    let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
    webhook.wait_ready(Duration::from_secs(60)).await.unwrap();
    // A second replica on the same Secret (no traffic reaches it): it must follow every
    // rotation through its watch on the Secret.
    let follower_options =
        WebhookOptions { port: None, log_name: format!("{}-follower", options.log_name), ..options.clone() };
    let mut follower = WebhookProcess::spawn(cp, &follower_options).unwrap();
    follower.wait_ready(Duration::from_secs(60)).await.unwrap();

    // Wait until the apiserver calls the webhook at all (its configuration informer catches up).
    wait_until_defaulting(&client, &ns, "warmup", Duration::from_secs(30)).await.unwrap();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    let dry = PostParams { dry_run: true, ..PostParams::default() };

    // Load: CLIENTS loops of server-side dry-run creates (both webhooks run; nothing is stored).
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut load = Vec::new();
    for i in 0..CLIENTS {
        let (shells, dry, stop, sent, failures) =
            (shells.clone(), dry.clone(), stop.clone(), sent.clone(), failures.clone());
        load.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("load-{i}-{n}");
                n += 1;
                match shells.create(&dry, &MyOwnShell::new(&name, MyOwnShellSpec::default())).await {
                    Ok(o) if o.spec.image.as_deref() == Some(defaults::IMAGE) => {}
                    Ok(o) => failures.lock().await.push(format!("{name}: not defaulted: {:?}", o.spec)),
                    Err(e) => failures.lock().await.push(format!("{name}: {e}")),
                }
                sent.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }));
    }

    // Watch the Secret until the serving cert changed twice and the CA once.
    let start = Instant::now();
    let first_serving = secret_pem(&client, &ns, &options.secret_name, "tls.crt").await.unwrap();
    let first_signer = secret_pem(&client, &ns, &options.secret_name, "signer-ca.crt").await.unwrap();
    let (mut serving_seen, mut signer_seen) = (vec![first_serving], vec![first_signer]);
    while start.elapsed() < LIMIT && (serving_seen.len() < 3 || signer_seen.len() < 2) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let serving = secret_pem(&client, &ns, &options.secret_name, "tls.crt").await.unwrap();
        let signer = secret_pem(&client, &ns, &options.secret_name, "signer-ca.crt").await.unwrap();
        if serving_seen.last() != Some(&serving) {
            serving_seen.push(serving);
        }
        if signer_seen.last() != Some(&signer) {
            signer_seen.push(signer);
        }
    }
    // A little more load after the last change, then stop.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }

    let failures = failures.lock().await;
    let total = sent.load(Ordering::Relaxed);
    eprintln!(
        "rotation: {total} requests, {} serving certs, {} CAs in {:.1?}",
        serving_seen.len(),
        signer_seen.len(),
        start.elapsed()
    );
    assert!(serving_seen.len() >= 3, "fewer than two serving-cert rotations in {LIMIT:?}\n{}", webhook.log_tail(40));
    assert!(signer_seen.len() >= 2, "no CA rotation in {LIMIT:?}\n{}", webhook.log_tail(40));
    assert!(total > 100, "too little load to mean anything: {total}");
    assert!(
        failures.is_empty(),
        "{} of {total} requests failed, e.g. {:?}\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        webhook.log_tail(40)
    );

    // Afterwards the apiserver still trusts the webhook, and the webhook says so.
    let created =
        shells.create(&PostParams::default(), &MyOwnShell::new("after", MyOwnShellSpec::default())).await.unwrap();
    assert_eq!(created.spec.image.as_deref(), Some(defaults::IMAGE));
    let (status, body) = webhook.probe("/readyz").await.unwrap();
    assert_eq!(status, 200, "{body}");
    let ca = secret_pem(&client, &ns, &options.secret_name, "ca.crt").await.unwrap();
    let leaf = myownshell_tests::tls_client::served_certificate(webhook.addr()).await.unwrap();
    for bundle in installed.ca_bundles().await.unwrap() {
        myownshell_certs::trust::verify_leaf(&leaf, &bundle, "127.0.0.1", std::time::SystemTime::now()).unwrap();
        assert!(myownshell_certs::trust::same_certificates(&bundle, &ca) || bundle.contains(ca.trim()));
    }
    assert!(webhook.is_running());

    // The follower serves what the Secret holds now, and is ready.
    let stored = secret_pem(&client, &ns, &options.secret_name, "tls.crt").await.unwrap();
    let stored = myownshell_runtime::tls::certs_from_pem(&stored).unwrap().remove(0);
    eventually("the follower to serve the stored certificate", Duration::from_secs(10), || {
        let (stored, addr) = (stored.clone(), follower.addr());
        async move {
            let served = myownshell_tests::tls_client::served_certificate(addr).await?;
            if served == stored { Ok(()) } else { Err("an older certificate".into()) }
        }
    })
    .await
    .unwrap();
    assert_eq!(follower.probe("/readyz").await.unwrap().0, 200);
    let follower_log = std::fs::read_to_string(&follower.log).unwrap();
    let swaps = follower_log.lines().filter(|l| l.contains("now serving the rotated certificate")).count();
    assert!(swaps >= 3, "the follower swapped only {swaps} times:\n{}", follower.log_tail(40));
}
