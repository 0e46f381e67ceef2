//! A control plane that trusts the test bed's provider, shared by the tests of a test binary:
//! the provider first, its clients registered, then kube-apiserver with an
//! `AuthenticationConfiguration` naming it, then a wait until an ID token of alice's is
//! accepted (the apiserver fetches the issuer's keys in the background after it is ready, and
//! refuses every token with 401 until then, which a test of a refusal must not take for one).

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::Api;
use kube::api::PostParams;

use super::Provider;
use super::admin::Client;
use super::apiserver::{self, JwtIssuer, USERNAME_PREFIX};
use super::sign_in::{SignInError, Tokens, sign_in};
use super::users::ALICE;
use crate::control_plane::{ControlPlane, HarnessError, Options, new_run_dir, start_shared};
use crate::{assets, eventually};

/// How long the apiserver may take to fetch the issuer's keys and accept a token.
const TRUST_TIMEOUT: Duration = Duration::from_secs(60);
/// Where Hydra sends the browser back; nothing listens there: the test's browser stops at it.
pub const REDIRECT_URI: &str = "https://127.0.0.1/myownshell/callback";

/// The client id of a gateway signing people in through the test bed's provider: the apiserver
/// takes its ID tokens too. The test that runs the gateway registers it (with the gateway's own
/// redirect URI, known once its port is).
pub const GATEWAY_CLIENT_ID: &str = GATEWAY_CLIENT_IDS[0];

/// The client ids the test bed's gateways get, one per gateway registered at one provider, the
/// first being [`GATEWAY_CLIENT_ID`]: the tests of one test binary share the provider and each
/// runs a gateway of its own (a client's redirect URI names the gateway's port), and the
/// apiserver must take the ID tokens of every one of them (its audiences are fixed at start).
pub const GATEWAY_CLIENT_IDS: [&str; 6] = [
    "myownshell-gateway",
    "myownshell-gateway-2",
    "myownshell-gateway-3",
    "myownshell-gateway-4",
    "myownshell-gateway-5",
    "myownshell-gateway-6",
];

/// The provider, its clients, and the control plane trusting it.
#[derive(Debug)]
pub struct TrustingCluster {
    /// Hydra and the login page.
    pub provider: Provider,
    /// The control plane whose apiserver trusts `provider`.
    pub control_plane: ControlPlane,
    /// A client whose ID tokens the apiserver takes (their `aud` is one it accepts).
    pub client: Client,
    /// Another accepted client, whose ID tokens live seconds (for a test of an expired token).
    pub short_lived: Client,
    /// A client of the same issuer whose audience the apiserver does not accept.
    pub other_audience: Client,
}

/// A client of the test bed with `id`.
fn new_client(id: &str, id_token_lifespan: Option<&str>) -> Result<Client, String> {
    let mut secret = [0u8; 24];
    getrandom::fill(&mut secret).map_err(|e| format!("random bytes: {e}"))?;
    Ok(Client {
        client_id: id.to_owned(),
        client_secret: secret.iter().map(|b| format!("{b:02x}")).collect(),
        redirect_uris: vec![REDIRECT_URI.to_owned()],
        id_token_lifespan: id_token_lifespan.map(str::to_owned),
        refresh_id_token_lifespan: None,
    })
}

/// Which comes up first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Hydra, then the apiserver: the apiserver's first fetch of the issuer's keys succeeds.
    IssuerFirst,
    /// The apiserver (ready, with its issuer down), then Hydra: the apiserver keeps trying.
    ApiserverFirst,
}

impl TrustingCluster {
    /// Start it all, the issuer first (files and logs in new run directories under
    /// `target/envtest/`).
    pub async fn start() -> Result<Self, HarnessError> {
        Self::start_ordered(Order::IssuerFirst).await
    }

