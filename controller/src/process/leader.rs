//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's algorithm and
//! controller-runtime's defaults (lease 15 s, renew deadline 10 s, retry period 2 s).
//!
//! Why not kube-lease-manager: its standby sleeps until the lease it last saw expires, so after a
//! graceful release a standby takes over only up to a full lease duration later, and its holder
//! keeps reporting leadership while renewals fail. Here:
//! - a standby re-reads the Lease every retry period, so a released lease is taken within one;
//! - the holder renews every retry period and gives up leadership when no renewal succeeded for
//!   the renew deadline, which is shorter than the lease, so it stops before anyone can take over;
//! - writes use the Lease's resourceVersion (optimistic concurrency): two candidates can never
//!   both believe they won;
//! - expiry is judged by when *this* process saw the record change, not by comparing clocks.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Timing and identity of one candidate.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Name of the Lease every replica competes for (`--leader-election-id`).
    pub lease_name: String,
    /// Namespace of that Lease.
    pub namespace: String,
    /// This candidate's name, written as the Lease's `holderIdentity`; unique per process (see
    /// [`default_identity`]).
    pub identity: String,
    /// How long a lease stays valid after its last renewal: standbys take over only after the
    /// holder has not renewed for this long. Whole seconds (the Lease stores seconds).
    pub lease_duration: Duration,
    /// How long the holder keeps failing to renew before it gives leadership up; shorter than
    /// `lease_duration`, so it stops before a standby can take over.
    pub renew_deadline: Duration,
    /// How often the holder renews and standbys look at the Lease.
    pub retry_period: Duration,
}

/// Timings under which leader election would not be safe, named by their flags.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A leader could still think it leads after a standby has taken over.
    #[error("--lease-duration ({lease:?}) must be longer than --renew-deadline ({renew:?})")]
    LeaseNotLongerThanDeadline {
        /// `--lease-duration`.
        lease: Duration,
        /// `--renew-deadline`.
        renew: Duration,
    },
    /// A single failed renewal would cost the leadership.
    #[error("--renew-deadline ({renew:?}) must be longer than --retry-period ({retry:?})")]
    DeadlineNotLongerThanRetry {
        /// `--renew-deadline`.
        renew: Duration,
        /// `--retry-period`.
        retry: Duration,
    },
    /// Every candidate would send Lease requests this often: a needless load on the apiserver.
    #[error("--retry-period must be at least 100ms, got {0:?}")]
    RetryTooShort(Duration),
    /// `--lease-duration` is not a whole number of seconds, so the Lease would not hold it.
    #[error("--lease-duration must be whole seconds (the Lease stores seconds), got {0:?}")]
    FractionalLease(Duration),
}

impl LeaderConfig {
    /// The rules client-go enforces, so a bad combination fails at start-up, not in production.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanDeadline {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period {
            return Err(ConfigError::DeadlineNotLongerThanRetry {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        if self.retry_period < Duration::from_millis(100) {
            return Err(ConfigError::RetryTooShort(self.retry_period));
        }
        if self.lease_duration.subsec_nanos() != 0 {
            return Err(ConfigError::FractionalLease(self.lease_duration));
        }
        Ok(())
    }
}

/// What a candidate should do with the Lease it just read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it (never held, released, or expired): take it.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a live lease.
    Wait,
}

/// Decide from the Lease spec and how long ago this process saw that spec change.
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, unchanged_for: Duration) -> Decision {
    let holder = spec.and_then(|s| s.holder_identity.as_deref()).filter(|h| !h.is_empty());
    match holder {
        None => Decision::Acquire,
        Some(h) if h == identity => Decision::Renew,
        Some(_) => {
            let duration = spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0).max(0);
            if unchanged_for >= Duration::from_secs(u64::from(duration.unsigned_abs())) {
                Decision::Acquire
            } else {
                Decision::Wait
            }
        }
    }
}

/// How holding the lease ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldOutcome {
    /// `stop` was cancelled; the caller should release the lease.
    Stopped,
    /// No renewal succeeded within the renew deadline (or someone else took the lease).
    Lost,
}

