//! The gateway's process: the page, its API and its terminals over TLS, the probes beside
//! them, and on SIGTERM every page told and every exec closed.

use std::sync::Arc;
use std::time::Duration;

use myownshell_auth::TlsFiles;
use myownshell_auth::authn::{AuthnCacheOptions, ReviewCounters, TokenAuthenticator};
use myownshell_auth::oidc::Verifier;
use myownshell_auth::transport::{ServingTls, TransportError};
use myownshell_runtime::client::ClientError;
use myownshell_runtime::drain;
use myownshell_runtime::flags::BindAddress;
use myownshell_runtime::probes::{self, BindError, Readiness, ReadyFlag};
use myownshell_runtime::server::{ServeOptions, serve_tls};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::args::Args;
use crate::gateway::{Gateway, TerminalSettings};
use crate::recording::quota::Quota;
use crate::recording::store::Store;
use crate::signin::key;
use crate::signin::oidc::OidcSignIn;
use crate::signin::seal::Sealer;
use crate::signin::sessions::Sessions;
use crate::signin::signed_out::SignedOut;
use crate::terminal::registry::Terminals;
use crate::web::handover::{Handover, MOVE_WITHIN};
use crate::web::origin::AllowedOrigins;
use crate::web::page::{Assets, AssetsError};
use crate::web::{self, socket};

