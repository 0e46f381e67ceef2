//! The admission webhook through the real kube-apiserver and real kubectl: each test runs its own
//! `myownshell-webhook` process and its own pair of webhook configurations (from
//! `config/webhook`, pointed at `https://127.0.0.1:PORT`, `caBundle` injected by the webhook),
//! scoped to its own namespace.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_api::{MyOwnShell, MyOwnShellSpec, defaults, names};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{ControlPlane, Kubectl, create_namespace, eventually, shared};
use myownshell_tests::tls_client::{HttpsConnection, served_certificate};
use myownshell_tests::webhooks::{InstalledWebhooks, Target, WebhookOptions, WebhookProcess, secret_pem};
use serde_json::{Value, json};

const READY: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(30);
const VALIDATING: &str = "admission webhook \"vmyownshell.myownshell.io\" denied the request";

struct Env {
    cp: &'static ControlPlane,
    client: Client,
    ns: String,
    installed: InstalledWebhooks,
    webhook: WebhookProcess,
    options: WebhookOptions,
}

impl Env {
    /// A namespace, configurations for it, and a ready webhook with `args`.
    async fn start(prefix: &str, args: &[&str]) -> Env {
        let cp = shared();
        let client = cp.client().unwrap();
        let ns = create_namespace(&client, prefix).await.unwrap();
        let port = free_port().unwrap();
        let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.clone() };
        let installed = InstalledWebhooks::install(&client, &ns, &target).await.unwrap();
        let mut options = WebhookOptions::for_installed(&installed, &ns, port);
        options.args = args.iter().map(|a| (*a).to_owned()).collect();
        let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
        webhook.wait_ready(READY).await.unwrap();
        let env = Env { cp, client, ns, installed, webhook, options };
        env.wait_until_the_apiserver_calls_it().await;
        env
    }

    fn kubectl(&self) -> Kubectl {
        self.cp.kubectl()
    }

    fn shells(&self) -> Api<MyOwnShell> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The apiserver picks configuration changes up from an informer: wait until a server-side
    /// dry run shows both webhooks at work (defaults added, a bad size denied).
    async fn wait_until_the_apiserver_calls_it(&self) {
        let shells = self.shells();
        eventually("the apiserver to call both webhooks", TIMEOUT, || {
            let shells = shells.clone();
            async move {
                let dry = PostParams { dry_run: true, ..PostParams::default() };
                let created = shells
                    .create(&dry, &MyOwnShell::new("probe", MyOwnShellSpec::default()))
                    .await
                    .map_err(|e| format!("dry-run create: {e}"))?;
                if created.spec.image.as_deref() != Some(defaults::IMAGE) {
                    return Err("not defaulted yet".into());
                }
                let bad = MyOwnShell::new("probe", MyOwnShellSpec { size: Some(999), ..MyOwnShellSpec::default() });
                match shells.create(&dry, &bad).await {
                    Err(kube::Error::Api(s)) if s.message.contains("must be between") => Ok(()),
                    other => Err(format!("size 999 not denied by the webhook yet: {other:?}")),
                }
            }
        })
        .await
        .unwrap();
    }

    async fn get_json(&self, name: &str) -> Value {
        let out = self.kubectl().run(&["get", "mos", name, "-n", &self.ns, "-o", "json"]).await.unwrap().ok().unwrap();
        serde_json::from_str(&out).unwrap()
    }
}

fn manifest(name: &str, spec_yaml: &str) -> String {
    let spec = if spec_yaml.is_empty() { " {}".to_owned() } else { format!("\n{spec_yaml}") };
    format!("apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: {name}\nspec:{spec}\n")
}

