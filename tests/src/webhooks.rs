//! Admission webhooks under test: the configurations from `config/webhook`, rewritten to reach a
//! webhook process on `https://127.0.0.1:PORT`, and that process itself.
//!
//! Tests in one binary share one apiserver, so each test installs its own pair of
//! configurations (named after the test) whose `namespaceSelector` matches only its own
//! namespace: tests never see each other's webhooks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use myownshell_api::{MyOwnShell, MyOwnShellSpec, defaults};

use myownshell_envtest::assets::{workspace_binary, workspace_root};
use myownshell_envtest::control_plane::{ControlPlane, HarnessError};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::wait::eventually;

/// The committed configurations, relative to the workspace root.
pub const CONFIG_FILE: &str = "config/webhook/webhook_configurations.yaml";
/// The binary under test.
pub const BINARY: &str = "myownshell-webhook";
const NAMESPACE_LABEL: &str = "kubernetes.io/metadata.name";

fn start_err(e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Start(e.to_string())
}

/// The two configurations as committed.
pub fn load_configurations() -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration), HarnessError> {
    let path = workspace_root().join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| start_err(format!("reading {}: {e}", path.display())))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| start_err(format!("{}: {e}", path.display())))?;
    let find = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .ok_or_else(|| start_err(format!("{CONFIG_FILE} has no {kind}")))
    };
    let mutating = serde_json::from_value(find("MutatingWebhookConfiguration")?).map_err(start_err)?;
    let validating = serde_json::from_value(find("ValidatingWebhookConfiguration")?).map_err(start_err)?;
    Ok((mutating, validating))
}

/// Where the rewritten configurations send requests, and what they trust.
#[derive(Debug, Clone)]
pub struct Target {
    /// `https://127.0.0.1:PORT`
    pub base_url: String,
    /// `None` leaves `caBundle` empty for the webhook to inject.
    pub ca_bundle: Option<String>,
    /// Only requests for objects in this namespace are sent.
    pub namespace: String,
}

fn client_config(old: &WebhookClientConfig, target: &Target) -> WebhookClientConfig {
    let path = old.service.as_ref().and_then(|s| s.path.clone()).unwrap_or_default();
    WebhookClientConfig {
        url: Some(format!("{}{path}", target.base_url)),
        service: None,
        ca_bundle: target.ca_bundle.as_ref().map(|b| ByteString(b.as_bytes().to_vec())),
    }
}

fn selector(namespace: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([(NAMESPACE_LABEL.to_owned(), namespace.to_owned())].into()),
        ..LabelSelector::default()
    }
}

/// The namespaces both `scope` (the test's) and `committed` (the webhook's own, e.g. the connect
/// gate's: opened to shells, or not) select.
fn both(scope: &LabelSelector, committed: Option<&LabelSelector>) -> LabelSelector {
    let mut selector = scope.clone();
    let Some(committed) = committed else { return selector };
    let labels = committed.match_labels.iter().flatten().map(|(k, v)| (k.clone(), v.clone()));
    selector.match_labels.get_or_insert_with(Default::default).extend(labels);
    let expressions = committed.match_expressions.iter().flatten().cloned();
    selector.match_expressions.get_or_insert_with(Vec::new).extend(expressions);
    selector
}

/// The committed configurations named `<name>-mutating` / `<name>-validating`, calling
/// `target` for `target.namespace` only (and of it, what each webhook's own namespaceSelector
/// selects). Everything else (rules, policies) is as committed.
pub fn rewrite(
    name: &str,
    target: &Target,
) -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration), HarnessError> {
    rewrite_selecting(name, target, &selector(&target.namespace))
}

/// As [`rewrite`], for the namespaces `namespaces` selects (`target.namespace` is not looked at).
pub fn rewrite_selecting(
    name: &str,
    target: &Target,
    namespaces: &LabelSelector,
) -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration), HarnessError> {
    let (mut mutating, mut validating) = load_configurations()?;
    mutating.metadata = kube::api::ObjectMeta { name: Some(format!("{name}-mutating")), ..Default::default() };
    validating.metadata = kube::api::ObjectMeta { name: Some(format!("{name}-validating")), ..Default::default() };
    for w in mutating.webhooks.iter_mut().flatten() {
        w.client_config = client_config(&w.client_config, target);
        w.namespace_selector = Some(both(namespaces, w.namespace_selector.as_ref()));
    }
    for w in validating.webhooks.iter_mut().flatten() {
        w.client_config = client_config(&w.client_config, target);
        w.namespace_selector = Some(both(namespaces, w.namespace_selector.as_ref()));
    }
    Ok((mutating, validating))
}

