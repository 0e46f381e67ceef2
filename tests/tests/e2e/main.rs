//! The operator deployed from `config/` onto the real node, end to end, as kubebuilder's e2e
//! suite does on Kind: the manifests, the images, the RBAC and the pods are the ones users get.
//!
//! One test with phases in order, because the phases share one installation and later ones
//! take it apart (leader failover, uninstall, the production overlay). Each phase says what
//! it was doing when it fails, and prints how long it took.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod access;
mod certmanager;
mod doors;
mod failures;
mod gateway;
mod gateway_browser;
mod helm;
mod home;
mod lifetime;
mod nodes;
mod oauth2_proxy;
mod oidc;
mod page;
mod prometheus;
mod rolling;
mod sessions;
mod upgrade;

use std::time::{Duration, Instant};

use myownshell_envtest::assets::workspace_root;
use myownshell_envtest::node::{self, Cluster, ClusterOptions};
use myownshell_envtest::oidc::Provider;
use myownshell_envtest::{Kubectl, eventually};

/// Pods start in seconds here; rollouts of two Deployments, a certificate and a lease take a
/// little longer.
const TIMEOUT: Duration = Duration::from_secs(120);
const SYSTEM: &str = "myownshell-system";
const CONTROLLER: &str = "myownshell-controller-manager";
const WEBHOOK: &str = "myownshell-webhook";
const GATEWAY: &str = "myownshell-gateway";
const LOCAL_IMAGE: &str = "localhost/myownshell:local";
const RELEASE_IMAGE: &str = "ghcr.io/myownshell/myownshell:0.1.0";

struct E2e {
    cluster: Cluster,
    kubectl: Kubectl,
    /// The test bed's Ory Hydra on the host, which the apiserver trusts (`oidc.rs`).
    provider: Provider,
}

impl E2e {
    async fn run(&self, args: &[&str]) -> String {
        let out = self.kubectl.run(args).await.unwrap();
        assert!(out.success, "kubectl {}: {}{}", args.join(" "), out.stdout, out.stderr);
        out.stdout
    }

