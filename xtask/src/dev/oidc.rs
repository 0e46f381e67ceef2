//! The identity provider `cargo xtask dev` runs beside its local cluster, so that a person signs
//! in to the gateway's page as their organisation would have them do: the test bed's Ory Hydra
//! and login page (`myownshell_envtest::oidc`, users alice and bob), trusted by the apiserver
//! through `--authentication-config`, and the gateway signing people in through it. Its issuer
//! goes into the env file as `MYOWNSHELL_OIDC_ISSUER_URL`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use myownshell_envtest::oidc::admin::Client;
use myownshell_envtest::oidc::apiserver::{self, GROUPS_PREFIX, JwtIssuer, USERNAME_PREFIX};
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
        let redirect = format!("https://127.0.0.1:{gateway_port}/oidc/callback");
        let mut secret = [0u8; 24];
        getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("random bytes: {e}"))?;
        let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let client = Client {
            client_id: GATEWAY_CLIENT_ID.into(),
            client_secret: secret.clone(),
            redirect_uris: vec![redirect.clone()],
            id_token_lifespan: None,
            refresh_id_token_lifespan: None,
        };
        provider.admin().create_client(&client).await.map_err(anyhow::Error::msg)?;
        let (secret_file, ca_file) = (dir.join("gateway-client-secret"), dir.join("issuer-ca.crt"));
        write_private(&secret_file, &secret)?;
        std::fs::write(&ca_file, provider.ca_pem()).with_context(|| format!("writing {}", ca_file.display()))?;
        let gateway_flags = vec![
            format!("--oidc-issuer-url={}", provider.issuer()),
            format!("--oidc-client-id={GATEWAY_CLIENT_ID}"),
            format!("--oidc-client-secret-file={}", secret_file.display()),
            format!("--oidc-redirect-url={redirect}"),
            format!("--oidc-ca-file={}", ca_file.display()),
            // As the apiserver's --authentication-config names people: `oidc:alice`.
            format!("--oidc-username-prefix={USERNAME_PREFIX}"),
            "--oidc-groups-claim=groups".into(),
            format!("--oidc-groups-prefix={GROUPS_PREFIX}"),
        ];
        Ok(Running { provider, gateway_flags })
    }
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}