/// A pair of installed configurations; [`InstalledWebhooks::remove`] deletes them.
#[derive(Clone)]
pub struct InstalledWebhooks {
    client: Client,
    /// The MutatingWebhookConfiguration's name (`<name>-mutating` if [`InstalledWebhooks::install`]
    /// created it).
    pub mutating_name: String,
    /// The ValidatingWebhookConfiguration's name (`<name>-validating` if
    /// [`InstalledWebhooks::install`] created it).
    pub validating_name: String,
}

impl InstalledWebhooks {
    /// A pair installed some other way (e.g. from `config/default`), by name.
    pub fn named(client: &Client, mutating_name: &str, validating_name: &str) -> Self {
        Self {
            client: client.clone(),
            mutating_name: mutating_name.to_owned(),
            validating_name: validating_name.to_owned(),
        }
    }

    /// Create the rewritten pair (see [`rewrite`]).
    pub async fn install(client: &Client, name: &str, target: &Target) -> Result<Self, HarnessError> {
        Self::install_selecting(client, name, target, &selector(&target.namespace)).await
    }

    /// Create the pair for the namespaces `namespaces` selects (see [`rewrite_selecting`]).
    pub async fn install_selecting(
        client: &Client,
        name: &str,
        target: &Target,
        namespaces: &LabelSelector,
    ) -> Result<Self, HarnessError> {
        let (mutating, validating) = rewrite_selecting(name, target, namespaces)?;
        let installed = Self {
            client: client.clone(),
            mutating_name: mutating.metadata.name.clone().unwrap_or_default(),
            validating_name: validating.metadata.name.clone().unwrap_or_default(),
        };
        Api::<MutatingWebhookConfiguration>::all(client.clone()).create(&PostParams::default(), &mutating).await?;
        Api::<ValidatingWebhookConfiguration>::all(client.clone()).create(&PostParams::default(), &validating).await?;
        Ok(installed)
    }

    /// The `caBundle` of every webhook in the pair, as text.
    pub async fn ca_bundles(&self) -> Result<Vec<String>, kube::Error> {
        let text = |b: Option<&ByteString>| b.map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default();
        let m = Api::<MutatingWebhookConfiguration>::all(self.client.clone()).get(&self.mutating_name).await?;
        let v = Api::<ValidatingWebhookConfiguration>::all(self.client.clone()).get(&self.validating_name).await?;
        let mut out: Vec<String> =
            m.webhooks.iter().flatten().map(|w| text(w.client_config.ca_bundle.as_ref())).collect();
        out.extend(v.webhooks.iter().flatten().map(|w| text(w.client_config.ca_bundle.as_ref())));
        Ok(out)
    }

    /// Delete both configurations, so the apiserver stops calling a webhook for this test's
    /// namespace. `Err` if either is gone already (if the mutating one is, the validating one is
    /// left alone).
    pub async fn remove(&self) -> Result<(), kube::Error> {
        Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.mutating_name, &DeleteParams::default())
            .await?;
        Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.validating_name, &DeleteParams::default())
            .await?;
        Ok(())
    }
}

/// How to start one webhook process.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// Namespace of its Secret (and of the Service name in its certificate).
    pub namespace: String,
    /// Names of the configurations it injects into. This is the MutatingWebhookConfiguration
    /// (`--mutating-webhook-configuration`).
    pub mutating_name: String,
    /// The ValidatingWebhookConfiguration (`--validating-webhook-configuration`).
    pub validating_name: String,
    /// The Secret in `namespace` it keeps its CA and serving certificate in (`--secret-name`).
    /// Processes given the same one share their certificates like replicas; [`secret_pem`] reads
    /// it.
    pub secret_name: String,
    /// Fixed webhook port (the configurations name it), or `None` for a free one.
    pub port: Option<u16>,
    /// Extra flags (`--max-size`, `--cert-validity`, …).
    pub args: Vec<String>,
    /// A name for the log file.
    pub log_name: String,
    /// The credentials it runs with (e.g. a ServiceAccount's), or `None` for the admin's.
    pub kubeconfig: Option<PathBuf>,
}

impl WebhookOptions {
    /// Options matching configurations installed by [`InstalledWebhooks::install`].
    pub fn for_installed(installed: &InstalledWebhooks, namespace: &str, port: u16) -> Self {
        Self {
            namespace: namespace.to_owned(),
            mutating_name: installed.mutating_name.clone(),
            validating_name: installed.validating_name.clone(),
            secret_name: "webhook-server-cert".into(),
            port: Some(port),
            args: Vec::new(),
            log_name: format!("webhook-{namespace}"),
            kubeconfig: None,
        }
    }
}

