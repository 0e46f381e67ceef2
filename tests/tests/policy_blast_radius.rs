//! The policies with the MyOwnShell as their parameter kind never stop work outside shells,
//! whatever state the MyOwnShell API is in. `config/policy/services_proxy.yaml` and
//! `shell_names.yaml` are `failurePolicy: Fail` with MyOwnShells as parameters, and an apiserver
//! that cannot resolve a parameter kind refuses every request they match (before any
//! matchCondition runs). Tried here on the real apiserver, as a namespace editor, for each way the
//! parameter kind can be missing: the CRD deleted with the policies left, the policies applied
//! before the CRD exists, and the first moments after an apiserver restart. Those policies look
//! only at namespaces opted in to shells (`myownshell.io/shells: enabled`, which only a cluster
//! administrator sets); in every other namespace, `kube-system` included, exec into pods (named
//! like a Deployment's) and creating Deployments keep working through all of it, and the rule
//! closes again for shells once the CRD is back. (Before the opt-in, the connect policy of the
//! time, applied before the CRD, refused such an exec in every namespace: "paramKind … not yet
//! synced to use for admission".) Its own control plane: it deletes the CRD.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use myownshell_envtest::{ControlPlane, Kubectl, create_namespace, create_shell_namespace, eventually};
use myownshell_tests::access::{install_policies, kubectl_as, namespace_editors, shell_manifest};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);
const AUTH: &[&str] = &["system:authenticated"];
/// Named as a Deployment's pod, so every policy's matchConditions let it through to the params.
const PLAIN_POD: &str = "api-7d9f8c6b4-x2x4z";
const CRD: &str = "myownshells.myownshell.io";

/// Exec as bob into `pod` of `ns` got through admission (and failed after it: no node here).
async fn admitted(kubectl: &Kubectl, ns: &str, pod: &str) -> Result<(), String> {
    let out = kubectl_as(kubectl, "bob", AUTH, &["exec", "-n", ns, pod, "--", "true"]).await;
    if out.stderr.contains("does not have a host assigned") { Ok(()) } else { Err(out.stderr) }
}

/// A Deployment bob creates in `ns` (a server-side dry run) gets through admission: the policy
/// on workloads named as shells (`shell_names.yaml`) has the MyOwnShell as its parameter too.
async fn deployment_admitted(kubectl: &Kubectl, ns: &str) -> Result<(), String> {
    let args = ["create", "deployment", "app", "-n", ns, "--image=busybox:1.37.0", "--dry-run=server"];
    let out = kubectl_as(kubectl, "bob", AUTH, &args).await;
    if out.success { Ok(()) } else { Err(out.stderr) }
}

/// An allow-all NetworkPolicy bob creates in `ns` (a server-side dry run) gets through admission:
/// the shell-network policy (`shell_network.yaml`) looks only at namespaces opened to shells.
async fn network_policy_admitted(kubectl: &Kubectl, ns: &str) -> Result<(), String> {
    let policy = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"allow-all"},"spec":{"podSelector":{},"ingress":[{}],"egress":[{}]}}"#;
    let mut args = myownshell_tests::access::as_user("bob", AUTH);
    args.extend(["create", "-n", ns, "--dry-run=server", "-f", "-"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = kubectl.run_with_stdin(&args, Some(policy)).await?;
    if out.success { Ok(()) } else { Err(out.stderr) }
}

/// For `span`, every exec as bob into the plain pods of `namespaces`, and every Deployment and
/// allow-all NetworkPolicy he creates there, gets through admission.
async fn keeps_admitting(kubectl: &Kubectl, namespaces: &[&str], span: Duration, what: &str) {
    let started = Instant::now();
    let mut tries = 0;
    while started.elapsed() < span || tries == 0 {
        for ns in namespaces {
            if let Err(e) = admitted(kubectl, ns, PLAIN_POD).await {
                panic!("{what}: bob's exec into {ns}/{PLAIN_POD} was refused after {tries} admitted: {e}");
            }
            if let Err(e) = deployment_admitted(kubectl, ns).await {
                panic!("{what}: bob's Deployment in {ns} was refused after {tries} admitted: {e}");
            }
            if let Err(e) = network_policy_admitted(kubectl, ns).await {
                panic!("{what}: bob's NetworkPolicy in {ns} was refused after {tries} admitted: {e}");
            }
            tries += 1;
        }
    }
    eprintln!("policy blast radius: {what}: {tries} execs admitted in {:.1?}", started.elapsed());
}

async fn plain_pod(client: &kube::Client, ns: &str) {
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": PLAIN_POD},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.37.0"}]}}))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns).create(&PostParams::default(), &pod).await.unwrap();
}

