//! `cargo xtask dev` end to end, as a newcomer would use it: wait for its env file, apply a
//! sample with its kubeconfig, scale and delete it, read the metrics with and without the token,
//! then SIGTERM it and check that nothing it started is left. The binaries run there as their own
//! ServiceAccounts with the RBAC of `config/default`, so this also proves that RBAC is enough for
//! the whole flow (create, scale, delete, certificate injection, metrics auth).

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use myownshell_envtest::assets::{workspace_binary, workspace_root};
use myownshell_envtest::process::{ManagedProcess, ProcessSpec, is_alive as alive};
use myownshell_envtest::{Kubectl, eventually};
use myownshell_tests::scrape::https_get;

const READY_TIMEOUT: Duration = Duration::from_secs(180);
const TIMEOUT: Duration = Duration::from_secs(30);

/// `export KEY='value'` lines.
fn read_env(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut env = BTreeMap::new();
    for line in text.lines() {
        let (key, value) =
            line.strip_prefix("export ").and_then(|l| l.split_once('=')).ok_or(format!("bad line {line:?}"))?;
        env.insert(key.to_owned(), value.trim_matches('\'').to_owned());
    }
    Ok(env)
}

fn addr_of(url: &str) -> SocketAddr {
    let rest = url.strip_prefix("https://").unwrap();
    rest.split('/').next().unwrap().parse().unwrap()
}

/// A running `xtask dev` and what it wrote once ready.
struct Dev {
    process: ManagedProcess,
    state: std::path::PathBuf,
    env: BTreeMap<String, String>,
    args: Vec<String>,
}

