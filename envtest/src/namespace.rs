//! Per-test namespaces and ServiceAccount identities.

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// Create a fresh namespace `<prefix>-<pid>-<n>` and return its name. Namespaces are never
/// deleted: this control plane has no namespace controller to finish the deletion, and each
/// run has its own etcd anyway.
pub async fn create_namespace(client: &Client, prefix: &str) -> Result<String, kube::Error> {
    create_namespace_labelled(client, prefix, std::collections::BTreeMap::new()).await
}

/// [`create_namespace`], opened to shells (`myownshell.io/shells: enabled`, as a cluster
/// administrator does; see `config/policy/shell_namespaces.yaml`).
pub async fn create_shell_namespace(client: &Client, prefix: &str) -> Result<String, kube::Error> {
    let label = (
        myownshell_api::names::SHELLS_NAMESPACE_LABEL.to_owned(),
        myownshell_api::names::SHELLS_NAMESPACE_LABEL_VALUE.to_owned(),
    );
    create_namespace_labelled(client, prefix, std::collections::BTreeMap::from([label])).await
}

async fn create_namespace_labelled(
    client: &Client,
    prefix: &str,
    labels: std::collections::BTreeMap<String, String>,
) -> Result<String, kube::Error> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let prefix: String =
        prefix.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).take(40).collect();
    let name = format!("{}-{}-{n}", prefix.trim_matches('-'), std::process::id());
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(name.clone()), labels: Some(labels), ..ObjectMeta::default() },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    Ok(name)
}

/// Create a ServiceAccount (if needed) and return a token for it from the TokenRequest API.
/// `audiences` empty means the apiserver's own audience.
pub async fn service_account_token(
    client: &Client,
    namespace: &str,
    name: &str,
    audiences: &[&str],
    expiration_seconds: i64,
) -> Result<String, kube::Error> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    if api.get_opt(name).await?.is_none() {
        let sa = ServiceAccount {
            metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
            ..ServiceAccount::default()
        };
        api.create(&PostParams::default(), &sa).await?;
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
            expiration_seconds: Some(expiration_seconds),
            bound_object_ref: None,
        },
        ..TokenRequest::default()
    };
    let response = api.create_token_request(name, &PostParams::default(), &request).await?;
    Ok(response.status.map(|s| s.token).unwrap_or_default())
}

/// The username Kubernetes gives a ServiceAccount.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}