#[tokio::test]
async fn kubectl_apply_of_bad_specs_is_denied_with_the_webhooks_message() {
    let env = Env::start("wh-deny", &["--allowed-registries=docker.io,registry.example.com"]).await;
    let cases: &[(&str, &str)] = &[
        ("  size: 500", "spec.size: must be between 0 and 50, got 500"),
        ("  size: 51", "spec.size: must be between 0 and 50, got 51"),
        (
            "  image: Busybox:1",
            "spec.image: must be a valid image reference (repository path must be lowercase), got \"Busybox:1\"",
        ),
        (
            "  image: busybox@sha256:1234",
            "spec.image: must be a valid image reference (sha256 digest must be 64 lowercase hex digits)",
        ),
        ("  image: \"busybox:1:2\"", "spec.image: must be a valid image reference (invalid tag"),
        (
            "  image: registry.example.com:0/shell:1",
            "spec.image: must be a valid image reference (registry port must be 1-65535, got \"0\")",
        ),
        (
            "  image: quay.io/tools/shell:1",
            "spec.image: must come from an allowed registry (docker.io, registry.example.com), got \"quay.io/tools/shell:1\"",
        ),
        ("  command: [\"\", \"-c\"]", "spec.command[0]: the executable must not be empty, got \"\""),
        (
            "  resources:\n    requests: {cpu: \"2\"}\n    limits: {cpu: 500m}",
            "spec.resources.requests[cpu]: must be less than or equal to the limit \"500m\", got \"2\"",
        ),
        (
            "  resources:\n    requests: {memory: 1Gi}\n    limits: {memory: 64Mi}",
            "spec.resources.requests[memory]: must be less than or equal to the limit \"64Mi\", got \"1Gi\"",
        ),
        (
            "  resources:\n    limits: {cpu: lots}",
            "spec.resources.limits[cpu]: must be a valid quantity such as 250m or 64Mi (not a number), got \"lots\"",
        ),
        (
            "  resources:\n    limits: {memory: \"-5Mi\"}",
            "spec.resources.limits[memory]: must not be negative, got \"-5Mi\"",
        ),
        (
            "  resources:\n    limits: {cpus: \"1\"}",
            "spec.resources.limits[cpus]: must be cpu, memory, ephemeral-storage",
        ),
        ("  home:\n    size: lots", "spec.home.size: must be a quantity such as 1Gi"),
        ("  home:\n    size: \"0\"", "spec.home.size: must be more than 0, got \"0\""),
        (
            "  home:\n    size: 11Gi",
            "spec.home.size: must be at most 10Gi (the operator's --home-max-size), got \"11Gi\"",
        ),
        (
            "  home:\n    storageClassName: Fast_SSD",
            "spec.home.storageClassName: must be a StorageClass name (lowercase letters, digits, '-' and '.', at most 253), got \"Fast_SSD\"",
        ),
    ];
    let kubectl = env.kubectl();
    for (i, (spec, want)) in cases.iter().enumerate() {
        let out = kubectl.apply(&env.ns, &manifest(&format!("bad-{i}"), spec)).await.unwrap();
        assert!(!out.success, "{spec:?} was accepted: {}", out.stdout);
        assert!(out.stderr.contains(VALIDATING), "{spec:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{spec:?}: want {want:?} in {}", out.stderr);
    }
    // Several problems at once: all of them in one answer.
    let out =
        kubectl.apply(&env.ns, &manifest("bad-many", "  size: 99\n  image: UPPER\n  command: [\"\"]")).await.unwrap();
    for want in ["spec.size: must be between 0 and 50, got 99", "spec.image:", "spec.command[0]:"] {
        assert!(out.stderr.contains(want), "{want} missing: {}", out.stderr);
    }
    let none = kubectl.run(&["get", "mos", "-n", &env.ns, "-o", "name"]).await.unwrap().ok().unwrap();
    assert_eq!(none.trim(), "", "nothing was persisted");

    // The metrics counted the denials; they are served only to authenticated callers.
    let metrics_addr = std::net::SocketAddr::from(([127, 0, 0, 1], env.webhook.metrics_port));
    let (status, _) = myownshell_tests::scrape::https_get(metrics_addr, "/metrics", None).await.unwrap();
    assert_eq!(status, 401, "metrics without a token");
    let metrics = env.webhook.metrics(&env.client).await.unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with(
            "myownshell_webhook_requests_total{webhook=\"validate\",operation=\"CREATE\",result=\"denied\"}"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("myownshell_webhook_certificate_trusted 1"), "{metrics}");
}

