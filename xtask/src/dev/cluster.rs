//! What `cargo xtask dev` puts into its control plane before starting the binaries: the
//! namespace and RBAC from `config/default` (so each binary runs as its own ServiceAccount, with
//! exactly the production permissions), the webhook configurations pointed at the local webhook,
//! the admission policies (who may get into a shell), and a ServiceAccount bound to
//! `metrics-reader` whose token reads the metrics.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, Patch, PatchParams};
use myownshell_api::names;
use myownshell_envtest::ControlPlane;
use myownshell_envtest::control_plane::write_kubeconfig;
use myownshell_envtest::kustomize::{as_list, render};
use myownshell_envtest::rbac;
use myownshell_envtest::service_account_token;
use serde_json::Value;

pub const SYSTEM_NAMESPACE: &str = "myownshell-system";
pub const CONTROLLER_SA: &str = "myownshell-controller";
pub const WEBHOOK_SA: &str = "myownshell-webhook";
pub const GATEWAY_SA: &str = "myownshell-gateway";
const METRICS_READER_SA: &str = "metrics-reader";
const METRICS_READER_ROLE: &str = "myownshell-metrics-reader";
/// Tokens last a day; restart dev for a fresh one.
const TOKEN_SECONDS: i64 = 86_400;
const RBAC_KINDS: [&str; 6] =
    ["Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];
const POLICY_KINDS: [&str; 2] = ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"];

/// Credentials written for the run.
pub struct Identities {
    pub admin_kubeconfig: PathBuf,
    pub controller_kubeconfig: PathBuf,
    pub webhook_kubeconfig: PathBuf,
    pub gateway_kubeconfig: PathBuf,
    pub metrics_token: String,
}

/// A webhook configuration from `config/default`, with every `clientConfig` sent to
/// `https://127.0.0.1:<port><path>` (the CA bundle is left for the webhook to inject).
pub fn local_webhook_configuration(mut object: Value, port: u16) -> anyhow::Result<Value> {
    let hooks = object["webhooks"].as_array_mut().context("webhook configuration without webhooks")?;
    for hook in hooks {
        let path =
            hook["clientConfig"]["service"]["path"].as_str().context("webhook without a service path")?.to_owned();
        hook["clientConfig"] = serde_json::json!({ "url": format!("https://127.0.0.1:{port}{path}") });
    }
    Ok(object)
}

async fn kubectl_apply(cp: &ControlPlane, objects: &[&Value]) -> anyhow::Result<()> {
    let out = cp
        .kubectl()
        .run_with_stdin(&["apply", "-f", "-"], Some(&as_list(objects)))
        .await
        .map_err(anyhow::Error::msg)?;
    if !out.success {
        bail!("kubectl apply failed: {}", out.stderr);
    }
    Ok(())
}

pub async fn install(cp: &ControlPlane, state_dir: &Path, webhook_port: u16) -> anyhow::Result<Identities> {
    let objects = render("default").map_err(anyhow::Error::msg)?;
    let rbac: Vec<&Value> =
        objects.iter().filter(|o| RBAC_KINDS.contains(&o["kind"].as_str().unwrap_or_default())).collect();
    kubectl_apply(cp, &rbac).await.context("installing namespace and RBAC")?;

    let webhooks = objects
        .iter()
        .filter(|o| o["kind"] == "MutatingWebhookConfiguration" || o["kind"] == "ValidatingWebhookConfiguration")
        .map(|o| local_webhook_configuration(o.clone(), webhook_port))
        .collect::<anyhow::Result<Vec<_>>>()?;
    kubectl_apply(cp, &webhooks.iter().collect::<Vec<_>>()).await.context("installing webhook configurations")?;
    let policies: Vec<&Value> =
        objects.iter().filter(|o| POLICY_KINDS.contains(&o["kind"].as_str().unwrap_or_default())).collect();
    kubectl_apply(cp, &policies).await.context("installing the admission policies")?;
    // The README's walk-through applies its shells to `default`: opened to shells, as a cluster
    // administrator opens a namespace (`config/policy/shell_namespaces.yaml`).
    let label = format!("{}={}", names::SHELLS_NAMESPACE_LABEL, names::SHELLS_NAMESPACE_LABEL_VALUE);
    let out = cp
        .kubectl()
        .run(&["label", "namespace", "default", "--overwrite", &label])
        .await
        .map_err(anyhow::Error::msg)?;
    if !out.success {
        bail!("labelling the default namespace: {}", out.stderr);
    }

    let admin = cp.client()?;
    let kubeconfig_for = |sa: &str| -> anyhow::Result<PathBuf> { Ok(state_dir.join(format!("{sa}.kubeconfig"))) };
    let controller_kubeconfig = kubeconfig_for(CONTROLLER_SA)?;
    let webhook_kubeconfig = kubeconfig_for(WEBHOOK_SA)?;
    let gateway_kubeconfig = kubeconfig_for(GATEWAY_SA)?;
    let identities =
        [(CONTROLLER_SA, &controller_kubeconfig), (WEBHOOK_SA, &webhook_kubeconfig), (GATEWAY_SA, &gateway_kubeconfig)];
    for (sa, path) in identities {
        let token = service_account_token(&admin, SYSTEM_NAMESPACE, sa, &[], TOKEN_SECONDS).await?;
        write_kubeconfig(path, &cp.kubeconfig_for_token(&token))?;
    }

    let metrics_token = service_account_token(&admin, SYSTEM_NAMESPACE, METRICS_READER_SA, &[], TOKEN_SECONDS).await?;
    let subject = rbac::service_account_subject(SYSTEM_NAMESPACE, METRICS_READER_SA);
    let binding = rbac::cluster_role_binding("myownshell-dev-metrics-reader", METRICS_READER_ROLE, subject);
    Api::<ClusterRoleBinding>::all(admin)
        .patch("myownshell-dev-metrics-reader", &PatchParams::apply("xtask-dev").force(), &Patch::Apply(&binding))
        .await?;

    let admin_kubeconfig = state_dir.join("kubeconfig");
    write_kubeconfig(&admin_kubeconfig, &cp.kubeconfig())?;
    Ok(Identities { admin_kubeconfig, controller_kubeconfig, webhook_kubeconfig, gateway_kubeconfig, metrics_token })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_configurations_are_pointed_at_localhost() {
        let cfg = serde_json::json!({
            "kind": "MutatingWebhookConfiguration",
            "webhooks": [{"name": "m", "clientConfig": {"service": {"name": "svc", "namespace": "ns", "path": "/mutate", "port": 443}}}]
        });
        let local = local_webhook_configuration(cfg, 9443).unwrap();
        assert_eq!(local["webhooks"][0]["clientConfig"], serde_json::json!({"url": "https://127.0.0.1:9443/mutate"}));
        assert!(local_webhook_configuration(serde_json::json!({"webhooks": [{"clientConfig": {}}]}), 1).is_err());
    }
}
