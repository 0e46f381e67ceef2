//! The identity provider `cargo xtask dev` runs beside its local cluster, so that a person signs
//! in to the gateway's page as their organisation would have them do: the test bed's Ory Hydra
//! and login page (`myownshell_envtest::oidc`, users alice and bob), trusted by the apiserver
//! through `--authentication-config`, and the gateway signing people in through it. Its issuer
//! goes into the env file as `MYOWNSHELL_OIDC_ISSUER_URL`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use myownshell_envtest::oidc::apiserver::{self, JwtIssuer};
use myownshell_envtest::oidc::{GATEWAY_CLIENT_ID, Planned, Provider};

/// The provider laid out, before the cluster starts: the apiserver must be told about it.
pub struct Plan {
    planned: Planned,
    dir: PathBuf,
    /// The flags that make the apiserver trust the provider.
    pub apiserver_args: Vec<String>,
}

/// Lay the provider out in `<state_dir>/oidc/` (Hydra built once if it is not cached).
pub async fn plan(state_dir: &Path) -> anyhow::Result<Plan> {
    tokio::task::spawn_blocking(crate::hydra::ensure).await??;
    let dir = state_dir.join("oidc");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let planned = Provider::plan(&dir).map_err(anyhow::Error::msg)?;
    let issuer = JwtIssuer {
        url: planned.issuer(),
        certificate_authority: planned.ca_pem().to_owned(),
        audiences: vec![GATEWAY_CLIENT_ID.to_owned()],
    };
    let config = dir.join("authentication-config.yaml");
    std::fs::write(&config, apiserver::authentication_config(&issuer))
        .with_context(|| format!("writing {}", config.display()))?;
    Ok(Plan { planned, dir, apiserver_args: apiserver::apiserver_args(&config) })
}

/// The provider, running, and the gateway's flags for it.
pub struct Running {
    /// Hydra and the login page; they stop when this is dropped.
    pub provider: Provider,
    /// `--oidc-*` for the gateway on `gateway_port`.
    pub gateway_flags: Vec<String>,
}

impl Plan {
    /// Start Hydra, and register the gateway serving on `gateway_port` as its client.
    pub async fn start(self, gateway_port: u16) -> anyhow::Result<Running> {
        let Self { planned, dir, .. } = self;
        let provider = planned.start().await.map_err(anyhow::Error::msg)?;
        let origin = format!("https://127.0.0.1:{gateway_port}");
        let gateway_flags = provider.register_gateway(&dir, &origin, None).await.map_err(anyhow::Error::msg)?;
        Ok(Running { provider, gateway_flags })
    }
}