#[tokio::test]
async fn defaults_dry_run_scale_and_warnings_through_kubectl() {
    let env = Env::start("wh-defaults", &[]).await;
    let kubectl = env.kubectl();

    // `spec: {}` comes back with every default and the finalizer.
    kubectl.apply(&env.ns, &manifest("minimal", "")).await.unwrap().ok().unwrap();
    let got = env.get_json("minimal").await;
    assert_eq!(got["spec"]["size"], json!(defaults::SIZE));
    assert_eq!(got["spec"]["image"], json!(defaults::IMAGE));
    assert_eq!(got["spec"]["command"], json!(defaults::command()));
    assert_eq!(got["spec"]["resources"], serde_json::to_value(defaults::resources()).unwrap());
    assert_eq!(got["metadata"]["finalizers"], json!([names::FINALIZER]));

    // A user's values are kept; only the gaps are filled.
    kubectl.apply(&env.ns, &manifest("custom", "  size: 2\n  image: busybox:1.36.1")).await.unwrap().ok().unwrap();
    let got = env.get_json("custom").await;
    assert_eq!((got["spec"]["size"].clone(), got["spec"]["image"].clone()), (json!(2), json!("busybox:1.36.1")));
    assert_eq!(got["spec"]["command"], json!(defaults::command()));

    // --dry-run=server shows the defaults and persists nothing.
    let out = kubectl
        .run_with_stdin(
            &["apply", "-n", &env.ns, "--dry-run=server", "-o", "json", "-f", "-"],
            Some(&manifest("dry", "")),
        )
        .await
        .unwrap()
        .ok()
        .unwrap();
    let dry: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(dry["spec"]["image"], json!(defaults::IMAGE), "{out}");
    assert_eq!(dry["metadata"]["finalizers"], json!([names::FINALIZER]));
    let missing = kubectl.run(&["get", "mos", "dry", "-n", &env.ns]).await.unwrap();
    assert!(!missing.success && missing.stderr.contains("NotFound"), "{missing:?}");

    // kubectl scale goes through the scale subresource and is held to the same bound.
    let out = kubectl.run(&["scale", "mos/minimal", "-n", &env.ns, "--replicas=500"]).await.unwrap();
    assert!(!out.success, "scaled to 500: {}", out.stdout);
    assert!(
        out.stderr.contains(VALIDATING) && out.stderr.contains("spec.size: must be between 0 and 50, got 500"),
        "{}",
        out.stderr
    );
    kubectl.run(&["scale", "mos/minimal", "-n", &env.ns, "--replicas=3"]).await.unwrap().ok().unwrap();
    assert_eq!(env.get_json("minimal").await["spec"]["size"], json!(3));

    // A moving tag passes with a warning kubectl prints.
    let out = kubectl.apply(&env.ns, &manifest("moving", "  image: busybox:latest")).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr.contains("Warning: spec.image: \"busybox:latest\" uses the moving tag \"latest\""),
        "{}",
        out.stderr
    );
    let out = kubectl.apply(&env.ns, &manifest("untagged", "  image: busybox")).await.unwrap();
    assert!(out.success && out.stderr.contains("Warning: spec.image: \"busybox\" has no tag"), "{}", out.stderr);
}