    async fn try_run(&self, args: &[&str]) -> Result<String, String> {
        let out = self.kubectl.run(args).await?;
        if out.success { Ok(out.stdout) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    }

    async fn apply(&self, ns: &str, manifest: &str) -> Result<String, String> {
        let out = self.kubectl.apply(ns, manifest).await?;
        if out.success { Ok(out.stdout) } else { Err(out.stderr) }
    }

    /// Poll `kubectl args` until `accept` says yes; report the last output on timeout.
    async fn wait_for(&self, what: &str, args: &[&str], accept: impl Fn(&str) -> bool) -> String {
        eventually(what, TIMEOUT, || async {
            let out = self.try_run(args).await?;
            if accept(&out) { Ok(out) } else { Err(out) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.diagnostics()))
    }

    /// Delete every MyOwnShell and wait, with a deadline, until none is left; on timeout, the
    /// ones left with their finalizers and deletion times. Not `kubectl delete --timeout`:
    /// kubectl then waits for each object in turn, under its client-side rate limit, and with a
    /// few hundred shells that wait ran out of time ("client rate limiter Wait returned an
    /// error") while the shells were still going, with nothing said of which were left or why.
    async fn delete_every_shell(&self) {
        let started = Instant::now();
        let deleted = self.run(&["delete", "mos", "--all", "--all-namespaces", "--wait=false"]).await;
        let columns = "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,FINALIZERS:.metadata.finalizers,DELETING:.metadata.deletionTimestamp";
        eventually("every MyOwnShell gone", TIMEOUT, || async {
            let left = self.try_run(&["get", "mos", "--all-namespaces", "--no-headers", "-o", columns]).await?;
            let lines: Vec<&str> = left.lines().collect();
            if lines.is_empty() {
                Ok(())
            } else {
                Err(format!("{} left, the first of them:\n{}", lines.len(), lines[..lines.len().min(10)].join("\n")))
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.diagnostics()));
        eprintln!("e2e: {} MyOwnShells deleted and gone in {:.1?}", deleted.lines().count(), started.elapsed());
    }

    /// Wait, with a deadline, until every namespace of `namespaces` is gone, touching each one
    /// (an annotation) once it is being deleted and its pods are gone.
    ///
    /// Why the touch: kube-controller-manager's namespace controller, finding pods left in a
    /// namespace it deletes, looks again only after half the longest
    /// `terminationGracePeriodSeconds` in their specs plus a second
    /// (`pkg/controller/namespace`), however soon they go: 31 s for the gateway's 60 s, though
    /// its pod exits in about 6 s with nobody connected. It also looks again 5 s after any
    /// change to the namespace. Three phases uninstall the operator and each waited out that
    /// estimate. The namespace controller still removes everything itself, and the wait is
    /// for the same thing: the namespace gone.
    async fn namespaces_gone(&self, namespaces: &[&str]) {
        let touched: Vec<std::cell::Cell<bool>> = namespaces.iter().map(|_| std::cell::Cell::new(false)).collect();
        let what = format!("{} gone", namespaces.join(", "));
        eventually(&what, TIMEOUT, || async {
            let mut left = Vec::new();
            for (ns, touched) in namespaces.iter().zip(&touched) {
                // Nothing when the namespace is gone; its name and when its deletion began.
                let jsonpath = "jsonpath={.metadata.name} {.metadata.deletionTimestamp}";
                let seen = self.try_run(&["get", "namespace", ns, "--ignore-not-found", "-o", jsonpath]).await?;
                let Some((_, deleting)) = seen.trim().split_once(' ') else {
                    if seen.trim().is_empty() {
                        continue;
                    }
                    left.push(format!("{ns} (not being deleted)"));
                    continue;
                };
                let pods = self.try_run(&["get", "pods", "-n", ns, "-o", "name"]).await?;
                if !touched.get() && pods.trim().is_empty() {
                    // The namespace may be gone by now: the next poll says.
                    let _ = self
                        .try_run(&["annotate", "namespace", ns, "--overwrite", "e2e.myownshell.io/pods-gone=true"])
                        .await;
                    touched.set(true);
                }
                left.push(format!("{ns} (deleting since {deleting}; pods: {:?})", pods.trim()));
            }
            if left.is_empty() { Ok(()) } else { Err(left.join("; ")) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.diagnostics()));
    }

    /// What the operator's pods said last, for failures.
    fn diagnostics(&self) -> String {
        let dir = &self.cluster.control_plane().layout().dir;
        format!(
            "(cluster logs in {}; kubelet: {})",
            dir.display(),
            self.cluster.node_config().dir.join("kubelet.log").display()
        )
    }

    async fn rollout(&self, deployment: &str) {
        let args = ["rollout", "status", "-n", SYSTEM, &format!("deployment/{deployment}"), "--timeout=120s"];
        if let Err(e) = self.try_run(&args).await {
            let pods = self.try_run(&["get", "pods", "-n", SYSTEM, "-o", "wide"]).await.unwrap_or_else(|e| e);
            let events = self.try_run(&["get", "events", "-n", SYSTEM]).await.unwrap_or_else(|e| e);
            panic!("{deployment} did not roll out: {e}\n{pods}\n{events}\n{}", self.diagnostics());
        }
    }

    /// The operator's three Deployments rolled out.
    async fn rollout_operator(&self) {
        for deployment in [CONTROLLER, WEBHOOK, GATEWAY] {
            self.rollout(deployment).await;
        }
    }

    /// `kubectl kustomize overlay` (a directory) with its image `from` pointed at `to`, applied
    /// server-side; what was applied.
    async fn apply_overlay(&self, overlay: &str, from: &str, to: &str) -> String {
        let rendered = self.run(&["kustomize", overlay]).await;
        assert!(rendered.contains(from), "{overlay} no longer names the image {from}");
        let manifest = rendered.replace(from, to);
        let args = ["apply", "--server-side", "--force-conflicts", "-f", "-"];
        let out = self.kubectl.run_with_stdin(&args, Some(&manifest)).await.unwrap();
        assert!(out.success, "{}", out.stderr);
        manifest
    }

    /// The operator's pods, one line each, `ServiceAccount image ready`, sorted.
    async fn operator_pods(&self) -> Vec<String> {
        let jsonpath = "jsonpath={range .items[*]}{.spec.serviceAccountName} {.spec.containers[0].image} {.status.containerStatuses[0].ready}{\"\\n\"}{end}";
        let pods = self.run(&["get", "pods", "-n", SYSTEM, "-o", jsonpath]).await;
        let mut lines: Vec<String> = pods.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    }

    async fn namespace(&self, prefix: &str) -> String {
        let client = self.cluster.control_plane().client().unwrap();
        myownshell_envtest::create_shell_namespace(&client, prefix).await.unwrap()
    }

    fn overlay(name: &str) -> String {
        workspace_root().join("config/overlays").join(name).display().to_string()
    }
}

fn shell(name: &str, size: i32) -> String {
    format!("apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: {name}\nspec:\n  size: {size}\n")
}

/// Run one phase and print how long it took (and note it where [`node::E2E_PHASES_ENV`] says).
async fn phase(name: &str, run: impl std::future::Future<Output = ()>) {
    let started = Instant::now();
    run.await;
    let took = started.elapsed();
    eprintln!("e2e: {name}: {took:.1?}");
    if let Some(path) = std::env::var_os(node::E2E_PHASES_ENV) {
        use std::io::Write;
        let line = format!("{:.1}\t{}\n", took.as_secs_f64(), name.replace(['\t', '\n'], " "));
        let noted = std::fs::OpenOptions::new().create(true).append(true).open(&path);
        if let Err(e) = noted.and_then(|mut file| file.write_all(line.as_bytes())) {
            eprintln!("e2e: could not note the phase's time in {}: {e}", std::path::Path::new(&path).display());
        }
    }
}

/// The images `cargo xtask e2e` built for the nodes (`MYOWNSHELL_NODE_IMAGES`).
fn node_images() -> Vec<std::path::PathBuf> {
    std::env::var_os("MYOWNSHELL_NODE_IMAGES")
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_operator_from_config_end_to_end() {
    // Two nodes: the production overlay's replicas spread, and one node can be lost or drained.
    let started = Instant::now();
    let (provider, apiserver_args) = oidc::trusted_provider().await;
    let cluster = Cluster::start(ClusterOptions { nodes: 2, images: node_images(), apiserver_args })
        .await
        .unwrap_or_else(|e| panic!("the two-node cluster: {e}"));
    eprintln!("e2e: {}; Hydra at {} ({:.1?})", cluster.summary(), provider.issuer(), started.elapsed());
    let mut e2e = E2e { kubectl: cluster.control_plane().kubectl(), cluster, provider };
    phase("install the previous release from its own manifests and image", upgrade::install_previous(&e2e)).await;
    phase("upgrade to this release with shells in use: no pod restarted, no apply refused", upgrade::upgrade(&e2e))
        .await;
    phase("this release from config/overlays/local: the three Deployments Ready", install(&e2e)).await;
    phase("webhook certificate and admission through the Service", admission_through_the_service(&e2e)).await;
    phase("the webhook restarted 3 times under CPU load: no apply refused", rolling::roll_under_load(&e2e)).await;
    phase("shells: pods, exec, resize, repair", shells_run_as_real_pods(&e2e)).await;
    phase("access: the owner and those shared with get in, nobody else", access::access(&e2e)).await;
    phase(
        "the gateway in Chromium: sign in, `id -u`, the same shell after a reload, a stranger refused, the stop \
         warning and Extend, a recording for auditors only",
        gateway::in_a_browser(&e2e),
    )
    .await;
    phase(
        "the same through oauth2-proxy in front of the gateway: alice signs in on Hydra's login page, `id -u`; bob \
         refused by the connect gate; another origin's requests with alice's cookie refused",
        oauth2_proxy::through_oauth2_proxy(&e2e),
    )
    .await;
    phase(
        "sessions: a terminal held in the shell's pod through a rollout of the gateway, joined read-only, refused to a \
         stranger, closed when access is lost, and gone with every process of it",
        sessions::sessions_and_rollout(&e2e),
    )
    .await;
    phase(
        "doors on the node: docs/doors.yaml's node rows as owner, sharee, editor, stranger and pod",
        doors::doors(&e2e),
    )
    .await;
    phase(
        "lifetime: idle stops with a warning, extend, start, maxRunTime, deletePausedAfter",
        lifetime::lifetime(&e2e),
    )
    .await;
    phase(
        "home: a file in $HOME survives a stop and start, a restarting change and the pod's deletion",
        home::home(&e2e),
    )
    .await;
    phase(
        "the page without kubectl in Chromium: no class granted says why; create from the default class, open, stop, \
         start (the home kept), extend, delete; its accessibility",
        page::without_kubectl(&e2e),
    )
    .await;
    phase("failures: bad image, crash loop, OOM, unschedulable, a namespace being deleted", failures::failures(&e2e))
        .await;
    phase("metrics from pods: 200 / 403 / 401 on both Services", metrics_from_inside_the_cluster(&e2e)).await;
    phase(
        "prometheus: config/prometheus's jobs scraped, its rules evaluated, ControllerDown pending with no controller",
        prometheus::prometheus(&e2e),
    )
    .await;
    phase("leader failover", leader_failover(&e2e)).await;
    phase("deleting a shell and a namespace of shells", deletion(&e2e)).await;
    phase("uninstall: the shells, then kubectl delete -k config/overlays/local", uninstall(&e2e)).await;
    phase("helm: install, admission, a shell, upgrade, uninstall keeps the CRD", helm::helm(&e2e)).await;
    phase(
        "cert-manager: its certificate served, its CA injected, admission, a renewal with no apply refused",
        certmanager::cert_manager(&e2e),
    )
    .await;
    phase("the production overlay on two nodes: every replica Ready, spread, budgets", production_overlay(&e2e)).await;
    phase("losing a node: shells move, leadership moves, admission answers", nodes::lose_a_node(&mut e2e)).await;
    phase("kubectl drain of a node with shells and operator pods", nodes::drain(&e2e)).await;
    phase("a home on a local volume through a drain and a node loss", nodes::home_on_a_lost_node(&mut e2e)).await;
    let E2e { cluster, .. } = e2e;
    cluster.stop().unwrap();
}

/// `kubectl apply -k` of the local overlay; the three Deployments Ready, each pod as its own
/// ServiceAccount, running the local image.
async fn install(e2e: &E2e) {
    e2e.run(&["apply", "--server-side", "--force-conflicts", "-k", &E2e::overlay("local")]).await;
    e2e.rollout_operator().await;
    assert_eq!(e2e.operator_pods().await, operator_pods());
}

/// What `operator_pods` lists for the local overlay on the local image: one controller, one
/// webhook, and the gateway's two replicas (it runs two wherever it runs: pages reattach
/// through either).
fn operator_pods() -> [String; 4] {
    ["controller", "gateway", "gateway", "webhook"].map(|c| format!("myownshell-{c} {LOCAL_IMAGE} true"))
}

/// The webhook made its certificate, stored it, injected its CA into both configurations
/// before it said Ready; through the Service a bad spec is denied by field and a good one is
/// defaulted with the finalizer.
async fn admission_through_the_service(e2e: &E2e) {
    let secret_ca = e2e
        .run(&["get", "secret", "myownshell-webhook-server-cert", "-n", SYSTEM, "-o", "jsonpath={.data.ca\\.crt}"])
        .await;
    assert!(!secret_ca.is_empty(), "the webhook's Secret has no CA");
    for kind in ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"] {
        let name = format!("myownshell-{}-webhook-configuration", kind.trim_end_matches("webhookconfiguration"));
        let bundle = e2e.run(&["get", kind, &name, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}"]).await;
        assert_eq!(bundle, secret_ca, "{name}'s caBundle is the Secret's CA");
    }
    // Readiness only after injection: the webhook's write of the caBundle (an Update in
    // managedFields; kubectl's is an Apply) is no later than the moment its pod turned Ready.
    let updates = e2e
        .run(&[
            "get",
            "validatingwebhookconfiguration",
            "myownshell-validating-webhook-configuration",
            "-o",
            "jsonpath={.metadata.managedFields[?(@.operation==\"Update\")].time}",
        ])
        .await;
    let injected = updates.split_whitespace().max().unwrap_or_default().to_owned();
    let ready = e2e
        .run(&[
            "get",
            "pods",
            "-n",
            SYSTEM,
            "-l",
            "app.kubernetes.io/component=webhook",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].lastTransitionTime}",
        ])
        .await;
    assert!(!injected.is_empty(), "no Update in the configuration's managedFields: nobody injected the caBundle");
    assert!(injected.as_str() <= ready.as_str(), "caBundle injected at {injected}, pod Ready at {ready}");

    let ns = e2e.namespace("e2e-admission").await;
    let denied = e2e.apply(&ns, &shell("too-big", 500)).await.unwrap_err();
    assert!(denied.contains("spec.size: must be between 0 and 50, got 500"), "{denied}");
    let bad_type = e2e
        .apply(
            &ns,
            "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: typo\nspec:\n  size: \"3\"\n",
        )
        .await
        .unwrap_err();
    assert!(bad_type.contains("spec.size"), "{bad_type}");
    e2e.apply(&ns, "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: defaulted\nspec: {}\n")
        .await
        .unwrap();
    let defaulted = e2e
        .run(&[
            "get",
            "mos",
            "defaulted",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.size} {.spec.image} {.metadata.finalizers}",
        ])
        .await;
    assert_eq!(
        defaulted,
        format!("1 {} [\"myownshell.io/finalizer\"]", myownshell_api::defaults::IMAGE),
        "defaulted through the Service"
    );
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

async fn shell_pods(e2e: &E2e, ns: &str, name: &str) -> Vec<String> {
    let out = e2e
        .run(&[
            "get",
            "pods",
            "-n",
            ns,
            "-l",
            &format!("app.kubernetes.io/instance={name}"),
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
        ])
        .await;
    out.lines().map(str::to_owned).collect()
}

/// Running pods, not on their way out.
fn running(pods: &[String]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| match p.split_whitespace().collect::<Vec<_>>()[..] {
            [name, "Running"] => Some(name.to_owned()),
            _ => None,
        })
        .collect()
}

async fn wait_running(e2e: &E2e, ns: &str, name: &str, count: usize) -> Vec<String> {
    eventually(&format!("{count} Running pods of {name}"), TIMEOUT, || async {
        let pods = shell_pods(e2e, ns, name).await;
        let up = running(&pods);
        if up.len() == count && pods.len() == count { Ok(up) } else { Err(format!("{pods:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", e2e.diagnostics()))
}

async fn status(e2e: &E2e, ns: &str, name: &str) -> String {
    e2e.run(&[
        "get",
        "mos",
        name,
        "-n",
        ns,
        "-o",
        "jsonpath={.status.replicas}/{.status.readyReplicas} {.status.conditions[?(@.type==\"Available\")].status}",
    ])
    .await
}

/// A size-2 shell is two real pods, locked down as the controller builds them; resizes,
/// deleted pods and hand edits converge.
async fn shells_run_as_real_pods(e2e: &E2e) {
    let ns = e2e.namespace("e2e-shells").await;
    // At the strictest Pod Security level (which README asks of namespaces with shells): the
    // shell's pods meet it, and the shell is admitted without the policy's warning.
    e2e.run(&["label", "namespace", &ns, "pod-security.kubernetes.io/enforce=restricted"]).await;
    let started = Instant::now();
    let out = e2e.kubectl.apply(&ns, &shell("work", 2)).await.unwrap();
    assert!(out.success && !out.stderr.contains("Pod Security"), "{}", out.stderr);
    let pods = wait_running(e2e, &ns, "work", 2).await;
    eprintln!("e2e: kubectl apply of a size-2 shell to 2 Running pods: {:.1?}", started.elapsed());

    let pod = &pods[0];
    let id = e2e.run(&["exec", "-n", &ns, pod, "--", "id"]).await;
    assert!(id.starts_with("uid=65534"), "{id}");
    let root = e2e.kubectl.run(&["exec", "-n", &ns, pod, "--", "touch", "/written"]).await.unwrap();
    assert!(!root.success && root.stderr.contains("Read-only file system"), "writing to / must fail: {root:?}");
    let tmp =
        e2e.run(&["exec", "-n", &ns, pod, "--", "sh", "-c", "echo hi > /tmp/x && cat /tmp/x && echo $HOME"]).await;
    assert_eq!(tmp, "hi\n/tmp\n");

    eventually("status 2/2 and Available=True", TIMEOUT, || async {
        let s = status(e2e, &ns, "work").await;
        if s == "2/2 True" { Ok(()) } else { Err(s) }
    })
    .await
    .unwrap();

    // Resize to 0: pods go, status follows.
    e2e.run(&["scale", "mos/work", "-n", &ns, "--replicas=0"]).await;
    wait_running(e2e, &ns, "work", 0).await;
    eventually("status 0 replicas", TIMEOUT, || async {
        let s = status(e2e, &ns, "work").await;
        if s.starts_with("0/") { Ok(()) } else { Err(s) }
    })
    .await
    .unwrap();

    // A pod deleted by hand is replaced.
    e2e.run(&["scale", "mos/work", "-n", &ns, "--replicas=1"]).await;
    let before = wait_running(e2e, &ns, "work", 1).await;
    e2e.run(&["delete", "pod", "-n", &ns, &before[0], "--wait=false"]).await;
    eventually("a replacement pod", TIMEOUT, || async {
        let up = running(&shell_pods(e2e, &ns, "work").await);
        if up.len() == 1 && up[0] != before[0] { Ok(()) } else { Err(format!("{up:?}")) }
    })
    .await
    .unwrap();

    // A hand edit of the Deployment is reverted.
    e2e.run(&["scale", "deployment/work", "-n", &ns, "--replicas=3"]).await;
    e2e.wait_for(
        "the controller to put replicas back to 1",
        &["get", "deploy", "work", "-n", &ns, "-o", "jsonpath={.spec.replicas}"],
        |r| r == "1",
    )
    .await;
    wait_running(e2e, &ns, "work", 1).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

/// `curl` from a pod to `https://IP:PORT/metrics`: the HTTP status it got.
async fn scrape_from_pod(e2e: &E2e, ns: &str, pod: &str, url: &str, with_token: bool) -> u16 {
    let header = if with_token {
        "-H \"Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)\""
    } else {
        ""
    };
    // The serving certificate is the binaries' own self-signed one (cert-manager's overlay
    // is the verified variant), so, like the tests on the host, the client does not verify it.
    let script = format!("curl -sk -o /dev/null -w '%{{http_code}}' {header} {url}");
    let out = e2e.kubectl.run(&["exec", "-n", ns, pod, "--", "sh", "-c", &script]).await.unwrap();
    out.stdout.trim().parse().unwrap_or_else(|_| panic!("no HTTP status from curl: {out:?}"))
}

/// The probe image (busybox and curl, [`node::images::PROBE_IMAGE`]) built and on the nodes.
fn import_probe_image(e2e: &E2e) {
    let archive = myownshell_envtest::assets::target_dir().join("images/probe.tar");
    node::images::build_probe(&archive, &myownshell_envtest::assets::target_dir().join("images/probe-work")).unwrap();
    e2e.cluster.import_image(&archive).unwrap();
}

/// From inside the cluster, through both metrics Services: 200 with a token bound to
/// metrics-reader, 403 with a token that is not, 401 without a token.
async fn metrics_from_inside_the_cluster(e2e: &E2e) {
    let ns = e2e.namespace("e2e-metrics").await;
    import_probe_image(e2e);
    let pod = |name: &str, sa: &str| {
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {sa}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  serviceAccountName: {sa}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: probe\n    image: {}\n    command: [sleep, \"3600\"]\n",
            node::images::PROBE_IMAGE
        )
    };
    e2e.apply(&ns, &pod("reader", "reader")).await.unwrap();
    e2e.apply(&ns, &pod("stranger", "stranger")).await.unwrap();
    e2e.run(&[
        "create",
        "clusterrolebinding",
        &format!("{ns}-reader"),
        "--clusterrole=myownshell-metrics-reader",
        &format!("--serviceaccount={ns}:reader"),
    ])
    .await;
    for name in ["reader", "stranger"] {
        e2e.wait_for(
            &format!("pod {name} Running"),
            &["get", "pod", name, "-n", &ns, "-o", "jsonpath={.status.phase}"],
            |p| p == "Running",
        )
        .await;
    }
    for service in ["myownshell-controller-metrics-service", "myownshell-webhook-metrics-service"] {
        let ip = e2e.run(&["get", "service", service, "-n", SYSTEM, "-o", "jsonpath={.spec.clusterIP}"]).await;
        let url = format!("https://{ip}:8443/metrics");
        // The binding takes effect when the SubjectAccessReview cache lets it: poll.
        eventually(&format!("200 from {service} for the bound reader"), TIMEOUT, || async {
            match scrape_from_pod(e2e, &ns, "reader", &url, true).await {
                200 => Ok(()),
                other => Err(other.to_string()),
            }
        })
        .await
        .unwrap();
        assert_eq!(scrape_from_pod(e2e, &ns, "stranger", &url, true).await, 403, "{service} for an unbound token");
        assert_eq!(scrape_from_pod(e2e, &ns, "reader", &url, false).await, 401, "{service} without a token");
    }
    e2e.run(&["delete", "clusterrolebinding", &format!("{ns}-reader")]).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

async fn leader(e2e: &E2e) -> String {
    e2e.run(&["get", "lease", "-n", SYSTEM, "-o", "jsonpath={.items[*].spec.holderIdentity}"]).await
}

/// Two controller replicas; the leader's pod is deleted; the other takes the lease and
/// reconciles.
async fn leader_failover(e2e: &E2e) {
    e2e.run(&["scale", "deployment", CONTROLLER, "-n", SYSTEM, "--replicas=2"]).await;
    e2e.rollout(CONTROLLER).await;
    let pods = e2e
        .run(&[
            "get",
            "pods",
            "-n",
            SYSTEM,
            "-l",
            "app.kubernetes.io/component=controller",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await;
    let pods: Vec<String> = pods.split_whitespace().map(str::to_owned).collect();
    assert_eq!(pods.len(), 2, "{pods:?}");
    let first = eventually("a leader among the controller pods", TIMEOUT, || async {
        let holder = leader(e2e).await;
        if pods.iter().any(|p| holder.contains(p.as_str())) { Ok(holder) } else { Err(holder) }
    })
    .await
    .unwrap();
    let old = pods.iter().find(|p| first.contains(p.as_str())).cloned().unwrap();
    let started = Instant::now();
    e2e.run(&["delete", "pod", &old, "-n", SYSTEM, "--wait=false"]).await;
    // The standby usually wins; the ReplicaSet's replacement for the deleted pod may too.
    eventually("another replica to take the lease", TIMEOUT, || async {
        let holder = leader(e2e).await;
        if !holder.is_empty() && !holder.contains(old.as_str()) { Ok(()) } else { Err(holder) }
    })
    .await
    .unwrap();
    eprintln!("e2e: leader takeover after deleting the leader's pod: {:.1?}", started.elapsed());
    let ns = e2e.namespace("e2e-failover").await;
    e2e.apply(&ns, &shell("after", 1)).await.unwrap();
    wait_running(e2e, &ns, "after", 1).await;
    e2e.run(&["scale", "deployment", CONTROLLER, "-n", SYSTEM, "--replicas=1"]).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

/// Deleting a shell takes its pods, ReplicaSet and Deployment, then the object; deleting a
/// namespace of shells finishes.
async fn deletion(e2e: &E2e) {
    let ns = e2e.namespace("e2e-delete").await;
    e2e.apply(&ns, &shell("gone", 2)).await.unwrap();
    e2e.apply(&ns, &shell("kept", 1)).await.unwrap();
    wait_running(e2e, &ns, "gone", 2).await;
    wait_running(e2e, &ns, "kept", 1).await;
    e2e.run(&["delete", "mos", "gone", "-n", &ns, "--wait=false"]).await;
    let selector = "app.kubernetes.io/instance=gone";
    e2e.wait_for(
        "pods, ReplicaSet, Deployment and the shell gone",
        &["get", "pods,rs,deploy,mos", "-n", &ns, "-l", selector, "-o", "name"],
        |out| out.trim().is_empty(),
    )
    .await;
    e2e.wait_for("the shell object gone", &["get", "mos", "-n", &ns, "-o", "name"], |out| {
        out.trim() == "myownshell.myownshell.io/kept"
    })
    .await;

    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
    e2e.wait_for(
        "the namespace of shells to finish deleting",
        &["get", "namespace", &ns, "--ignore-not-found", "-o", "name"],
        |out| out.trim().is_empty(),
    )
    .await;
}

/// Uninstalling as the README says: the shells first (`kubectl delete mos --all -A` returns
/// once the controller has cleaned each one up), then `kubectl delete -k`, which completes:
/// nothing hangs on a webhook or a finalizer. (Deleting the CRD while shells still exist would
/// not: `delete -k` takes the controller's RBAC in the same breath, so nobody may remove
/// their finalizers any more. A finalizer can then be removed by hand; the webhooks skip
/// objects being deleted, so that works even with the webhook gone.)
async fn uninstall(e2e: &E2e) {
    let ns = e2e.namespace("e2e-uninstall").await;
    e2e.apply(&ns, &shell("left", 1)).await.unwrap();
    wait_running(e2e, &ns, "left", 1).await;
    e2e.delete_every_shell().await;
    e2e.wait_for("the shell's Deployment gone", &["get", "deploy", "-n", &ns, "-o", "name"], |out| {
        out.trim().is_empty()
    })
    .await;
    let overlay = E2e::overlay("local");
    let args = ["delete", "-k", &overlay, "--timeout=120s"];
    let (out, ()) = tokio::join!(e2e.kubectl.run(&args), e2e.namespaces_gone(&[SYSTEM]));
    let out = out.unwrap();
    assert!(out.success, "kubectl delete -k: {}{}", out.stdout, out.stderr);
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

/// The production overlay, its image pointed at the local one, on two nodes: both replicas of
/// both Deployments Ready on different nodes, the PodDisruptionBudgets in place; admission
/// works and shells converge.
async fn production_overlay(e2e: &E2e) {
    e2e.apply_overlay(&E2e::overlay("production"), RELEASE_IMAGE, LOCAL_IMAGE).await;
    e2e.rollout_operator().await;
    for component in ["controller", "webhook", "gateway"] {
        let selector = format!("app.kubernetes.io/component={component}");
        let nodes = e2e
            .wait_for(
                &format!("two Ready {component} replicas on two nodes"),
                &[
                    "get",
                    "pods",
                    "-n",
                    SYSTEM,
                    "-l",
                    &selector,
                    "-o",
                    "jsonpath={range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type==\"Ready\")].status} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
                ],
                |out| {
                    let ready: Vec<&str> = out.lines().filter(|l| l.split_whitespace().nth(1) == Some("True")).collect();
                    let nodes: std::collections::BTreeSet<&str> = ready.iter().filter_map(|l| l.split_whitespace().next()).collect();
                    out.lines().count() == 2 && ready.len() == 2 && nodes.len() == 2
                },
            )
            .await;
        eprintln!(
            "e2e: {component} replicas on: {}",
            nodes.split_whitespace().filter(|w| w.starts_with("myownshell-node")).collect::<Vec<_>>().join(", ")
        );
    }
    let budgets = e2e
        .run(&[
            "get",
            "pdb",
            "-n",
            SYSTEM,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.disruptionsAllowed} {end}",
        ])
        .await;
    assert_eq!(
        budgets.trim(),
        format!("{CONTROLLER}=1 {GATEWAY}=1 {WEBHOOK}=1"),
        "the three budgets in place, each allowing one disruption with both replicas up"
    );
    let ns = e2e.namespace("e2e-production").await;
    let denied = e2e.apply(&ns, &shell("too-big", 500)).await.unwrap_err();
    assert!(denied.contains("spec.size"), "{denied}");
    e2e.apply(&ns, &shell("prod", 1)).await.unwrap();
    wait_running(e2e, &ns, "prod", 1).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}
