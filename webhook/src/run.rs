//! The `myownshell-webhook` process: probes, metrics, certificates, the TLS admission server,
//! and graceful shutdown when the token `run` is given is cancelled (on SIGTERM in `main`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use myownshell_certs::certdir;
use myownshell_certs::inject::WebhookConfigs;
use myownshell_certs::manager::{self, CertStatus, SelfManagedConfig};
use myownshell_certs::rotation::Policy as CertPolicy;
use myownshell_certs::secret::SecretStore;
use myownshell_runtime::flags::BindAddress;
use myownshell_runtime::probes::{self, Readiness, ReadyFlag};
use myownshell_runtime::tls::LiveResolver;
use myownshell_runtime::{server, tls};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::classes::ClassIndex;
use crate::classes::usage::ClassUsage;
use crate::connect::record;
use crate::connect::shell_index::{self, ShellIndex};
use crate::metrics::Metrics;
use crate::server::{AppState, admission_service};
use myownshell_runtime::drain;

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

/// `/healthz` and `/readyz`: ready once a certificate the injected caBundle trusts is served
/// and the admission port listens. Started first, so the kubelet sees a live (not yet ready)
/// process while certificates are being fetched.
async fn serve_probes(
    args: &Args,
    status: watch::Receiver<CertStatus>,
    listening: ReadyFlag,
    (shells, classes): (Arc<ShellIndex>, Arc<ClassIndex>),
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let BindAddress::At(addr) = args.probes.health_probe_bind_address else { return Ok(()) };
    let stopping = shutdown.clone();
    let readiness = Readiness::from_check(move || {
        let s = status.borrow();
        if stopping.is_cancelled() {
            Err("shutting down: answering reviews until the endpoints no longer list this pod".into())
        } else if !shells.is_synced() {
            Err("the MyOwnShells are not listed yet".into())
        } else if !classes.is_synced() {
            Err("the MyOwnShellClasses are not listed yet".into())
        } else if !s.serving {
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
    Ok(())
}

/// The serving certificates: from `--cert-dir` files, or self-managed through the API (the
/// Secret replicas share, caBundle injection, rotation). `None` when shutdown came first.
async fn certificates(
    args: &Args,
    client: &kube::Client,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<(Arc<LiveResolver>, watch::Receiver<CertStatus>)>> {
    if let Some(dir) = &args.cert_dir {
        let source = certdir::start(dir.clone(), CERT_DIR_POLL, shutdown.clone())
            .map_err(|e| anyhow::anyhow!("--cert-dir: {e}"))?;
        tracing::info!(dir = %dir.display(), "serving certificates from files");
        return Ok(Some((source.resolver, source.status)));
    }
    let cert_policy = cert_policy(args)?;
    let client = client.clone();
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
    Ok(manager::start(cfg, client, shutdown.clone()).await.map(|source| (source.resolver, source.status)))
}

/// Mirror the certificate status into readiness (`status_tx`) and the metrics, refreshing the
/// expiry gauge every few seconds.
fn mirror_certificate_status(
    mut source: watch::Receiver<CertStatus>,
    status_tx: watch::Sender<CertStatus>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let status = source.borrow_and_update().clone();
            metrics.set_certificate(status.not_after, status.trusted);
            status_tx.send_replace(status);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = source.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(GAUGE_REFRESH) => {}
            }
        }
    });
}

/// A token cancelled once no review comes this way after `shutdown` (see
/// [`myownshell_runtime::drain`]): the admission server's. On SIGTERM the pod turns not ready at
/// once, but a review sent to a server that stopped would fail ("failed calling webhook", refused
/// with `failurePolicy: Fail`).
fn once_drained(args: &Args, client: &kube::Client, shutdown: &CancellationToken) -> CancellationToken {
    let endpoint = args.pod_ip.map(|pod_ip| drain::Endpoint {
        service: args.service_name.clone(),
        namespace: args.namespace.clone(),
        pod_ip,
    });
    drain::once_drained(client, endpoint, args.shutdown_delay, args.shutdown_max_wait, shutdown)
}

/// Run until `shutdown` is cancelled.
pub async fn run(args: Args, shutdown: CancellationToken) -> anyhow::Result<()> {
    let policy = args.policy();
    let metrics = Arc::new(Metrics::new());
    let listening = ReadyFlag::default();
    let shells = Arc::new(ShellIndex::default());
    let classes = Arc::new(ClassIndex::default());
    let (status_tx, status_rx) = watch::channel(CertStatus::default());
    serve_probes(&args, status_rx, listening.clone(), (shells.clone(), classes.clone()), &shutdown).await?;

    // One client for everything that talks to the API: the shells it decides connections to,
    // the record of those, self-managed certificates, metrics auth.
    let client = args.client.client().await.context("configuring the Kubernetes client")?;
    tokio::spawn(shell_index::watch(client.clone(), shells.clone(), shutdown.clone()));
    tokio::spawn(crate::classes::index::watch(client.clone(), classes.clone(), shutdown.clone()));
    let recorder = record::start(client.clone(), args.connection_record_interval, shutdown.clone());
    let service = args.metrics_service();
    args.metrics_auth
        .serve(client.clone(), metrics.router(), &service, shutdown.clone())
        .await
        .context("serving metrics")?;
    let Some((resolver, source_status)) = certificates(&args, &client, &shutdown).await? else {
        return Ok(());
    };
    mirror_certificate_status(source_status, status_tx, metrics.clone(), shutdown.clone());

    // The apiserver's client certificate, asked of every caller and required for the connect
    // webhook's every path (`AppState::from_apiserver`) when its CA is given.
    let apiserver_ca = args.apiserver_client_ca_file.as_deref();
    let verifier = apiserver_ca
        .map(myownshell_auth::transport::client_verifier)
        .transpose()
        .context("--apiserver-client-ca-file")?;
    let tls = Arc::new(tls::server_config(resolver, verifier).context("TLS configuration")?);
    let addr = SocketAddr::new(args.bind_address, args.webhook_port);
    let listener = TcpListener::bind(addr).await.with_context(|| format!("binding the webhook address {addr}"))?;
    tracing::info!(%addr, "webhook listening");
    listening.set(true);
    let earlier_pods = Some(crate::earlier_pods::EarlierPods::new(client.clone()));
    let draining = Some(shutdown.clone());
    let (allow_ttl, deny_ttl) = (args.class_use_allow_cache_ttl, args.class_use_deny_cache_ttl);
    let class_usage = Some(Arc::new(ClassUsage::new(client.clone(), allow_ttl, deny_ttl)));
    let recorder = Some(recorder);
    let state = AppState {
        policy,
        metrics,
        shells,
        classes,
        class_usage,
        recorder,
        earlier_pods,
        draining,
        from_apiserver: true,
        body_budget: crate::server::BodyBudget::new(),
    };
    let apiserver_only = apiserver_ca.is_some();
    let serving = once_drained(&args, &client, &shutdown);
    // A verified certificate is the only kind a connection can carry: a bad one fails the handshake.
    let per_connection = move |caller: server::ConnectionInfo| {
        admission_service(state.for_caller(!apiserver_only || caller.peer_certificates.is_some()))
    };
    server::serve_tls_with(listener, tls, per_connection, Default::default(), serving)
        .await
        .context("webhook server")?;
    tracing::info!("stopped");
    Ok(())
}