/// A start and an update are "now" by the webhook's clock, whatever the client's said: a
/// `restartedAt` a year ahead (which held off every stop until then) or an hour behind (a start
/// that counted from before the stop it was to end, and so did nothing) comes back as the time of
/// the request; a time the update leaves alone is kept.
#[tokio::test]
async fn times_asked_for_now_are_stamped_with_the_webhooks_clock() {
    let env = Env::start("wh-clock", &[]).await;
    env.kubectl().apply(&env.ns, &manifest("clock", "")).await.unwrap().ok().unwrap();
    let second = |at: &Value| -> i64 {
        let at: k8s_openapi::jiff::Timestamp = at.as_str().unwrap_or_else(|| panic!("{at}")).parse().unwrap();
        at.as_second()
    };
    for asked in ["2099-01-01T00:00:00Z", "2001-01-01T00:00:00Z"] {
        let patch = json!({"spec": {"lifetime": {"restartedAt": asked}, "updateRequestedAt": asked}});
        // The webhook runs on this machine: its clock read during the request is between these.
        let sent = k8s_openapi::jiff::Timestamp::now().as_second();
        env.shells().patch("clock", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        let answered = k8s_openapi::jiff::Timestamp::now().as_second();
        let spec = &env.get_json("clock").await["spec"];
        for got in [&spec["lifetime"]["restartedAt"], &spec["updateRequestedAt"]] {
            assert!((sent..=answered).contains(&second(got)), "asked for {asked}, stored {got}, sent at {sent}");
        }
    }
    // A change elsewhere leaves the stamped times as they are.
    let before = env.get_json("clock").await["spec"].clone();
    let resize = json!({"spec": {"size": 2}});
    env.shells().patch("clock", &PatchParams::default(), &Patch::Merge(&resize)).await.unwrap();
    let after = env.get_json("clock").await["spec"].clone();
    assert_eq!(after["lifetime"]["restartedAt"], before["lifetime"]["restartedAt"]);
    assert_eq!(after["updateRequestedAt"], before["updateRequestedAt"]);
}

#[tokio::test]
async fn numbers_work_as_quantities_and_wrong_types_are_named_by_the_schema() {
    let env = Env::start("wh-types", &[]).await;
    let kubectl = env.kubectl();
    // `cpu: 1` is an int-or-string quantity, as in a Pod: accepted, checked against its request.
    let numbers = "  resources:\n    requests: {cpu: 1, memory: 16Mi}\n    limits: {cpu: 2, memory: 64Mi}";
    kubectl.apply(&env.ns, &manifest("numbers", numbers)).await.unwrap().ok().unwrap();
    assert_eq!(env.get_json("numbers").await["spec"]["resources"]["limits"]["cpu"], json!(2));
    let above = "  resources:\n    requests: {cpu: 2}\n    limits: {cpu: 1}";
    let out = kubectl.apply(&env.ns, &manifest("above", above)).await.unwrap();
    assert!(
        out.stderr.contains(VALIDATING)
            && out
                .stderr
                .contains("spec.resources.requests[cpu]: must be less than or equal to the limit \"1\", got \"2\""),
        "{}",
        out.stderr
    );
    // A value of the wrong type passes defaulting untouched and is named by the schema check.
    let out = kubectl.apply(&env.ns, &manifest("typed", "  size: three")).await.unwrap();
    assert!(!out.success, "{}", out.stdout);
    assert!(out.stderr.contains("spec.size") && out.stderr.contains("integer"), "{}", out.stderr);
}

#[tokio::test]
async fn deleting_works_while_the_webhook_is_stopped() {
    let mut env = Env::start("wh-delete", &[]).await;
    let kubectl = env.kubectl();
    kubectl.apply(&env.ns, &manifest("doomed", "")).await.unwrap().ok().unwrap();
    assert_eq!(env.get_json("doomed").await["metadata"]["finalizers"], json!([names::FINALIZER]));

    env.webhook.stop(Duration::from_secs(10)).unwrap();
    // With the webhook gone (failurePolicy: Fail), changes are refused...
    let refused = kubectl.apply(&env.ns, &manifest("other", "")).await.unwrap();
    assert!(!refused.success, "created without a webhook: {}", refused.stdout);
    // ...but deleting is not sent to it, and neither is removing the finalizer of an object
    // being deleted (what the controller does to finish), so the object goes away.
    kubectl.run(&["delete", "mos", "doomed", "-n", &env.ns, "--wait=false"]).await.unwrap().ok().unwrap();
    remove_finalizer_until_gone(&env, &kubectl, "doomed").await;
    env.installed.remove().await.unwrap();
}

#[tokio::test]
async fn bad_input_gets_a_plain_400_or_denial_and_the_server_keeps_serving() {
    let env = Env::start("wh-badinput", &[]).await;
    let ca = secret_pem(&env.client, &env.ns, &env.options.secret_name, "ca.crt").await.unwrap();
    let mut conn = HttpsConnection::connect(env.webhook.addr(), Some(&ca), "127.0.0.1").await.unwrap();
    let review = |api_version: &str, kind: &str, request: Value| {
        serde_json::to_vec(&json!({"apiVersion": api_version, "kind": kind, "request": request})).unwrap()
    };
    let request = |object: Value| {
        json!({
            "uid": "0b1e7c1e-0000-4000-8000-000000000001",
            "kind": {"group": "myownshell.io", "version": "v1alpha1", "kind": "MyOwnShell"},
            "resource": {"group": "myownshell.io", "version": "v1alpha1", "resource": "myownshells"},
            "name": "x", "namespace": env.ns, "operation": "CREATE",
            "userInfo": {"username": "tester"}, "object": object, "dryRun": false,
        })
    };
    let good_object =
        json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "x"}, "spec": {}});

    let bad: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed JSON", b"{\"apiVersion\": ".to_vec(), "malformed JSON"),
        ("oversized body", vec![b' '; 9 * 1024 * 1024], "larger than 8388608 bytes"),
        (
            "wrong apiVersion",
            review("admission.k8s.io/v1beta1", "AdmissionReview", request(good_object.clone())),
            "expected apiVersion admission.k8s.io/v1",
        ),
        ("wrong kind", review("admission.k8s.io/v1", "Pod", request(good_object.clone())), "kind AdmissionReview"),
        (
            "missing request",
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})).unwrap(),
            "has no request",
        ),
    ];
    for (what, body, want) in &bad {
        for path in [names::MUTATE_PATH, names::VALIDATE_PATH] {
            let (status, text) = conn.post(path, body.clone()).await.unwrap_or_else(|e| panic!("{what}: {e}"));
            let text = String::from_utf8_lossy(&text);
            assert_eq!(status, 400, "{what} on {path}: {text}");
            assert!(text.contains(want), "{what} on {path}: {text}");
        }
    }

    // A readable review whose spec is not a MyOwnShell's: the validating webhook denies it (code
    // 400) with the reason; the mutating one fills only unset fields and leaves the bad value
    // for the schema check that follows mutation.
    let undecodable = review(
        "admission.k8s.io/v1",
        "AdmissionReview",
        request(json!({"metadata": {"name": "x"}, "spec": {"size": "three"}})),
    );
    let (status, text) = conn.post(names::VALIDATE_PATH, undecodable.clone()).await.unwrap();
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(answer["response"]["allowed"], json!(false), "{answer}");
    assert_eq!(answer["response"]["uid"], json!("0b1e7c1e-0000-4000-8000-000000000001"));
    assert_eq!(answer["response"]["status"]["code"], json!(400));
    assert!(answer["response"]["status"]["message"].as_str().unwrap().contains("spec does not decode"), "{answer}");
    let (status, text) = conn.post(names::MUTATE_PATH, undecodable).await.unwrap();
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(answer["response"]["allowed"], json!(true), "{answer}");

    // Same connection, still serving: a good review gets its patch.
    let (status, text) = conn
        .post(names::MUTATE_PATH, review("admission.k8s.io/v1", "AdmissionReview", request(good_object)))
        .await
        .unwrap();
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(answer["response"]["allowed"], json!(true));
    assert_eq!(answer["response"]["patchType"], json!("JSONPatch"));

    // Each bad request was logged once, and counted.
    let log = std::fs::read_to_string(&env.webhook.log).unwrap();
    let logged = log.lines().filter(|l| l.contains("rejected a malformed admission request")).count();
    assert_eq!(logged, bad.len() * 2, "{log}");
    let metrics = env.webhook.metrics(&env.client).await.unwrap();
    assert!(metrics.contains("result=\"bad_request\"} 5"), "{metrics}");
    assert!(metrics.contains("webhook=\"validate\",operation=\"CREATE\",result=\"invalid\"} 1"), "{metrics}");
}