/// A running `myownshell-webhook`, killed when dropped.
pub struct WebhookProcess {
    process: ManagedProcess,
    /// Port of the HTTPS admission endpoint on 127.0.0.1 (`--webhook-port`): the options' fixed
    /// one, or a free one.
    pub port: u16,
    /// Port of the plain-HTTP `/healthz` and `/readyz` (see [`WebhookProcess::probe`]).
    pub probe_port: u16,
    /// Port of the HTTPS `/metrics` (see [`WebhookProcess::metrics`]).
    pub metrics_port: u16,
    /// Its log file (stdout and stderr): `<log_name>.log` in the control plane's run directory.
    pub log: PathBuf,
}

impl WebhookProcess {
    /// Start the binary against `cp` (admin credentials unless `options.kubeconfig` says otherwise).
    pub fn spawn(cp: &ControlPlane, options: &WebhookOptions) -> Result<Self, HarnessError> {
        let binary = workspace_binary(BINARY).map_err(HarnessError::Start)?;
        let io = |e: std::io::Error| start_err(format!("free port: {e}"));
        let port = match options.port {
            Some(p) => p,
            None => free_port().map_err(io)?,
        };
        let (probe_port, metrics_port) = (free_port().map_err(io)?, free_port().map_err(io)?);
        let log = cp.layout().dir.join(format!("{}.log", options.log_name));
        let spec = ProcessSpec::new(options.log_name.clone(), binary, log.clone())
            .args([
                "--bind-address=127.0.0.1".to_owned(),
                format!("--webhook-port={port}"),
                format!("--health-probe-bind-address=127.0.0.1:{probe_port}"),
                format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
                format!("--namespace={}", options.namespace),
                format!("--secret-name={}", options.secret_name),
                format!("--mutating-webhook-configuration={}", options.mutating_name),
                format!("--validating-webhook-configuration={}", options.validating_name),
                "--extra-san=127.0.0.1".to_owned(),
                // No endpoints to wait out here: SIGTERM stops at once, unless a test says otherwise.
                "--shutdown-delay=0s".to_owned(),
            ])
            .args(options.args.iter().cloned())
            .env("KUBECONFIG", options.kubeconfig.clone().unwrap_or_else(|| cp.kubeconfig_path()))
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()));
        let process = ManagedProcess::spawn(spec).map_err(|e| start_err(format!("starting {BINARY}: {e}")))?;
        Ok(Self { process, port, probe_port, metrics_port, log })
    }

    /// The admission endpoint, `127.0.0.1:port`, to call it directly (e.g. with
    /// [`HttpsConnection`] or [`served_certificate`]) rather than through the apiserver.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its process id, e.g. to signal it or read `/proc`.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// `GET` on the probe port: `(status, body)`.
    pub async fn probe(&self, path: &str) -> Result<(u16, String), String> {
        plain_get(SocketAddr::from(([127, 0, 0, 1], self.probe_port)), path).await
    }

    /// The `/metrics` text, read over TLS as an authorized scraper (`client` sets that up).
    pub async fn metrics(&self, client: &Client) -> Result<String, String> {
        crate::scrape::scrape(client, SocketAddr::from(([127, 0, 0, 1], self.metrics_port))).await
    }

    /// Wait until `/readyz` answers 200; on timeout the error holds the last answer and the
    /// log's tail.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let result = eventually("the webhook's /readyz", timeout, || async {
            match self.probe("/readyz").await {
                Ok((200, _)) => Ok(()),
                Ok((status, body)) => Err(format!("{status} {body}")),
                Err(e) => Err(e),
            }
        })
        .await;
        result.map_err(|e| format!("{e}\n--- {} ---\n{}", self.log.display(), self.process.log_tail(30)))
    }

    /// Whether it has not exited yet, e.g. to check that it survived what a test did to it.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) -> Result<std::process::ExitStatus, String> {
        self.process.stop(grace).map_err(|e| e.to_string())
    }

    /// The last `lines` lines of its log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// Plain-HTTP GET (probes).
pub use myownshell_envtest::http::plain_get;

/// Wait until a server-side dry-run create of a `MyOwnShell` called `name` in `namespace`
/// comes back defaulted: the apiserver calls the webhook and trusts its certificate (its
/// configuration informer may take a moment to catch up with a new or repaired caBundle).
pub async fn wait_until_defaulting(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), String> {
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), namespace);
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    eventually("the apiserver to call the webhook", timeout, || {
        let (shells, dry) = (shells.clone(), dry.clone());
        async move {
            let got = shells
                .create(&dry, &MyOwnShell::new(name, MyOwnShellSpec::default()))
                .await
                .map_err(|e| e.to_string())?;
            if got.spec.image.as_deref() == Some(defaults::IMAGE) { Ok(()) } else { Err("not defaulted".into()) }
        }
    })
    .await
}

