//! The `myownshell-webhook` process: probes, metrics, certificates, the TLS admission server,
//! and graceful shutdown when the token `run` is given is cancelled (on SIGTERM in `main`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use myownshell_certs::certdir;
use myownshell_certs::inject::WebhookConfigs;
use myownshell_certs::manager::{self, CertStatus, SelfManagedConfig};
use myownshell_certs::rotation::Policy as CertPolicy;
use myownshell_certs::secret::SecretStore;
use myownshell_runtime::flags::BindAddress;
use myownshell_runtime::probes::{self, Readiness, ReadyFlag};
use myownshell_runtime::{server, tls};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::admission::Policy;
use crate::cli::Args;
use crate::metrics::Metrics;
use crate::server::{AppState, admission_service};

/// How often `--cert-dir` files are compared for changes.
const CERT_DIR_POLL: Duration = Duration::from_secs(1);
/// How often the expiry gauge is refreshed.
const GAUGE_REFRESH: Duration = Duration::from_secs(5);

/// The certificate settings from the flags.
pub fn cert_policy(args: &Args) -> anyhow::Result<CertPolicy> {
    let policy = CertPolicy {
        ca_name: format!("{}-ca", args.service_name),
        dns_names: args.dns_names(),
        ip_addresses: args.ip_addresses(),
        cert_validity: args.cert_validity,
        ca_validity: args.ca_validity,
        renew_before: args.renew_before,
        propagation: CertPolicy::default_propagation(args.renew_before),
    };
    policy.check().map_err(|e| anyhow::anyhow!("certificate flags: {e}"))?;
    Ok(policy)
}

/// `/metrics` over TLS behind TokenReview + SubjectAccessReview (the rbac-proxy layer).
async fn serve_secure_metrics(
    addr: SocketAddr,
    client: kube::Client,
    app: Router,
    args: &Args,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut options = args.metrics_auth.serving_options();
    options.self_signed_names = args.metrics_dns_names();
    let server = myownshell_rbac_proxy::SecureServer::bind(addr, client, app, options)
        .await
        .with_context(|| format!("serving metrics on {addr}"))?;
    server.spawn(shutdown);
    Ok(())
}

/// Run until `shutdown` is cancelled.
pub async fn run(args: Args, shutdown: CancellationToken) -> anyhow::Result<()> {
    let policy = Policy { max_size: args.max_size, allowed_registries: args.allowed_registries() };
    let metrics = Arc::new(Metrics::new());
    let listening = ReadyFlag::default();
    let (status_tx, status_rx) = watch::channel(CertStatus::default());

    // Probes first, so the kubelet sees a live (not yet ready) process while certificates are
    // being fetched.
    if let BindAddress::At(addr) = args.probes.health_probe_bind_address {
        let listening = listening.clone();
        let readiness = Readiness::from_check(move || {
            let s = status_rx.borrow();
            if !s.serving {
                Err("no serving certificate yet".into())
            } else if !listening.get() {
                Err("the webhook server is not listening".into())
            } else if !s.trusted {
                Err(s.detail.clone())
            } else {
                Ok(())
            }
        });
        probes::serve_plain("health probes", addr, probes::router(readiness), shutdown.clone()).await?;
    }
    // One client for everything that talks to the API (self-managed certificates, metrics
    // auth); `--cert-dir` mode with metrics off needs no API access at all.
    let needs_api = args.cert_dir.is_none() || matches!(args.metrics_auth.metrics_bind_address, BindAddress::At(_));
    let client = match needs_api {
        true => Some(kube::Client::try_default().await.context("configuring the Kubernetes client")?),
        false => None,
    };
    if let (BindAddress::At(addr), Some(client)) = (args.metrics_auth.metrics_bind_address, &client) {
        serve_secure_metrics(addr, client.clone(), metrics.router(), &args, shutdown.clone()).await?;
    }

    // Certificates: from files, or self-managed through the API.
    let (resolver, mut source_status) = match &args.cert_dir {
        Some(dir) => {
            let source = certdir::start(dir.clone(), CERT_DIR_POLL, shutdown.clone())
                .map_err(|e| anyhow::anyhow!("--cert-dir: {e}"))?;
            tracing::info!(dir = %dir.display(), "serving certificates from files");
            (source.resolver, source.status)
        }
        None => {
            let cert_policy = cert_policy(&args)?;
            let client = client.clone().context("self-managed certificates need the Kubernetes API")?;
            let cfg = SelfManagedConfig {
                policy: cert_policy,
                store: SecretStore::new(client.clone(), &args.namespace, &args.secret_name),
                configs: WebhookConfigs::new(
                    client.clone(),
                    &args.mutating_webhook_configuration,
                    &args.validating_webhook_configuration,
                ),
            };
            tracing::info!(
                secret = %format!("{}/{}", args.namespace, args.secret_name),
                names = ?args.dns_names(),
                "managing certificates"
            );
            match manager::start(cfg, client, shutdown.clone()).await {
                Some(source) => (source.resolver, source.status),
                None => return Ok(()),
            }
        }
    };

    // Mirror the certificate status into readiness and metrics.
    {
        let metrics = metrics.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            loop {
                let status = source_status.borrow_and_update().clone();
                metrics.set_certificate(status.not_after, status.trusted);
                status_tx.send_replace(status);
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    changed = source_status.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(GAUGE_REFRESH) => {}
                }
            }
        });
    }

    let tls = Arc::new(tls::server_config(resolver, None).context("TLS configuration")?);
    let addr = SocketAddr::new(args.bind_address, args.webhook_port);
    let listener = TcpListener::bind(addr).await.with_context(|| format!("binding the webhook address {addr}"))?;
    tracing::info!(%addr, "webhook listening");
    listening.set(true);
    let state = AppState { policy, metrics };
    server::serve_tls_with(listener, tls, move |_| admission_service(state.clone()), Default::default(), shutdown)
        .await
        .context("webhook server")?;
    tracing::info!("stopped");
    Ok(())
}
