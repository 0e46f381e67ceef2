//! What every request of the gateway shares.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use myownshell_auth::authn::TokenAuthenticator;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::exec::as_user::AsUser;
use crate::exec::impersonate::{HeaderError, Mode};
use crate::recording::store::Store;
use crate::signin::Gate;
use crate::signin::sessions::Sessions;
use crate::terminal::registry::Terminals;
use crate::web::origin::AllowedOrigins;
use crate::web::page::Assets;
use myownshell_auth::request_header::FrontProxy;

/// How terminals behave.
#[derive(Debug, Clone)]
pub struct TerminalSettings {
    /// How long a terminal nobody watches keeps running for a page to come back.
    pub grace: Duration,
    /// Bytes of recent output kept for a page that comes back.
    pub scrollback: usize,
    /// What runs in the pod.
    pub command: Vec<String>,
    /// How long a new terminal waits for a ready pod.
    pub connect_timeout: Duration,
    /// The largest message a page may send (a paste is split by the page below this).
    pub max_message: usize,
    /// How often an idle page is pinged; one that answers nothing for three pings is gone.
    pub ping_interval: Duration,
}

/// The gateway's shared state.
pub struct Gateway {
    /// The gateway's own client (requests for users go through [`Gateway::as_user`]).
    pub client: Client,
    /// How users are impersonated (`--impersonation`).
    pub impersonation: Mode,
    /// TokenReview, cached.
    pub tokens: TokenAuthenticator,
    /// Whether the users of open terminals may still connect.
    pub access: crate::access::AccessCheck,
    /// The signed-in browsers.
    pub sessions: Arc<Sessions>,
    /// The live lists of shells open, per user.
    pub live: crate::web::shells::limit::Streams,
    /// The record of sign-outs every replica reads, when the replicas share a session key.
    pub signed_out: Option<crate::signin::signed_out::SignedOut>,
    /// The open terminals.
    pub terminals: Terminals,
    /// Where the page may be served from.
    pub origins: AllowedOrigins,
    /// The authenticating proxy in front (`--client-ca-file`), if any.
    pub front_proxy: Option<FrontProxy>,
    /// Sign-in through an identity provider (`--oidc-issuer-url`), if configured.
    pub oidc: Option<crate::signin::oidc::OidcSignIn>,
    /// Where sessions are recorded, if anywhere.
    pub recordings: Option<Store>,
    /// Whether every session is recorded.
    pub record_all: bool,
    /// The page and the terminal's JavaScript.
    pub assets: Assets,
    /// How terminals behave.
    pub settings: TerminalSettings,
    /// Cancelled when the gateway stops serving (after SIGTERM, once nobody is sent its way):
    /// every page is told and every exec closed.
    pub shutdown: CancellationToken,
    /// The tasks serving pages, waited for on shutdown.
    pub tasks: TaskTracker,
    /// The turns of held terminals to move to another replica once [`Gateway::shutdown`] is
    /// cancelled.
    pub handover: crate::web::handover::Handover,
}

impl Gateway {
    /// The sign-in checks over this gateway's state.
    pub fn gate(&self) -> Gate<'_> {
        Gate {
            tokens: &self.tokens,
            sessions: &self.sessions,
            origins: &self.origins,
            front_proxy: self.front_proxy.as_ref(),
            oidc: self.oidc.as_ref(),
        }
    }

    /// The gateway's client speaking as `user`.
    pub fn as_user(&self, user: &myownshell_auth::AuthenticatedUser) -> Result<AsUser, HeaderError> {
        AsUser::new(self.client.clone(), user, self.impersonation)
    }
}
