//! A validating webhook served by the test itself that holds the requests it receives until the
//! test opens it: a way to catch a client in the middle of a write (a reconcile in flight, say)
//! through the real apiserver.
//!
//! It serves TLS from a throwaway CA (passed as the `caBundle`), matches only the test's own
//! namespace, and allows everything once open.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use myownshell_envtest::control_plane::HarnessError;
use myownshell_envtest::wait::eventually;
use myownshell_runtime::server::RequestBody;

fn err(what: &str, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Start(format!("admission gate: {what}: {e}"))
}

/// How many requests the gate has seen and holds, and whether it is open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct GateState {
    seen: usize,
    held: usize,
    open: bool,
}

/// An installed gate; [`AdmissionGate::remove`] uninstalls it (dropping it stops the server).
pub struct AdmissionGate {
    client: Client,
    name: String,
    state: watch::Sender<GateState>,
    shutdown: CancellationToken,
}

impl Drop for AdmissionGate {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The answer for a review body: allowed, with the request's uid.
fn allow(body: &[u8]) -> Bytes {
    let uid = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["request"]["uid"].as_str().map(str::to_owned));
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid.unwrap_or_default(), "allowed": true},
    });
    Bytes::from(serde_json::to_vec(&review).unwrap_or_default())
}

async fn serve(
    state: watch::Sender<GateState>,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, String), HarnessError> {
    let tls = myownshell_envtest::tls::loopback("admission-gate-ca").map_err(|e| err("TLS", e))?;
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| err("listen", e))?;
    let addr = listener.local_addr().map_err(|e| err("listen", e))?;
    let make_service = move |_| {
        let state = state.clone();
        hyper::service::service_fn(move |request: http::Request<RequestBody>| {
            let state = state.clone();
            async move {
                let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                state.send_modify(|s| {
                    s.seen += 1;
                    s.held += 1;
                });
                let mut open = state.subscribe();
                let _ = open.wait_for(|s| s.open).await;
                state.send_modify(|s| s.held -= 1);
                let mut response = http::Response::new(Full::new(allow(&body)));
                response
                    .headers_mut()
                    .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
                Ok::<_, std::convert::Infallible>(response)
            }
        })
    };
    tokio::spawn(myownshell_runtime::server::serve_tls_with(
        listener,
        tls.server,
        make_service,
        Default::default(),
        shutdown,
    ));
    Ok((addr, tls.ca.cert_pem().to_owned()))
}

impl AdmissionGate {
    /// Serve the gate and install a validating webhook named `name` that sends it the
    /// `operations` on `group/version/resource` in `namespace`. It starts open; it returns once
    /// the apiserver calls it (checked with a server-side dry run of `probe`, an object in
    /// `namespace` that `rule` matches).
    pub async fn install<K>(
        client: &Client,
        name: &str,
        namespace: &str,
        rule: RuleWithOperations,
        probe: K,
    ) -> Result<Self, HarnessError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + std::fmt::Debug,
        K: serde::Serialize + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        let (state, _) = watch::channel(GateState { open: true, ..GateState::default() });
        let shutdown = CancellationToken::new();
        let (addr, ca_pem) = serve(state.clone(), shutdown.clone()).await?;
        let configuration = ValidatingWebhookConfiguration {
            metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
            webhooks: Some(vec![ValidatingWebhook {
                name: "gate.test.myownshell.io".into(),
                client_config: WebhookClientConfig {
                    url: Some(format!("https://{addr}/gate")),
                    ca_bundle: Some(ByteString(ca_pem.into_bytes())),
                    service: None,
                },
                rules: Some(vec![rule]),
                namespace_selector: Some(LabelSelector {
                    match_labels: Some([("kubernetes.io/metadata.name".to_owned(), namespace.to_owned())].into()),
                    ..LabelSelector::default()
                }),
                side_effects: "None".into(),
                admission_review_versions: vec!["v1".into()],
                failure_policy: Some("Fail".into()),
                timeout_seconds: Some(30),
                ..ValidatingWebhook::default()
            }]),
        };
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &configuration)
            .await
            .map_err(|e| err("installing the configuration", e))?;
        let gate = Self { client: client.clone(), name: name.to_owned(), state, shutdown };
        let probes: Api<K> = Api::namespaced(client.clone(), namespace);
        let dry = PostParams { dry_run: true, ..PostParams::default() };
        eventually("the apiserver to call the admission gate", Duration::from_secs(30), || async {
            let _ = probes.create(&dry, &probe).await;
            if gate.state.borrow().seen > 0 { Ok(()) } else { Err("not called yet".to_owned()) }
        })
        .await
        .map_err(|e| err("waiting", e))?;
        Ok(gate)
    }

    /// Hold every request from now on.
    pub fn close(&self) {
        self.state.send_modify(|s| s.open = false);
    }

    /// Let every held request through, and all that come later.
    pub fn open(&self) {
        self.state.send_modify(|s| s.open = true);
    }

    /// Wait until at least `n` requests are being held.
    pub async fn wait_until_holding(&self, n: usize, timeout: Duration) -> Result<(), String> {
        let mut state = self.state.subscribe();
        match tokio::time::timeout(timeout, state.wait_for(|s| s.held >= n)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(format!("the gate holds {} request(s) after {timeout:?}, not {n}", self.state.borrow().held)),
        }
    }

    /// Open, and delete the configuration.
    pub async fn remove(self) -> Result<(), kube::Error> {
        self.open();
        Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}