/// bob is refused, eventually, a Deployment named as alice's shell `web` in `ns` (the
/// `shell-names` policy, which takes the namespace's MyOwnShells as parameters).
async fn shell_refuses_bob(kubectl: &Kubectl, ns: &str) {
    eventually("bob refused a Deployment named as alice's shell", TIMEOUT, || async {
        let args = ["create", "deployment", "web", "-n", ns, "--image=busybox:1.37.0", "--dry-run=server"];
        let out = kubectl_as(kubectl, "bob", AUTH, &args).await;
        if !out.success && out.stderr.contains("the name is shell web's") { Ok(()) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
}

async fn crd_gone(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds.delete(CRD, &DeleteParams::default()).await;
    eventually("the CRD gone", TIMEOUT, || async {
        match crds.get_opt(CRD).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn exec_outside_shells_never_waits_on_the_myownshell_api() {
    let cp = ControlPlane::start().await.unwrap();
    let (client, kubectl) = (cp.client().unwrap(), cp.kubectl());
    install_policies(&kubectl).await.unwrap();
    let shells = create_shell_namespace(&client, "blast-shells").await.unwrap();
    let plain = create_namespace(&client, "blast-plain").await.unwrap();
    for ns in [shells.as_str(), plain.as_str(), "kube-system"] {
        namespace_editors(&client, ns, &["alice", "bob"], &[]).await.unwrap();
        plain_pod(&client, ns).await;
    }
    // Made by the admin with its owner written in (no webhook runs here to stamp it).
    let manifest = shell_manifest("web", "{size: 1, owner: alice}");
    let created = kubectl.run_with_stdin(&["apply", "-n", &shells, "-f", "-"], Some(&manifest)).await.unwrap();
    assert!(created.success, "{}", created.stderr);
    shell_refuses_bob(&kubectl, &shells).await;
    // A shell outside an opted-in namespace is refused: the gate would not look there.
    let outside = kubectl.run_with_stdin(&["apply", "-n", &plain, "-f", "-"], Some(&manifest)).await.unwrap();
    assert!(
        !outside.success && outside.stderr.contains("is not open to shells: a cluster administrator opts it in"),
        "{}",
        outside.stderr
    );
    let everywhere = [plain.as_str(), "kube-system"];
    keeps_admitting(&kubectl, &everywhere, Duration::ZERO, "with the CRD").await;
    admitted(&kubectl, &shells, PLAIN_POD).await.unwrap();

    // 1. The CRD deleted, the policies left in place.
    crd_gone(&client).await;
    keeps_admitting(&kubectl, &everywhere, Duration::from_secs(5), "the CRD deleted").await;

    // 2. The policies applied while there is no CRD (as a careless install order would).
    let objects = myownshell_envtest::kustomize::render("policy").unwrap();
    let refs: Vec<&serde_json::Value> = objects.iter().collect();
    let list = myownshell_envtest::kustomize::as_list(&refs);
    assert!(kubectl.run_with_stdin(&["delete", "-f", "-"], Some(&list)).await.unwrap().success);
    let applied = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&list)).await.unwrap();
    assert!(applied.success, "{}", applied.stderr);
    keeps_admitting(&kubectl, &everywhere, Duration::from_secs(5), "the policies applied before the CRD").await;

    // The CRD back: the gate closes again for shells (the shell itself went with the CRD).
    cp.install_crds().await.unwrap();
    let created = kubectl.run_with_stdin(&["apply", "-n", &shells, "-f", "-"], Some(&manifest)).await.unwrap();
    assert!(created.success, "{}", created.stderr);
    shell_refuses_bob(&kubectl, &shells).await;

    // 3. An apiserver restart: from the moment it is ready, while it discovers the CRD again.
    cp.stop_apiserver().unwrap();
    cp.start_apiserver().await.unwrap();
    keeps_admitting(&kubectl, &everywhere, Duration::from_secs(5), "right after an apiserver restart").await;
    shell_refuses_bob(&kubectl, &shells).await;
}