#[tokio::test]
async fn replicas_started_together_share_one_secret_and_a_third_reuses_it() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_namespace(&client, "wh-replicas").await.unwrap();
    let port = free_port().unwrap();
    let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.clone() };
    let installed = InstalledWebhooks::install(&client, &ns, &target).await.unwrap();
    let base = WebhookOptions::for_installed(&installed, &ns, port);
    let replica =
        |i: usize, port: Option<u16>| WebhookOptions { port, log_name: format!("webhook-{ns}-{i}"), ..base.clone() };

    // Two at once, racing to create the Secret.
    let mut a = WebhookProcess::spawn(cp, &replica(0, Some(port))).unwrap();
    let mut b = WebhookProcess::spawn(cp, &replica(1, None)).unwrap();
    a.wait_ready(READY).await.unwrap();
    b.wait_ready(READY).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let stored = secrets.get(&base.secret_name).await.unwrap();
    let tls_crt = secret_pem(&client, &ns, &base.secret_name, "tls.crt").await.unwrap();
    let leaf = myownshell_runtime::tls::certs_from_pem(&tls_crt).unwrap().remove(0);
    assert_eq!(served_certificate(a.addr()).await.unwrap(), leaf, "replica a serves the stored cert");
    assert_eq!(served_certificate(b.addr()).await.unwrap(), leaf, "replica b serves the stored cert");

    // A third one later reuses it without writing.
    let mut c = WebhookProcess::spawn(cp, &replica(2, None)).unwrap();
    c.wait_ready(READY).await.unwrap();
    assert_eq!(served_certificate(c.addr()).await.unwrap(), leaf, "replica c serves the stored cert");
    let after = secrets.get(&base.secret_name).await.unwrap();
    assert_eq!(after.metadata.resource_version, stored.metadata.resource_version, "the Secret was not rewritten");

    // The injected bundle is the Secret's CA, and it is what the apiserver uses.
    let ca = secret_pem(&client, &ns, &base.secret_name, "ca.crt").await.unwrap();
    for bundle in installed.ca_bundles().await.unwrap() {
        assert!(myownshell_certs::trust::same_certificates(&bundle, &ca));
    }
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    let created = eventually("a create through the webhook", TIMEOUT, || {
        let shells = shells.clone();
        async move {
            shells
                .create(&PostParams::default(), &MyOwnShell::new("shared", MyOwnShellSpec::default()))
                .await
                .map_err(|e| e.to_string())
        }
    })
    .await
    .unwrap();
    assert_eq!(created.spec.size, Some(defaults::SIZE));
    for p in [&mut a, &mut b, &mut c] {
        assert!(p.is_running());
    }
}

