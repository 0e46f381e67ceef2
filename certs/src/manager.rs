//! Self-managed certificates at run time: the loop around [`crate::rotation::plan`].
//!
//! Each round reads the Secret and the injected `caBundle`s fresh from the API, lets the planner
//! decide, writes the Secret with optimistic concurrency (a conflict just means another replica
//! was first: read again), swaps the served certificate live, injects the trust bundle, and
//! publishes a [`CertStatus`] (readiness and metrics read it). Rounds run when the planner asks
//! to look again, whenever the Secret or either webhook configuration changes (a watch on each
//! by name), and at least every minute (`MAX_IDLE`): replicas sharing one Secret follow each
//! other's rotations within moments, and a `caBundle` that someone empties or replaces (a
//! `kubectl apply` of the committed configurations) is repaired within moments too.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::inject::WebhookConfigs;
use crate::rotation::{CertState, Policy, plan};
use crate::secret::{SecretStore, StoreError};
use crate::trust::{validity, verify_leaf};
use myownshell_runtime::tls::{LiveResolver, certified_key_from_pem};

/// Wait after a failed round (API unreachable, RBAC missing) before the next.
const RETRY: Duration = Duration::from_secs(1);
/// Run a round at least this often. The watches bring every change within moments; this is
/// the backstop for a watch that cannot be had (RBAC from before the webhook watched its
/// configurations: `get`/`update` only), under which drift is still repaired in this time.
const MAX_IDLE: Duration = Duration::from_secs(60);

/// What the served certificate looks like to clients.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CertStatus {
    /// A certificate is being served.
    pub serving: bool,
    /// Every webhook's injected `caBundle` trusts the served certificate (for the service
    /// name). Always true in `--cert-dir` mode, where nothing is injected.
    pub trusted: bool,
    /// Expiry of the served certificate.
    pub not_after: Option<SystemTime>,
    /// Why `trusted` is false, for logs and `/readyz`.
    pub detail: String,
}

/// Everything the loop needs.
#[derive(Clone)]
pub struct SelfManagedConfig {
    /// Names, validities and renewal timing of the certificates (checked by the caller).
    pub policy: Policy,
    /// The Secret the certificates live in, shared by every replica.
    pub store: SecretStore,
    /// The webhook configurations whose `caBundle` must trust the served certificate.
    pub configs: WebhookConfigs,
}

/// A running self-managed certificate source.
pub struct SelfManaged {
    /// Hands the current serving certificate to the TLS server; swapped in place on rotation.
    pub resolver: Arc<LiveResolver>,
    /// Whether the injected `caBundle` trusts what is served, and its expiry; updated after
    /// every round that changes it.
    pub status: watch::Receiver<CertStatus>,
    /// The rotation loop; it ends when the `shutdown` token given to [`start`] is cancelled.
    pub task: tokio::task::JoinHandle<()>,
}

struct Loop {
    cfg: SelfManagedConfig,
    resolver: Option<Arc<LiveResolver>>,
    served_pem: String,
    status: watch::Sender<CertStatus>,
}

impl Loop {
    /// One round. Returns how long to wait before the next one.
    async fn round(&mut self) -> Result<Duration, String> {
        let now = SystemTime::now();
        let read = self.cfg.store.read().await.map_err(|e| format!("reading the Secret: {e}"))?;
        let (state, base) = match &read {
            Some((stored, secret)) => (stored.state.clone(), Some(secret)),
            None => (None, None),
        };
        let injected = self.cfg.configs.observed().await;
        let common = injected.as_ref().ok().and_then(|i| i.common().map(str::to_owned));
        let decision = plan(state.as_ref(), common.as_deref(), now, &self.cfg.policy).map_err(|e| e.to_string())?;

        let (state, recheck) = match decision.write {
            Some((next, reason)) => match self.cfg.store.write(&next, base).await {
                Ok(_) => {
                    tracing::info!(secret = self.cfg.store.name(), %reason, "certificates updated");
                    (next, Duration::ZERO)
                }
                Err(StoreError::Conflict) => {
                    tracing::debug!(secret = self.cfg.store.name(), "another replica wrote first; reading again");
                    return Ok(Duration::ZERO);
                }
                Err(e) => return Err(format!("writing the Secret: {e}")),
            },
            None => match state {
                Some(s) => (s, decision.recheck_in),
                None => return Err("the planner kept no state".into()),
            },
        };

        self.serve(&state)?;

        // Inject the trust bundle (no-op when already there), then see what clients trust.
        let injected = match self.cfg.configs.inject(&state.trust_bundle).await {
            Ok(true) => {
                tracing::info!(
                    mutating = %self.cfg.configs.mutating_name,
                    validating = %self.cfg.configs.validating_name,
                    "caBundle injected"
                );
                self.cfg.configs.observed().await
            }
            Ok(false) => injected,
            Err(e) => Err(e),
        };
        self.publish(injected.map_err(|e| format!("webhook configurations: {e}")));
        Ok(recheck)
    }

