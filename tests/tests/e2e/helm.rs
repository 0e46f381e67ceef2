//! The Helm chart (`dist/chart`, generated from `config/` by `cargo xtask chart`) as users run
//! it, on a cluster the operator was uninstalled from: `helm install` with the local image,
//! admission and a shell; `helm upgrade` to two webhook replicas, which leaves running shells
//! alone; `helm uninstall`, which keeps the CRD and so every shell; and installing the same
//! release again, which takes the kept CRD back. Then everything goes, for the phases after.
//!
//! `helm` comes from `MYOWNSHELL_HELM`, which `cargo xtask e2e` sets.

use std::path::PathBuf;
use std::time::Instant;

use myownshell_envtest::assets::workspace_root;

use super::{E2e, LOCAL_IMAGE, SYSTEM, WEBHOOK, shell, wait_running};

const RELEASE: &str = "myownshell";
const CRD: &str = "myownshells.myownshell.io";

/// `helm` against the test cluster.
struct Helm {
    binary: PathBuf,
    /// The cluster's kubectl environment: its kubeconfig (`KUBECONFIG`), and helm's client-go
    /// keeps its discovery cache where `KUBECACHEDIR` says, beside the cluster rather than in
    /// `~/.kube/cache`.
    env: [(&'static str, std::ffi::OsString); 3],
}

impl Helm {
    fn new(e2e: &E2e) -> Self {
        let binary = std::env::var_os("MYOWNSHELL_HELM")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("MYOWNSHELL_HELM is not set: run the suite with `cargo xtask e2e`"));
        Self { binary, env: e2e.kubectl.env() }
    }

    async fn run(&self, args: &[&str]) -> String {
        let out = tokio::process::Command::new(&self.binary)
            .envs(self.env.clone())
            .args(args)
            .output()
            .await
            .unwrap_or_else(|e| panic!("running {}: {e}", self.binary.display()));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "helm {}: {}{stdout}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        stdout
    }

    /// `helm install` or `helm upgrade` of the chart with the local image, waiting for Ready.
    async fn deploy(&self, verb: &str, extra_values: &str) {
        let chart = workspace_root().join("dist/chart");
        let (repository, tag) = LOCAL_IMAGE.rsplit_once(':').unwrap();
        let values = format!("image.repository={repository},image.tag={tag},image.pullPolicy=Never{extra_values}");
        let args = [verb, RELEASE, chart.to_str().unwrap(), "-n", SYSTEM, "--set", &values, "--wait", "--timeout=120s"];
        self.run(&args).await;
    }
}

/// Run `step`, then print how long it took.
async fn timed<T>(what: &str, step: impl std::future::Future<Output = T>) -> T {
    let started = Instant::now();
    let out = step.await;
    eprintln!("e2e: helm: {what}: {:.1?}", started.elapsed());
    out
}

pub async fn helm(e2e: &E2e) {
    let helm = Helm::new(e2e);
    // The namespace is not the chart's (Helm keeps the release in it): made and labelled as
    // config/ makes it, so the operator runs under the restricted Pod Security Standard.
    e2e.run(&["create", "namespace", SYSTEM]).await;
    e2e.run(&["label", "namespace", SYSTEM, "pod-security.kubernetes.io/enforce=restricted"]).await;
    timed("helm install to both Deployments Ready", install(e2e, &helm)).await;
    let ns = e2e.namespace("e2e-helm").await;
    timed("admission: a bad spec denied, a good one defaulted", admission(e2e, &ns)).await;
    let pod = timed("a size-1 shell Running, exec", shell_runs(e2e, &ns)).await;
    timed("helm upgrade to 2 webhook replicas, the shell untouched", upgrade(e2e, &helm, &ns, &pod)).await;
    timed("helm uninstall keeps the CRD and the shells", uninstall(e2e, &helm, &ns)).await;
    timed("helm install again takes the kept CRD back, the shells deleted", reinstall(e2e, &helm, &ns)).await;
    timed("helm uninstall, the CRD and the namespaces deleted", remove(e2e, &helm, &ns)).await;
}

async fn install(e2e: &E2e, helm: &Helm) {
    helm.deploy("install", "").await;
    e2e.rollout_operator().await;
    assert_eq!(e2e.operator_pods().await, super::operator_pods());
    let managed =
        e2e.run(&["get", "deploy", "-n", SYSTEM, "-l", "app.kubernetes.io/managed-by=Helm", "-o", "name"]).await;
    assert_eq!(managed.lines().count(), 3, "the three Deployments labelled as Helm's: {managed}");
}

/// Through the webhook the chart installed: denied by field, defaulted with the finalizer.
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

/// A size-1 shell gets a Running pod one can exec into; returns the pod's name and uid.
async fn shell_runs(e2e: &E2e, ns: &str) -> (String, String) {
    e2e.apply(ns, &shell("work", 1)).await.unwrap();
    let pod = wait_running(e2e, ns, "work", 1).await.remove(0);
    let id = e2e.run(&["exec", "-n", ns, &pod, "--", "id"]).await;
    assert!(id.starts_with("uid=65534"), "{id}");
    let uid = e2e.run(&["get", "pod", &pod, "-n", ns, "-o", "jsonpath={.metadata.uid}"]).await;
    (pod, uid)
}

/// A changed value rolls out (two webhook replicas, both Ready) and nothing else: the shell's
/// pod is the same pod, and admission still answers (the upgrade left the injected caBundle).
async fn upgrade(e2e: &E2e, helm: &Helm, ns: &str, (pod, uid): &(String, String)) {
    helm.deploy("upgrade", ",webhook.replicas=2").await;
    e2e.rollout(WEBHOOK).await;
    let ready = e2e.run(&["get", "deploy", WEBHOOK, "-n", SYSTEM, "-o", "jsonpath={.status.readyReplicas}"]).await;
    assert_eq!(ready, "2", "both webhook replicas Ready");
    let pods = wait_running(e2e, ns, "work", 1).await;
    assert_eq!(&pods, std::slice::from_ref(pod), "the shell's pod was replaced by the upgrade");
    let now = e2e.run(&["get", "pod", pod, "-n", ns, "-o", "jsonpath={.metadata.uid}"]).await;
    assert_eq!(&now, uid, "the shell's pod was recreated by the upgrade");
    let denied = e2e.apply(ns, &shell("too-big", 500)).await.unwrap_err();
    assert!(denied.contains("spec.size"), "after the upgrade: {denied}");
    let history = helm.run(&["history", RELEASE, "-n", SYSTEM, "-o", "json"]).await;
    assert!(history.contains("\"revision\":2") && history.contains("\"status\":\"deployed\""), "{history}");
}

/// The operator goes; the CRD, the shells and their pods stay.
async fn uninstall(e2e: &E2e, helm: &Helm, ns: &str) {
    helm.run(&["uninstall", RELEASE, "-n", SYSTEM, "--wait", "--timeout=120s"]).await;
    e2e.wait_for("the operator's Deployments gone", &["get", "deploy", "-n", SYSTEM, "-o", "name"], |out| {
        out.trim().is_empty()
    })
    .await;
    let hooks = e2e.run(&["get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "name"]).await;
    assert!(!hooks.contains("myownshell"), "webhook configurations left: {hooks}");
    let kept = e2e.run(&["get", "crd", CRD, "-o", "jsonpath={.metadata.annotations.helm\\.sh/resource-policy}"]).await;
    assert_eq!(kept, "keep", "the CRD is kept");
    let shells = e2e.run(&["get", "mos", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"]).await;
    assert_eq!(shells, "defaulted work", "every MyOwnShell is still there");
    wait_running(e2e, ns, "work", 1).await;
}

/// Installing the release again takes the kept CRD back (its release annotations match), and
/// the controller is back to delete the shells.
async fn reinstall(e2e: &E2e, helm: &Helm, ns: &str) {
    helm.deploy("install", "").await;
    e2e.run(&["delete", "mos", "--all", "-n", ns, "--timeout=60s"]).await;
    e2e.wait_for("the shell's Deployment gone", &["get", "deploy", "-n", ns, "-o", "name"], |out| {
        out.trim().is_empty()
    })
    .await;
}

/// Everything goes, for the phases after: the release, the CRD, both namespaces.
async fn remove(e2e: &E2e, helm: &Helm, ns: &str) {
    helm.run(&["uninstall", RELEASE, "-n", SYSTEM, "--wait", "--timeout=120s"]).await;
    e2e.run(&["delete", "crd", CRD, "--timeout=60s"]).await;
    e2e.run(&["delete", "namespace", ns, SYSTEM, "--wait=false"]).await;
    e2e.namespaces_gone(&[ns, SYSTEM]).await;
}