/// Why the gateway did not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No kube client.
    #[error("kube client configuration: {0}")]
    Client(#[from] ClientError),
    /// The page's files are missing.
    #[error(transparent)]
    Assets(#[from] AssetsError),
    /// The serving certificate is unusable.
    #[error(transparent)]
    Tls(#[from] TransportError),
    /// `--bind-address` could not be bound, or serving failed.
    #[error("--bind-address {0}: {1}")]
    Serve(std::net::SocketAddr, std::io::Error),
    /// `--health-probe-bind-address` could not be bound.
    #[error(transparent)]
    Health(#[from] BindError),
    /// No key to seal sessions with.
    #[error("session key: {0}")]
    SessionKey(String),
    /// `--oidc-client-secret-file` does not read.
    #[error(transparent)]
    OidcSecret(#[from] crate::signin::oidc_args::SecretFileError),
    /// The identity provider cannot be used (not reached, or not as configured).
    #[error("--oidc-issuer-url: {0}")]
    Oidc(#[from] myownshell_auth::oidc::OidcError),
}

/// How long pages get to hear that the gateway stops.
const GOODBYE: Duration = Duration::from_secs(5);

/// How often recordings past their retention are deleted.
const SWEEP: Duration = Duration::from_secs(3600);

/// Delete old recordings now and every [`SWEEP`], until `shutdown`.
async fn sweep(store: Store, shutdown: CancellationToken) {
    loop {
        let swept = store.clone();
        match tokio::task::spawn_blocking(move || swept.sweep(std::time::SystemTime::now())).await {
            Ok(0) | Err(_) => {}
            Ok(deleted) => tracing::info!(deleted, "recordings past their retention deleted"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(SWEEP) => {}
        }
    }
}

/// The key browser sessions (and sign-ins under way) are sealed with: the one every replica
/// shares, else one of this replica's own.
/// Whether the key is shared: only then can another replica take up a session, and only then is
/// a sign-out recorded for the others.
async fn session_key(client: &kube::Client, secret: &str) -> Result<([u8; 32], bool), RunError> {
    let namespace = myownshell_runtime::pod::namespace();
    match key::shared(client, &namespace, secret).await {
        Ok(key) => Ok((key, true)),
        Err(e) => {
            tracing::warn!(error = %e, "no shared session key: sessions end with this replica");
            Ok((key::random().map_err(RunError::SessionKey)?, false))
        }
    }
}

/// Sign-in through the identity provider, when `--oidc-issuer-url` is given: its discovery
/// document is read now, so that a provider that cannot be used stops the start with why.
async fn oidc_sign_in(args: &Args, key: &[u8; 32]) -> Result<Option<OidcSignIn>, RunError> {
    let (Some(options), Some(redirect_url)) = (args.oidc.options()?, args.oidc.oidc_redirect_url.clone()) else {
        return Ok(None);
    };
    let verifier = Verifier::discover(options).await?;
    tracing::info!(issuer = %verifier.provider().issuer, "sign-in through the identity provider");
    let sealer = Sealer::for_sign_ins(key).map_err(RunError::SessionKey)?;
    Ok(Some(OidcSignIn::new(verifier, redirect_url, args.oidc.oidc_extra_scopes.clone(), sealer)))
}

/// A token cancelled once nobody is sent to this replica after `shutdown` (its readiness turned
/// false at once): pages that reconnect meanwhile are still served here, and only then is each
/// told to reattach, when the Service can no longer send it back (`myownshell_runtime::drain`).
fn draining(args: &Args, client: &kube::Client, shutdown: &CancellationToken, ready: ReadyFlag) -> CancellationToken {
    let not_ready = shutdown.clone();
    tokio::spawn(async move {
        not_ready.cancelled().await;
        ready.set(false);
    });
    let endpoint = args.pod_ip.map(|pod_ip| drain::Endpoint {
        service: args.service_name.clone(),
        namespace: myownshell_runtime::pod::namespace(),
        pod_ip,
    });
    drain::once_drained(client, endpoint, args.shutdown_delay, args.shutdown_max_wait, shutdown)
}

/// Where sessions are recorded, with --recordings-dir.
fn recording_store(args: &Args) -> Option<Store> {
    args.recordings_dir.clone().map(|dir| Store {
        dir,
        max_bytes: args.recording_max_bytes,
        retention: args.recording_retention,
        quota: Arc::new(Quota::new(args.recordings_max_shell_bytes, args.recordings_max_total_bytes)),
    })
}

/// How terminals behave, from the flags.
fn terminal_settings(args: &Args) -> TerminalSettings {
    TerminalSettings {
        grace: args.reattach_grace,
        scrollback: args.scrollback_bytes,
        command: args.command.clone(),
        connect_timeout: args.connect_timeout,
        max_message: args.max_message_bytes,
        ping_interval: args.ping_interval,
    }
}

/// Run until `shutdown`.
pub async fn run(args: Args, shutdown: CancellationToken) -> Result<(), RunError> {
    // Its terminals are exec and attach streams through this client, quiet while nobody types.
    let client = args.client.streaming_client().await?;
    let assets = Assets::load(&args.assets_dir)?;
    let authn = AuthnCacheOptions { ttl: args.auth_cache_ttl, ..AuthnCacheOptions::default() };
    let tokens = TokenAuthenticator::new(
        client.clone(),
        args.auth_token_audiences.clone(),
        authn,
        Arc::new(ReviewCounters::default()),
    );
    let (key, shared) = session_key(&client, &args.session_key_secret).await?;
    let signed_out = shared
        .then(|| SignedOut::new(client.clone(), &myownshell_runtime::pod::namespace(), &args.signed_out_config_map));
    let sealer = Sealer::new(&key).map_err(RunError::SessionKey)?;
    let oidc = oidc_sign_in(&args, &key).await?;
    // Ready while serving; not ready from SIGTERM on, while it goes on serving until nobody is
    // sent its way (`serving`): only then are pages told to go.
    let ready = ReadyFlag::default();
    let serving = draining(&args, &client, &shutdown, ready.clone());
    let gw = Arc::new(Gateway {
        access: crate::access::AccessCheck::new(client.clone(), args.admin_groups.clone()),
        client,
        impersonation: args.impersonation,
        tokens,
        sessions: Arc::new(Sessions::new(sealer, args.session_max_age, args.max_sessions, args.max_sessions_per_user)),
        signed_out,
        live: Default::default(),
        terminals: Terminals::new(args.max_terminals_per_user, args.max_terminals),
        origins: AllowedOrigins::new(&args.allowed_origins),
        front_proxy: args.front_proxy(),
        oidc,
        recordings: recording_store(&args),
        record_all: args.record_all_sessions,
        assets,
        settings: terminal_settings(&args),
        shutdown: serving.clone(),
        tasks: TaskTracker::new(),
        handover: Handover::new(args.handover_concurrency, (args.handover_within, MOVE_WITHIN), serving.clone()),
    });
    let files = TlsFiles {
        cert_file: args.tls_cert_file.clone(),
        key_file: args.tls_private_key_file.clone(),
        client_ca_file: args.client_ca_file.clone(),
    };
    let tls = ServingTls::new(&files, &args.tls_self_signed_names)?;
    let listener = TcpListener::bind(args.bind_address).await.map_err(|e| RunError::Serve(args.bind_address, e))?;
    let addr = listener.local_addr().map_err(|e| RunError::Serve(args.bind_address, e))?;
    ready.set(true);
    let health = match args.probes.health_probe_bind_address {
        BindAddress::At(at) => {
            let readiness = Readiness::from_flag(ready.clone(), "the gateway is stopping");
            Some(probes::serve_plain("health probes", at, probes::router(readiness), serving.clone()).await?)
        }
        BindAddress::Disabled => None,
    };
    tracing::info!(%addr, "serving the gateway");
    let activity = tokio::spawn(crate::activity::run(gw.clone(), args.activity_interval, serving.clone()));
    if let Some(record) = gw.signed_out.clone() {
        let sessions = gw.sessions.clone();
        tokio::spawn(record.follow(move |signed_out| sessions.signed_out(signed_out), shutdown.clone()));
    }
    if let Some(store) = gw.recordings.clone() {
        tokio::spawn(sweep(store, shutdown.clone()));
    }
    let reload = tls.watch_files(Duration::from_secs(10), serving.clone());
    let serve =
        serve_tls(listener, tls.config.clone(), web::router(gw.clone()), ServeOptions::default(), serving.clone());
    let (served, ()) = tokio::join!(serve, reload);
    let _ = activity.await;
    socket::close_all(&gw);
    gw.tasks.close();
    // The pacing's time, the last page's time to move, then a moment for the goodbyes.
    let _ = tokio::time::timeout(args.handover_within + MOVE_WITHIN + GOODBYE, gw.tasks.wait()).await;
    if let Some(health) = health {
        let _ = health.await;
    }
    served.map_err(|e| RunError::Serve(addr, e))
}