/// A MyOwnShell with `resources` as a JSON manifest for kubectl.
fn shell_with_resources(name: &str, resources: &Value) -> String {
    let shell = json!({"apiVersion": names::API_VERSION, "kind": names::KIND, "metadata": {"name": name}, "spec": {"resources": resources}});
    serde_json::to_string(&shell).unwrap()
}

/// Whether the apiserver takes a Deployment whose container has `resources` (a server-side dry
/// run, nothing persisted), and why not.
async fn deployment_takes(client: &Client, ns: &str, resources: &Value) -> Result<(), String> {
    let labels = json!({"app": "resources-probe"});
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "resources-probe"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "shell", "image": "busybox:1", "resources": resources}]},
            },
        },
    }))
    .unwrap();
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    match Api::namespaced(client.clone(), ns).create(&dry, &deployment).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(e) => panic!("dry-run Deployment: {e}"),
    }
}

#[tokio::test]
async fn resources_are_admitted_exactly_when_the_apiserver_takes_them_in_a_deployment() {
    let env = Env::start("wh-resources", &[]).await;
    let long_domain = format!("{}.com/gpu", "a".repeat(241));
    // (resources, what the webhook says when it denies them). The apiserver decides the same
    // for a Deployment with these resources: that is checked for every case.
    let cases: Vec<(Value, Option<&str>)> = vec![
        (json!({"requests": {"cpu": ".5", "memory": "1.5Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}), None),
        (json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}), None),
        (json!({"limits": {"example.com/gpu": "2"}}), None),
        (json!({"limits": {"hugepages-2Mi": "4Mi", "memory": "64Mi"}}), None),
        (json!({"requests": {"kubernetes.io/custom": "1.5"}}), None),
        (json!({"requests": {"cpu": "1.0002"}, "limits": {"cpu": "1.0001"}}), None),
        (json!({"limits": {"memory": "9223372036854775807"}}), None),
        (
            json!({"requests": {"example.com/gpu": "1"}}),
            Some(
                "spec.resources.requests[example.com/gpu]: needs an equal limit (example.com/gpu cannot be overcommitted), got \"1\" and no limit",
            ),
        ),
        (
            json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
            Some("spec.resources.requests[example.com/gpu]: must equal the limit \"2\""),
        ),
        (
            json!({"limits": {"example.com/gpu": "1.5"}}),
            Some("spec.resources.limits[example.com/gpu]: must be a whole number"),
        ),
        (
            json!({"limits": {"hugepages-2Mi": "2Mi"}}),
            Some("spec.resources: hugepages need a cpu or memory request or limit too"),
        ),
        (
            json!({"limits": {"hugepages-2Mi": "3Mi", "memory": "64Mi"}}),
            Some(
                "spec.resources.limits[hugepages-2Mi]: must be a multiple of the page size 2Mi (2097152), got \"3Mi\"",
            ),
        ),
        (
            json!({"requests": {"hugepages-2Mi": "2Mi", "memory": "64Mi"}}),
            Some("spec.resources.requests[hugepages-2Mi]: needs an equal limit"),
        ),
        (
            json!({"limits": {"hugepages-foo": "2Mi", "memory": "64Mi"}}),
            Some(
                "spec.resources.limits[hugepages-foo]: must be a multiple of the page size, but \"foo\" is not a page size",
            ),
        ),
        (json!({"limits": {"pods": "1"}}), Some("spec.resources.limits[pods]: must be cpu, memory, ephemeral-storage")),
        (
            json!({"limits": {"requests.example.com/gpu": "1"}}),
            Some(
                "spec.resources.limits[requests.example.com/gpu]: an extended resource name must not start with \"requests.\"",
            ),
        ),
        (
            json!({"limits": {"Example.com/gpu": "1"}}),
            Some("spec.resources.limits[Example.com/gpu]: must be a qualified name"),
        ),
        (json!({"limits": {long_domain.clone(): "1"}}), Some("must be at most 244 characters")),
    ];
    let kubectl = env.kubectl();
    let mut wrong = Vec::new();
    for (i, (resources, denial)) in cases.iter().enumerate() {
        let out = kubectl.apply(&env.ns, &shell_with_resources(&format!("r-{i}"), resources)).await.unwrap();
        let apiserver = deployment_takes(&env.client, &env.ns, resources).await;
        if out.success != apiserver.is_ok() {
            wrong.push(format!(
                "{resources}: webhook admitted {}, apiserver took a Deployment: {apiserver:?}; kubectl: {}",
                out.success, out.stderr
            ));
        }
        match denial {
            None if !out.success => wrong.push(format!("{resources} denied: {}", out.stderr)),
            Some(want) if !(out.stderr.contains(VALIDATING) && out.stderr.contains(want)) => {
                wrong.push(format!("{resources}: want {want:?} in {:?}", out.stderr));
            }
            _ => {}
        }
    }
    // The operator's own ceiling: the apiserver would store these, capped or beyond its 64-bit
    // arithmetic; the webhook denies them instead.
    for (resources, want) in [
        (
            json!({"limits": {"memory": "8Ei"}}),
            "spec.resources.limits[memory]: must be at most 9223372036854775807 (8Ei would be capped by the API server), got \"8Ei\"",
        ),
        (
            json!({"requests": {"cpu": "10E"}}),
            "spec.resources.requests[cpu]: must be at most 9223372036854775807 (Kubernetes counts resources in 64-bit integers), got \"10E\"",
        ),
    ] {
        assert_eq!(deployment_takes(&env.client, &env.ns, &resources).await, Ok(()), "{resources}");
        let out = kubectl.apply(&env.ns, &shell_with_resources("ceiling", &resources)).await.unwrap();
        if !(out.stderr.contains(VALIDATING) && out.stderr.contains(want)) {
            wrong.push(format!("{resources}: want {want:?} in {:?}", out.stderr));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn a_deleting_objects_spec_is_validated_while_its_metadata_stays_free() {
    let mut env = Env::start("wh-deleting", &[]).await;
    let kubectl = env.kubectl();
    kubectl.apply(&env.ns, &manifest("doomed", "")).await.unwrap().ok().unwrap();
    // No controller runs here: the finalizer holds the object in deletion.
    kubectl.run(&["delete", "mos", "doomed", "-n", &env.ns, "--wait=false"]).await.unwrap().ok().unwrap();
    let shells = env.shells();
    eventually("the MyOwnShell to be deleting", TIMEOUT, || {
        let shells = shells.clone();
        async move {
            let s = shells.get("doomed").await.map_err(|e| e.to_string())?;
            s.metadata.deletion_timestamp.map(drop).ok_or_else(|| "no deletionTimestamp yet".to_owned())
        }
    })
    .await
    .unwrap();

    let (ns, patcher) = (env.ns.clone(), env.kubectl());
    let patch_spec = |spec: Value| {
        let patch = json!({"spec": spec}).to_string();
        let (ns, patcher) = (ns.clone(), patcher.clone());
        async move { patcher.run(&["patch", "mos", "doomed", "-n", &ns, "--type=merge", "-p", &patch]).await.unwrap() }
    };
    // Its spec is held to the rules like any other...
    for (spec, want) in [
        (json!({"size": 1000}), "spec.size: must be between 0 and 50, got 1000"),
        (json!({"image": "EVIL IMAGE"}), "spec.image: must be a valid image reference (contains whitespace)"),
    ] {
        let out = patch_spec(spec.clone()).await;
        assert!(!out.success, "{spec} was admitted on a deleting object: {}", out.stdout);
        assert!(out.stderr.contains(VALIDATING) && out.stderr.contains(want), "{spec}: {}", out.stderr);
    }
    let kept = env.get_json("doomed").await;
    assert_eq!(
        (kept["spec"]["size"].clone(), kept["spec"]["image"].clone()),
        (json!(defaults::SIZE), json!(defaults::IMAGE))
    );
    patch_spec(json!({"size": 2})).await.ok().unwrap();

    // ...while metadata changes and the finalizer's removal never reach the webhook: they pass
    // with it stopped, and the object goes.
    env.webhook.stop(Duration::from_secs(10)).unwrap();
    let refused = patch_spec(json!({"size": 3})).await;
    assert!(!refused.success, "a spec change passed without a webhook: {}", refused.stdout);
    kubectl.run(&["label", "mos", "doomed", "-n", &env.ns, "team=a"]).await.unwrap().ok().unwrap();
    remove_finalizer_until_gone(&env, &kubectl, "doomed").await;
    env.installed.remove().await.unwrap();
}

/// Remove the finalizer of the deleting `MyOwnShell` `name` as the controller would (with
/// `kubectl`, a JSON patch), and wait until the object is gone.
async fn remove_finalizer_until_gone(env: &Env, kubectl: &Kubectl, name: &str) {
    let patch = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    kubectl.run(&["patch", "mos", name, "-n", &env.ns, "--type=json", "-p", patch]).await.unwrap().ok().unwrap();
    let shells = env.shells();
    eventually(&format!("the MyOwnShell {name} to be gone"), TIMEOUT, || {
        let shells = shells.clone();
        async move {
            match shells.get_opt(name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(o) => Err(format!("still there: {:?}", o.metadata.finalizers)),
            }
        }
    })
    .await
    .unwrap();
}