/// One candidate for leadership.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    /// The last Lease spec seen and when this process first saw it.
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaderElector {
    /// A candidate for the Lease `config` names (the config is expected to pass
    /// [`LeaderConfig::validate`]). Nothing is read until [`LeaderElector::acquire`].
    pub fn new(client: Client, config: LeaderConfig) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        Self { api, config, observed: None }
    }

    /// This candidate's `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Try until this candidate holds the lease (`true`) or `stop` is cancelled (`false`).
    pub async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        info!(lease = %self.config.lease_name, namespace = %self.config.namespace, identity = %self.config.identity, "waiting for leadership");
        loop {
            match tokio::time::timeout(self.config.retry_period, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    info!(identity = %self.config.identity, "became leader");
                    return true;
                }
                Ok(Ok(false)) => {}
                // Visible: a missing namespace or RBAC rule would otherwise leave a silent standby.
                Ok(Err(e)) => {
                    warn!(error = %e, lease = %self.config.lease_name, namespace = %self.config.namespace, "cannot read or take the lease")
                }
                Err(_) => warn!(lease = %self.config.lease_name, "acquiring the lease timed out"),
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    /// Renew every retry period until `stop` is cancelled or renewal fails for the renew deadline.
    pub async fn hold(&mut self, stop: &CancellationToken) -> HoldOutcome {
        let mut last_renewed = Instant::now();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return HoldOutcome::Stopped,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            let left = self.config.renew_deadline.saturating_sub(last_renewed.elapsed());
            let attempt = tokio::time::timeout(left.min(self.config.retry_period), self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(true)) => last_renewed = Instant::now(),
                Ok(Ok(false)) => {
                    warn!(identity = %self.config.identity, "the lease was taken by another candidate");
                    return HoldOutcome::Lost;
                }
                Ok(Err(e)) => warn!(error = %e, "renewing the lease failed"),
                Err(_) => warn!("renewing the lease timed out"),
            }
            if last_renewed.elapsed() >= self.config.renew_deadline {
                warn!(identity = %self.config.identity, deadline = ?self.config.renew_deadline, "no renewal within the renew deadline: leadership lost");
                return HoldOutcome::Lost;
            }
        }
    }

    /// Give the lease up so a standby can take it at once (client-go's `ReleaseOnCancel`).
    pub async fn release(&mut self) {
        let result = async {
            let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else { return Ok(false) };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            self.api.replace(&self.config.lease_name, &PostParams::default(), &lease).await?;
            Ok::<_, kube::Error>(true)
        };
        match tokio::time::timeout(self.config.renew_deadline, result).await {
            Ok(Ok(true)) => info!(identity = %self.config.identity, "released the leader lease"),
            Ok(Ok(false)) => debug!("the lease was not ours to release"),
            Ok(Err(e)) => warn!(error = %e, "releasing the lease failed; a standby takes over when it expires"),
            Err(_) => warn!("releasing the lease timed out; a standby takes over when it expires"),
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`: `Ok(true)` if we hold the lease after it.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let duration = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.config.lease_name.clone()), ..ObjectMeta::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let seen_at = match &self.observed {
            Some((previous, at)) if *previous == spec => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((spec.clone(), at));
                at
            }
        };
        let decision = decide(Some(&spec), &self.config.identity, seen_at.elapsed());
        if decision == Decision::Wait {
            return Ok(false);
        }
        let renewing = decision == Decision::Renew;
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(duration),
            acquire_time: if renewing { spec.acquire_time.clone() } else { Some(now.clone()) },
            renew_time: Some(now),
            lease_transitions: Some(if renewing { transitions } else { transitions.saturating_add(1) }),
            ..spec
        });
        // `replace` sends the resourceVersion we read: if anyone wrote in between, we get a
        // conflict and stay (or become) a follower.
        match self.api.replace(&self.config.lease_name, &PostParams::default(), &lease).await {
            Ok(updated) => {
                if let Some(spec) = updated.spec {
                    self.observed = Some((spec, Instant::now()));
                }
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// A unique identity: the host (the pod name in a cluster) and a per-process suffix, so two
/// processes on one host are distinct candidates.
pub fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_owned()))
        .unwrap_or_else(|| "myownshell-controller".to_owned());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{host}_{}_{nanos:08x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: Some(duration),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        let secs = Duration::from_secs;
        let cases = [
            ("no lease spec", None, secs(0), Decision::Acquire),
            ("released (no holder)", Some(spec(None, 1)), secs(0), Decision::Acquire),
            ("released (empty holder)", Some(spec(Some(""), 1)), secs(0), Decision::Acquire),
            ("ours", Some(spec(Some("me"), 15)), secs(100), Decision::Renew),
            ("theirs, fresh", Some(spec(Some("other"), 15)), secs(3), Decision::Wait),
            (
                "theirs, just before expiry",
                Some(spec(Some("other"), 15)),
                Duration::from_millis(14_999),
                Decision::Wait,
            ),
            ("theirs, expired", Some(spec(Some("other"), 15)), secs(15), Decision::Acquire),
        ];
        for (case, spec, unchanged_for, want) in cases {
            assert_eq!(decide(spec.as_ref(), "me", unchanged_for), want, "{case}");
        }
    }

    #[test]
    fn config_rules() {
        let config = |lease: u64, renew: u64, retry: u64| LeaderConfig {
            lease_name: "l".into(),
            namespace: "ns".into(),
            identity: "me".into(),
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
        };
        assert_eq!(config(15_000, 10_000, 2_000).validate(), Ok(()));
        assert!(matches!(
            config(10_000, 10_000, 2_000).validate(),
            Err(ConfigError::LeaseNotLongerThanDeadline { .. })
        ));
        assert!(matches!(config(15_000, 2_000, 2_000).validate(), Err(ConfigError::DeadlineNotLongerThanRetry { .. })));
        assert!(matches!(config(15_000, 10_000, 50).validate(), Err(ConfigError::RetryTooShort(_))));
        assert!(matches!(config(15_500, 10_000, 2_000).validate(), Err(ConfigError::FractionalLease(_))));
    }

    #[test]
    fn identities_differ_per_process_start() {
        let id = default_identity();
        assert!(id.contains(&std::process::id().to_string()), "{id}");
    }
}