/// Start `xtask dev --no-build` with its own state directory (plus `extra` flags) and wait for
/// its env file.
async fn start_dev(name: &str, extra: &[String]) -> Dev {
    let state = tempfile_dir(name);
    let mut args = vec!["dev".to_owned(), "--no-build".to_owned(), format!("--state-dir={}", state.display())];
    args.extend_from_slice(extra);
    let spec =
        ProcessSpec::new(format!("xtask-{name}"), workspace_binary("xtask").unwrap(), state.join("xtask-dev.log"))
            .args(args.clone())
            .env("CARGO_TARGET_DIR", myownshell_envtest::assets::target_dir());
    let process = std::cell::RefCell::new(ManagedProcess::spawn(spec).unwrap());
    let env_file = state.join("env");
    let env = eventually("the dev env file", READY_TIMEOUT, || async {
        let exited = process.borrow_mut().exit_status();
        if let Some(status) = exited {
            return Err(format!("xtask dev exited ({status})"));
        }
        read_env(&env_file)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", process.borrow().log_tail(40)));
    Dev { process: process.into_inner(), state, env, args }
}

#[tokio::test]
async fn xtask_dev_runs_the_operator_and_cleans_up() {
    let Dev { process: mut dev, state, env, args } = start_dev("dev", &[]).await;
    let xtask = workspace_binary("xtask").unwrap();
    let env_file = state.join("env");
    for key in [
        "KUBECONFIG",
        "MYOWNSHELL_WEBHOOK_URL",
        "MYOWNSHELL_METRICS_URL",
        "MYOWNSHELL_METRICS_TOKEN",
        "MYOWNSHELL_GATEWAY_URL",
        "MYOWNSHELL_OIDC_ISSUER_URL",
    ] {
        assert!(env.get(key).is_some_and(|v| !v.is_empty()), "{key} missing from {env:?}");
    }
    // The gateway serves its page, xterm.js included.
    let gateway = addr_of(&env["MYOWNSHELL_GATEWAY_URL"]);
    for (path, words) in [("/", "<title>MyOwnShell</title>"), ("/vendor/xterm.js", "Terminal")] {
        let (status, body) = https_get(gateway, path, None).await.unwrap();
        assert!(status == 200 && body.contains(words), "{path}: {status}");
    }
    // People sign in through the identity provider dev runs: the page is told where, and the
    // issuer of the env file serves its discovery document (the apiserver trusts it).
    let (status, body) = https_get(gateway, "/api/session", None).await.unwrap();
    assert!(status == 401 && body.contains(r#""signIn":"/oidc/login""#), "{status}: {body}");
    let issuer = &env["MYOWNSHELL_OIDC_ISSUER_URL"];
    let (status, body) = https_get(addr_of(issuer), "/.well-known/openid-configuration", None).await.unwrap();
    assert!(status == 200 && body.contains(&format!(r#""issuer":"{issuer}""#)), "{status}: {body}");

    // A second dev on the same state says so instead of clashing.
    let second = std::process::Command::new(&xtask).args(&args).output().unwrap();
    assert!(!second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("already running"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    // The newcomer's walk-through, with the kubeconfig dev wrote.
    let kubectl = Kubectl::new(&env["KUBECONFIG"]);
    let sample = workspace_root().join("config/samples/myownshell_v1alpha1_myownshell.yaml");
    kubectl.run(&["apply", "-n", "default", "-f", sample.to_str().unwrap()]).await.unwrap().ok().unwrap();
    let defaulted = kubectl
        .run(&["get", "mos", "sample", "-n", "default", "-o", "jsonpath={.spec.size} {.metadata.finalizers}"])
        .await
        .unwrap()
        .ok()
        .unwrap();
    assert_eq!(defaulted, "1 [\"myownshell.io/finalizer\"]", "the webhook defaulted the sample");
    eventually("the Deployment", TIMEOUT, || async {
        let out = kubectl.run(&["get", "deploy", "sample", "-n", "default", "-o", "jsonpath={.spec.replicas}"]).await?;
        if out.success && out.stdout == "1" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", dev.log_tail(40)));
    let on_node = env.get("MYOWNSHELL_CLUSTER").map(String::as_str) == Some("node");
    if on_node {
        // The README's walk-through: a real shell as nobody, and a status from real pods.
        eventually("the sample Ready 1/1 and Available", TIMEOUT, || async {
            let out = kubectl
                .run(&[
                    "get",
                    "mos",
                    "sample",
                    "-n",
                    "default",
                    "-o",
                    "jsonpath={.status.readyReplicas}/{.status.replicas} {.status.conditions[?(@.type==\"Available\")].status}",
                ])
                .await?;
            if out.stdout == "1/1 True" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", dev.log_tail(40)));
        // By the shell's selector, as the README says (a Deployment's name proves nothing).
        let selector = "app.kubernetes.io/name=myownshell,app.kubernetes.io/instance=sample";
        let pods = kubectl.run(&["get", "pods", "-n", "default", "-l", selector, "-o", "name"]).await.unwrap();
        let pod = pods.stdout.lines().next().unwrap_or_else(|| panic!("no pod of the sample: {pods:?}"));
        let id = kubectl.run(&["exec", "-n", "default", pod, "--", "id"]).await.unwrap();
        assert!(id.stdout.starts_with("uid=65534"), "{id:?}");
    } else {
        assert_eq!(env.get("MYOWNSHELL_CLUSTER").map(String::as_str), Some("api-only"));
    }
    kubectl.run(&["scale", "mos/sample", "-n", "default", "--replicas=2"]).await.unwrap().ok().unwrap();
    let denied = kubectl.run(&["scale", "mos/sample", "-n", "default", "--replicas=500"]).await.unwrap();
    assert!(
        !denied.success && denied.stderr.contains("spec.size: must be between 0 and 50, got 500"),
        "{}",
        denied.stderr
    );
    eventually("the Deployment scaled to 2", TIMEOUT, || async {
        let out = kubectl.run(&["get", "deploy", "sample", "-n", "default", "-o", "jsonpath={.spec.replicas}"]).await?;
        if out.stdout == "2" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();

    // Metrics: 200 with the metrics-reader token, 401 without.
    let metrics = addr_of(&env["MYOWNSHELL_METRICS_URL"]);
    let (status, body) = https_get(metrics, "/metrics", Some(&env["MYOWNSHELL_METRICS_TOKEN"])).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("myownshell_controller_reconciles_total"), "{body}");
    let (status, _) = https_get(metrics, "/metrics", None).await.unwrap();
    assert_eq!(status, 401);

    // Delete: Deployment, then the MyOwnShell, are gone.
    kubectl.run(&["delete", "mos", "sample", "-n", "default", "--wait=false"]).await.unwrap().ok().unwrap();
    eventually("the Deployment and the MyOwnShell to be gone", TIMEOUT, || async {
        let out = kubectl.run(&["get", "deploy,mos", "-n", "default", "-o", "name"]).await?;
        if out.success && out.stdout.trim().is_empty() { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", dev.log_tail(40)));

    // SIGTERM: everything it started stops, and the env file goes.
    let pids: Vec<u32> =
        std::fs::read_to_string(state.join("pids")).unwrap().lines().map(|p| p.parse().unwrap()).collect();
    // etcd, kube-apiserver, webhook, controller, gateway, the identity provider (Hydra); on the
    // node also the components, the holder of the cluster network's namespace, the node's
    // processes (containerd, kubelet, kube-proxy, kube-router) and its sandbox.
    let expected = if on_node { 14 } else { 6 };
    assert_eq!(pids.len(), expected, "{pids:?}");
    let status = dev.stop(Duration::from_secs(60)).unwrap();
    assert!(status.success(), "xtask dev exited with {status}\n{}", dev.log_tail(40));
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(!env_file.exists(), "the env file is removed on exit");
}

/// A fresh directory under target/ for this test's state.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir =
        myownshell_envtest::assets::target_dir().join("test-state").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn xtask_dev_runs_the_binaries_against_an_existing_cluster() {
    let cp = myownshell_envtest::shared();
    let client = cp.client().unwrap();
    let ns = myownshell_envtest::create_shell_namespace(&client, "dev-remote").await.unwrap();
    let kubeconfig = cp.kubeconfig_path();
    let Dev { process: mut dev, state, env, .. } =
        start_dev("dev-remote", &[format!("--kubeconfig={}", kubeconfig.display())]).await;
    let env_file = state.join("env");
    assert_eq!(env["KUBECONFIG"], kubeconfig.display().to_string());

    // The controller reconciles in that cluster.
    let kubectl = cp.kubectl();
    let sample = workspace_root().join("config/samples/myownshell_v1alpha1_myownshell_team.yaml");
    kubectl.run(&["apply", "-n", &ns, "-f", sample.to_str().unwrap()]).await.unwrap().ok().unwrap();
    eventually("the Deployment made by the dev controller", TIMEOUT, || async {
        let out = kubectl.run(&["get", "deploy", "team-shells", "-n", &ns, "-o", "jsonpath={.spec.replicas}"]).await?;
        if out.stdout == "3" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", dev.log_tail(40)));

    // The webhook serves the certificate dev made for it, trusted by the CA it wrote.
    let webhook = addr_of(&env["MYOWNSHELL_WEBHOOK_URL"]);
    let ca = std::fs::read_to_string(&env["MYOWNSHELL_WEBHOOK_CA"]).unwrap();
    myownshell_tests::tls_client::HttpsConnection::connect(webhook, Some(&ca), "127.0.0.1").await.unwrap();

    let pids: Vec<u32> =
        std::fs::read_to_string(state.join("pids")).unwrap().lines().map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 3, "webhook, controller and gateway: {pids:?}");
    let status = dev.stop(Duration::from_secs(60)).unwrap();
    assert!(status.success(), "xtask dev exited with {status}\n{}", dev.log_tail(40));
    assert!(pids.iter().all(|p| !alive(*p)), "processes left behind");
    assert!(!env_file.exists());
}