/// The certificate store of the webhook Secret: `ca.crt` (the trust bundle) and `tls.crt`.
pub async fn secret_pem(client: &Client, namespace: &str, name: &str, key: &str) -> Result<String, String> {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace).get(name).await.map_err(|e| e.to_string())?;
    let data = secret.data.unwrap_or_default();
    data.get(key).map(|b| String::from_utf8_lossy(&b.0).into_owned()).ok_or(format!("Secret {name} has no {key}"))
}

/// The operator's webhooks for `ns` as a `myownshell-webhook` process answering only the
/// apiserver (`--apiserver-client-ca-file`): the connect gate, and the shell webhooks beside it.
pub async fn connect_gate(
    cp: &ControlPlane,
    client: &Client,
    ns: &str,
) -> Result<(InstalledWebhooks, WebhookProcess), String> {
    let port = free_port().map_err(|e| e.to_string())?;
    let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.to_owned() };
    let installed = InstalledWebhooks::install(client, ns, &target).await.map_err(|e| e.to_string())?;
    let mut options = WebhookOptions::for_installed(&installed, ns, port);
    options.args = vec![format!("--apiserver-client-ca-file={}", cp.webhook_client_ca_file().display())];
    let mut webhook = WebhookProcess::spawn(cp, &options).map_err(|e| e.to_string())?;
    webhook.wait_ready(Duration::from_secs(60)).await?;
    Ok((installed, webhook))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_configurations_are_kubebuilder_style() {
        let (m, v) = load_configurations().unwrap();
        assert_eq!(m.metadata.name.as_deref(), Some("mutating-webhook-configuration"));
        assert_eq!(v.metadata.name.as_deref(), Some("validating-webhook-configuration"));
        let mw = &m.webhooks.as_ref().unwrap()[0];
        let vw = &v.webhooks.as_ref().unwrap()[0];
        for (cc, path) in [
            (&mw.client_config, myownshell_api::names::MUTATE_PATH),
            (&vw.client_config, myownshell_api::names::VALIDATE_PATH),
        ] {
            let svc = cc.service.as_ref().unwrap();
            assert_eq!(
                (svc.name.as_str(), svc.namespace.as_str(), svc.path.as_deref(), svc.port),
                ("webhook-service", "system", Some(path), Some(443))
            );
            assert!(cc.ca_bundle.as_ref().is_none_or(|b| b.0.is_empty()));
        }
        assert_eq!(mw.admission_review_versions, ["v1"]);
        assert_eq!(mw.side_effects, "None");
        assert_eq!(
            (mw.failure_policy.as_deref(), mw.timeout_seconds, mw.match_policy.as_deref()),
            (Some("Fail"), Some(5), Some("Equivalent"))
        );
        assert_eq!(
            (vw.failure_policy.as_deref(), vw.timeout_seconds, vw.match_policy.as_deref()),
            (Some("Fail"), Some(5), Some("Equivalent"))
        );
        let ops = |rules: &Option<Vec<k8s_openapi::api::admissionregistration::v1::RuleWithOperations>>| {
            let r = &rules.as_ref().unwrap()[0];
            (r.operations.clone().unwrap(), r.resources.clone().unwrap())
        };
        assert_eq!(ops(&mw.rules), (vec!["CREATE".to_owned(), "UPDATE".to_owned()], vec!["myownshells".to_owned()]));
        assert_eq!(
            ops(&vw.rules),
            (
                vec!["CREATE".to_owned(), "UPDATE".to_owned()],
                vec!["myownshells".to_owned(), "myownshells/scale".to_owned()]
            )
        );
    }

    #[test]
    fn rewriting_points_at_the_url_and_scopes_to_the_namespace() {
        let target = Target {
            base_url: "https://127.0.0.1:1234".into(),
            ca_bundle: Some("PEM".into()),
            namespace: "ns-1".into(),
        };
        let (m, v) = rewrite("t1", &target).unwrap();
        assert_eq!(m.metadata.name.as_deref(), Some("t1-mutating"));
        assert_eq!(v.metadata.name.as_deref(), Some("t1-validating"));
        let cc = &m.webhooks.as_ref().unwrap()[0].client_config;
        assert_eq!(cc.url.as_deref(), Some("https://127.0.0.1:1234/mutate-myownshell-io-v1alpha1-myownshell"));
        assert!(cc.service.is_none());
        assert_eq!(cc.ca_bundle.as_ref().map(|b| b.0.clone()), Some(b"PEM".to_vec()));
        let sel = v.webhooks.as_ref().unwrap()[0].namespace_selector.clone().unwrap();
        assert_eq!(sel.match_labels.unwrap()[NAMESPACE_LABEL], "ns-1");
    }
}