    /// Start it all in `order`. Either way this returns once the apiserver has accepted an ID
    /// token of alice's.
    pub async fn start_ordered(order: Order) -> Result<Self, HarnessError> {
        let dir = new_run_dir()?;
        let planned = Provider::plan(&dir).map_err(HarnessError::Start)?;
        let client = new_client("myownshell-test-bed", None).map_err(HarnessError::Start)?;
        let short_lived = new_client("myownshell-test-bed-short-lived", Some("5s")).map_err(HarnessError::Start)?;
        let other_audience = new_client("another-application", None).map_err(HarnessError::Start)?;
        let issuer = JwtIssuer {
            url: planned.issuer(),
            certificate_authority: planned.ca_pem().to_owned(),
            audiences: [client.client_id.as_str(), short_lived.client_id.as_str()]
                .into_iter()
                .chain(GATEWAY_CLIENT_IDS)
                .map(str::to_owned)
                .collect(),
        };
        let config = dir.join("authentication-config.yaml");
        std::fs::write(&config, apiserver::authentication_config(&issuer))
            .map_err(crate::control_plane::io_err(format!("writing {}", config.display())))?;
        let options = Options { apiserver_args: apiserver::apiserver_args(&config), ..Options::default() };
        let assets = assets::locate().map_err(HarnessError::Assets)?;
        let start_control_plane = || async { ControlPlane::start_in(assets, options, new_run_dir()?).await };
        let (provider, control_plane) = match order {
            Order::IssuerFirst => {
                let provider = planned.start().await.map_err(HarnessError::Start)?;
                (provider, start_control_plane().await?)
            }
            Order::ApiserverFirst => {
                // `start_in` returns once `/readyz` says ready: with the issuer not yet up.
                let control_plane = start_control_plane().await?;
                (planned.start().await.map_err(HarnessError::Start)?, control_plane)
            }
        };
        for c in [&client, &short_lived, &other_audience] {
            provider.create_client(c).await.map_err(HarnessError::Start)?;
        }
        let cluster = Self { provider, control_plane, client, short_lived, other_audience };
        cluster.wait_trusted().await?;
        Ok(cluster)
    }

    /// Sign `user` in to `client` as a browser would ([`sign_in`]).
    pub async fn sign_in(&self, client: &Client, user: &str, password: &str) -> Result<Tokens, SignInError> {
        sign_in(&self.provider, client, user, password).await
    }

    /// Who the apiserver says the bearer of `token` is: `(user name, groups)` from a
    /// SelfSubjectReview, or its refusal.
    pub async fn whoami(&self, token: &secrecy::SecretString) -> Result<(String, Vec<String>), kube::Error> {
        use secrecy::ExposeSecret as _;
        let client =
            self.control_plane.client_with_token(token.expose_secret()).map_err(|e| kube_error(e.to_string()))?;
        let review = Api::<SelfSubjectReview>::all(client).create(&PostParams::default(), &Default::default()).await?;
        let info = review.status.and_then(|s| s.user_info).unwrap_or_default();
        Ok((info.username.unwrap_or_default(), info.groups.unwrap_or_default()))
    }

    async fn wait_trusted(&self) -> Result<(), HarnessError> {
        let tokens = self.sign_in(&self.client, ALICE.name, ALICE.password).await.map_err(|e| {
            HarnessError::Start(format!("signing alice in: {e}; Hydra's log ends:\n{}", self.provider.log_tail(20)))
        })?;
        let expected = format!("{USERNAME_PREFIX}{}", ALICE.name);
        eventually("the apiserver to accept an ID token of the test bed's issuer", TRUST_TIMEOUT, || async {
            match self.whoami(&tokens.id_token).await {
                Ok((user, _)) if user == expected => Ok(()),
                Ok((user, groups)) => Err(format!("it says the bearer is {user:?} in {groups:?}")),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
        .map_err(HarnessError::Start)
    }
}

fn kube_error(message: String) -> kube::Error {
    kube::Error::Service(message.into())
}

/// The trusting cluster shared by every test of this test binary, started on first use; if it
/// cannot start, every test that asks fails with the reason (no test skips).
pub fn shared() -> &'static TrustingCluster {
    static SHARED: OnceLock<Result<TrustingCluster, String>> = OnceLock::new();
    let result = SHARED.get_or_init(|| {
        start_shared("OIDC test bed", TrustingCluster::start, |c: &TrustingCluster| {
            format!(
                "OIDC test bed: Hydra {} at {}, login page at {}; {}",
                super::hydra::VERSION,
                c.provider.issuer(),
                c.provider.login_url(),
                c.control_plane.summary()
            )
        })
    });
    match result {
        Ok(cluster) => cluster,
        Err(e) => panic!("OIDC test bed unavailable: {e}"),
    }
}
