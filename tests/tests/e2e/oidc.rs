//! The e2e's apiserver trusts the test bed's identity provider (Ory Hydra and its login page, on
//! the host's loopback, where the apiserver runs too) through `--authentication-config`, for ID
//! tokens issued to oauth2-proxy, the provider's one client here: the gateway behind
//! oauth2-proxy shows them to TokenReview (`oauth2_proxy.rs`).

use myownshell_envtest::control_plane::new_run_dir;
use myownshell_envtest::oidc::Provider;
use myownshell_envtest::oidc::apiserver::{self, JwtIssuer};
use myownshell_envtest::oidc::oauth2_proxy::CLIENT_ID;

/// Hydra started (first, so that the apiserver's first fetch of its keys finds it), and the
/// kube-apiserver flags that make the apiserver trust it.
pub async fn trusted_provider() -> (Provider, Vec<String>) {
    let dir = new_run_dir().unwrap();
    let planned = Provider::plan(&dir).unwrap_or_else(|e| panic!("the OIDC test bed: {e}"));
    let issuer = JwtIssuer {
        url: planned.issuer(),
        certificate_authority: planned.ca_pem().to_owned(),
        audiences: vec![CLIENT_ID.to_owned()],
    };
    let config = dir.join("authentication-config.yaml");
    std::fs::write(&config, apiserver::authentication_config(&issuer)).unwrap();
    let provider = planned.start().await.unwrap_or_else(|e| panic!("Hydra: {e}"));
    (provider, apiserver::apiserver_args(&config))
}