    /// Serve the stored serving certificate if it is not the one being served.
    fn serve(&mut self, state: &CertState) -> Result<(), String> {
        if state.serving.cert_pem == self.served_pem {
            return Ok(());
        }
        let key = certified_key_from_pem(&state.serving.cert_pem, &state.serving.key_pem).map_err(|e| e.to_string())?;
        match &self.resolver {
            Some(resolver) => {
                resolver.swap(key);
                tracing::info!("now serving the rotated certificate");
            }
            None => self.resolver = Some(LiveResolver::new(key)),
        }
        self.served_pem = state.serving.cert_pem.clone();
        Ok(())
    }

    fn publish(&self, injected: Result<crate::inject::Injected, String>) {
        let leaf = self.resolver.as_ref().and_then(|r| r.leaf_der());
        let not_after = leaf.as_ref().and_then(|l| validity(l).ok()).map(|v| v.not_after_time());
        let name = self.cfg.policy.dns_names.first().cloned().unwrap_or_default();
        let verdict = match (&leaf, injected) {
            (None, _) => Err("no certificate yet".to_owned()),
            (_, Err(e)) => Err(e),
            (Some(_), Ok(injected)) if injected.bundles.is_empty() => {
                Err("the webhook configurations have no webhooks".to_owned())
            }
            (Some(leaf), Ok(injected)) => injected
                .bundles
                .iter()
                .try_for_each(|b| verify_leaf(leaf, b, &name, SystemTime::now()))
                .map_err(|e| format!("injected caBundle does not trust the served certificate: {e}")),
        };
        let status = CertStatus {
            serving: leaf.is_some(),
            trusted: verdict.is_ok(),
            not_after,
            detail: verdict.err().unwrap_or_default(),
        };
        self.status.send_if_modified(|old| {
            if *old == status {
                return false;
            }
            if old.trusted != status.trusted {
                if status.trusted {
                    tracing::info!("the injected caBundle trusts the served certificate");
                } else {
                    tracing::warn!(reason = %status.detail, "served certificate not trusted by the injected caBundle");
                }
            }
            *old = status.clone();
            true
        });
    }
}

/// Forward every event of a watch on one named object to `notify`. The field selector on the
/// name lets RBAC that names the object allow the `list` and `watch`.
fn watch_named<K>(api: Api<K>, name: String, notify: Arc<Notify>, shutdown: CancellationToken)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let kind = K::kind(&());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = watcher(api, config).default_backoff().boxed();
        // The first error of a run is a warning (changes now wait for the periodic round); the
        // retries after it are not news.
        let mut failing = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                event = events.next() => match event {
                    // A (re)list is starting: nothing is known yet, and the list may still fail
                    // (retried each backoff step, it must not pass for a working watch).
                    Some(Ok(watcher::Event::Init)) => {}
                    Some(Ok(_)) => {
                        if std::mem::take(&mut failing) {
                            tracing::info!(%kind, %name, "watching again");
                        }
                        notify.notify_one();
                    }
                    Some(Err(e)) if !failing => {
                        failing = true;
                        tracing::warn!(%kind, %name, error = %e, "watch failed; retrying, and looking every minute meanwhile");
                    }
                    Some(Err(e)) => tracing::debug!(%kind, %name, error = %e, "watch error (retrying)"),
                    None => return,
                },
            }
        }
    });
}

/// Get a serving certificate (creating or adopting the shared Secret), then keep it rotated
/// until `shutdown`. Returns once a certificate is being served; errors before that are
/// retried until `shutdown`, which returns `None`.
pub async fn start(cfg: SelfManagedConfig, client: kube::Client, shutdown: CancellationToken) -> Option<SelfManaged> {
    let (status_tx, status_rx) = watch::channel(CertStatus::default());
    let mut lp = Loop { cfg, resolver: None, served_pem: String::new(), status: status_tx };
    let notify = Arc::new(Notify::new());
    let namespace = lp.cfg.store.api().namespace().unwrap_or_default().to_owned();
    watch_named(
        Api::<Secret>::namespaced(client, &namespace),
        lp.cfg.store.name().to_owned(),
        notify.clone(),
        shutdown.clone(),
    );
    let configs = &lp.cfg.configs;
    watch_named(configs.mutating_api(), configs.mutating_name.clone(), notify.clone(), shutdown.clone());
    watch_named(configs.validating_api(), configs.validating_name.clone(), notify.clone(), shutdown.clone());

    let mut wait = Duration::ZERO;
    loop {
        if lp.resolver.is_some() {
            break;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = match lp.round().await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "getting a serving certificate failed; retrying");
                RETRY
            }
        };
    }
    let resolver = lp.resolver.clone()?;
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = notify.notified() => {}
                _ = tokio::time::sleep(wait.min(MAX_IDLE)) => {}
            }
            wait = match lp.round().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "certificate round failed; retrying");
                    RETRY
                }
            };
        }
    });
    Some(SelfManaged { resolver, status: status_rx, task })
}
