//! Command-line flags (kubebuilder-style names; defaults match `config/default`).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use myownshell_auth::metrics_args::MetricsService;
use myownshell_runtime::client::ClientArgs;
use myownshell_runtime::flags::{LogArgs, ProbeArgs};
use myownshell_runtime::time::parse_duration;

/// An extra subject alternative name: an IP address or a DNS name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum San {
    /// An IP address.
    Ip(IpAddr),
    /// A DNS name.
    Dns(String),
}

/// Parse `--extra-san`: an IP address, else a DNS name.
pub fn parse_san(s: &str) -> Result<San, String> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(San::Ip(ip));
    }
    if myownshell_certs::pki::is_dns_name(s) {
        Ok(San::Dns(s.to_owned()))
    } else {
        Err(format!("{s:?} is neither an IP address nor a DNS name"))
    }
}

/// MyOwnShell admission webhook: validates and defaults `MyOwnShell` objects over TLS that it
/// generates, injects and rotates itself (or loads from `--cert-dir`).
#[derive(Debug, Clone, Parser)]
#[command(name = "myownshell-webhook", version)]
pub struct Args {
    /// Port of the HTTPS admission endpoint.
    #[arg(long, default_value_t = 9443)]
    pub webhook_port: u16,
    /// Address the admission endpoint listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// `--health-probe-bind-address`, as every binary of the workspace has it.
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// Where `/metrics` listens, who may read it, and the certificate it is served with.
    #[command(flatten)]
    pub metrics_auth: myownshell_auth::metrics_args::MetricsAuthArgs,
    /// Service in front of `/metrics`: its DNS names go into the self-signed metrics certificate.
    #[arg(long, default_value = "myownshell-webhook-metrics-service")]
    pub metrics_service_name: String,

    /// Load `tls.crt`/`tls.key` from this directory (cert-manager) and reload them on change,
    /// instead of managing certificates; nothing is injected then.
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,
    /// MutatingWebhookConfiguration to inject the CA bundle into.
    #[arg(long, default_value = "myownshell-mutating-webhook-configuration")]
    pub mutating_webhook_configuration: String,
    /// ValidatingWebhookConfiguration to inject the CA bundle into.
    #[arg(long, default_value = "myownshell-validating-webhook-configuration")]
    pub validating_webhook_configuration: String,
    /// Service in front of the webhook: the certificate is for `<service>.<namespace>.svc`.
    #[arg(long, default_value = "myownshell-webhook-service")]
    pub service_name: String,
    /// Namespace of the Service and the certificate Secret.
    #[arg(long, env = "POD_NAMESPACE", default_value = "myownshell-system")]
    pub namespace: String,
    /// Secret holding the CA and serving certificate, shared by all replicas.
    #[arg(long, default_value = "myownshell-webhook-server-cert")]
    pub secret_name: String,
    /// Lifetime of serving certificates.
    #[arg(long, default_value = "30d", value_parser = parse_duration)]
    pub cert_validity: Duration,
    /// Renew the serving certificate this long before expiry (the CA twice as long before).
    #[arg(long, default_value = "10d", value_parser = parse_duration)]
    pub renew_before: Duration,
    /// Lifetime of the CA.
    #[arg(long, default_value = "365d", value_parser = parse_duration)]
    pub ca_validity: Duration,
    /// Extra DNS name or IP address for the serving certificate (repeatable).
    #[arg(long = "extra-san", value_parser = parse_san)]
    pub extra_sans: Vec<San>,

    /// Largest `spec.size` admitted.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i32).range(0..=i64::from(myownshell_api::SIZE_SCHEMA_MAX)))]
    pub max_size: i32,
    /// The size of a shell's home (`spec.home.size`) when its spec gives none.
    #[arg(long, default_value = myownshell_api::defaults::HOME_SIZE, value_parser = parse_home_size)]
    pub home_default_size: String,
    /// The largest `spec.home.size` admitted.
    #[arg(long, default_value = "10Gi", value_parser = parse_home_size)]
    pub home_max_size: String,
    /// Registries (or repository prefixes) images must come from, comma-separated; any if unset.
    #[arg(long, value_delimiter = ',')]
    pub allowed_registries: Vec<String>,
    /// Groups whose members may change any shell's spec (its owner always may), comma-separated.
    /// Nobody changes `spec.owner`, and nobody connects to a shell without being its owner or
    /// in its `sharedWith`.
    #[arg(long, value_delimiter = ',', default_value = "system:masters")]
    pub admin_groups: Vec<String>,
    /// The longest `spec.lifetime.maxRunTime` a shell may ask for; a shell that sets none gets
    /// this one. Unset: shells run as long as their spec says.
    #[arg(long, value_parser = parse_duration)]
    pub max_run_time: Option<Duration>,
    /// The `spec.lifetime.idleTimeout` of a shell that sets none (it may set a longer or a shorter
    /// one). Unset: such shells never stop for being idle.
    #[arg(long, value_parser = parse_duration)]
    pub default_idle_timeout: Option<Duration>,
    /// Connections into shells are recorded (an Event, `status.lastConnection`) at most once per
    /// shell, user and kind in this long; more within it are counted into one Event.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub connection_record_interval: Duration,
    /// How long a user's permission to use a shell class (RBAC's `use`) is trusted without asking
    /// again: a revoked grant can still start shells of the class this long.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub class_use_allow_cache_ttl: Duration,
    /// How long a refused `use` of a shell class is remembered: a new grant takes this long at
    /// most to count.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub class_use_deny_cache_ttl: Duration,

    /// The CA that signs the client certificate the apiserver presents to admission webhooks (the
    /// kubeconfig of its AdmissionConfiguration, see the README). Set: every webhook path answers,
    /// and the connect webhook records, only requests that present a certificate it signed; others
    /// get 403 before their body is read and leave no record. Unset: whoever reaches the webhook
    /// port may ask, and be recorded (close the port to all but the apiserver with a NetworkPolicy
    /// where the network allows). Read at start.
    #[arg(long)]
    pub apiserver_client_ca_file: Option<std::path::PathBuf>,

    /// After SIGTERM the webhook (already not ready) goes on answering reviews until this pod's
    /// address has left the ready endpoints of `--service-name`, then this long more while every
    /// apiserver catches up: no review fails during a rolling update. Without `--pod-ip`, this
    /// long after SIGTERM.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub shutdown_delay: Duration,
    /// The longest the webhook waits for its address to leave the Service's endpoints after
    /// SIGTERM. `--shutdown-delay` plus this must stay below the pod's
    /// terminationGracePeriodSeconds, with time left to finish the reviews in flight.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub shutdown_max_wait: Duration,
    /// This pod's address (the downward API's `status.podIP`), to follow it in the Service's
    /// EndpointSlices on shutdown. Unset (not running as a pod): only `--shutdown-delay`.
    #[arg(long, env = "POD_IP")]
    pub pod_ip: Option<IpAddr>,

    /// `--log-format`.
    #[command(flatten)]
    pub log: LogArgs,

    /// `--kubeconfig`, shared by every binary.
    #[command(flatten)]
    pub client: ClientArgs,
}

impl Args {
    /// The serving certificate's DNS names: the Service's, then the extra ones.
    pub fn dns_names(&self) -> Vec<String> {
        let base = format!("{}.{}.svc", self.service_name, self.namespace);
        let mut names = vec![base.clone(), format!("{base}.cluster.local")];
        names.extend(self.extra_sans.iter().filter_map(|s| match s {
            San::Dns(d) => Some(d.clone()),
            San::Ip(_) => None,
        }));
        names
    }

    /// The Service in front of `/metrics`, in `--namespace`: the self-signed metrics
    /// certificate is for its names.
    pub fn metrics_service(&self) -> MetricsService {
        MetricsService { name: self.metrics_service_name.clone(), namespace: self.namespace.clone() }
    }

    /// The serving certificate's extra IP addresses.
    pub fn ip_addresses(&self) -> Vec<IpAddr> {
        self.extra_sans
            .iter()
            .filter_map(|s| match s {
                San::Ip(ip) => Some(*ip),
                San::Dns(_) => None,
            })
            .collect()
    }

    /// `--allowed-registries`, trimmed, without empty entries.
    pub fn allowed_registries(&self) -> Vec<String> {
        self.allowed_registries.iter().map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).collect()
    }

    /// The admission policy of the flags.
    pub fn policy(&self) -> crate::admission::Policy {
        let admin_groups = self.admin_groups.iter().map(|g| g.trim().to_owned()).filter(|g| !g.is_empty()).collect();
        crate::admission::Policy {
            max_size: self.max_size,
            allowed_registries: self.allowed_registries(),
            admin_groups,
            max_run_time: self.max_run_time,
            default_idle_timeout: self.default_idle_timeout,
            home_default_size: self.home_default_size.clone(),
            home_max_size: self.home_max_size.clone(),
        }
    }
}

/// A home size flag: a positive quantity, kept as the apiserver writes it.
fn parse_home_size(text: &str) -> Result<String, String> {
    match myownshell_api::quantity::parse(text) {
        Ok(q) if q.millis() > 0 => Ok(myownshell_api::quantity::canonical(text).into_owned()),
        Ok(_) => Err(format!("must be more than 0, got {text:?}")),
        Err(why) => Err(format!("must be a quantity such as 1Gi ({why}), got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use myownshell_runtime::flags::BindAddress;

    #[test]
    fn defaults_match_config_default() {
        let args = Args::try_parse_from(["myownshell-webhook", "--namespace", "myownshell-system"]).unwrap();
        assert_eq!(args.webhook_port, 9443);
        assert_eq!(args.probes.health_probe_bind_address, BindAddress::At("0.0.0.0:8081".parse().unwrap()));
        assert_eq!(args.metrics_auth.metrics_bind_address, BindAddress::At("0.0.0.0:8443".parse().unwrap()));
        assert_eq!(args.mutating_webhook_configuration, "myownshell-mutating-webhook-configuration");
        assert_eq!(args.validating_webhook_configuration, "myownshell-validating-webhook-configuration");
        assert_eq!(args.secret_name, "myownshell-webhook-server-cert");
        assert_eq!(args.max_size, 50);
        assert_eq!(args.policy().admin_groups, ["system:masters"]);
        assert_eq!(args.connection_record_interval, Duration::from_secs(5));
        assert_eq!(
            args.dns_names(),
            [
                "myownshell-webhook-service.myownshell-system.svc",
                "myownshell-webhook-service.myownshell-system.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn flags_parse() {
        let args = Args::try_parse_from([
            "x",
            "--extra-san",
            "127.0.0.1",
            "--extra-san",
            "webhook.local",
            "--allowed-registries",
            "docker.io, ghcr.io/org",
            "--cert-validity",
            "1h30m",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            ":9090",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(args.ip_addresses(), vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
        assert!(args.dns_names().contains(&"webhook.local".to_owned()));
        assert_eq!(args.allowed_registries(), ["docker.io", "ghcr.io/org"]);
        assert_eq!(args.cert_validity, Duration::from_secs(5400));
        assert_eq!(args.metrics_auth.metrics_bind_address, BindAddress::Disabled);
        assert_eq!(args.probes.health_probe_bind_address, BindAddress::At("0.0.0.0:9090".parse().unwrap()));
        assert_eq!(args.log.log_format, myownshell_runtime::log::LogFormat::Json);
        assert!(Args::try_parse_from(["x", "--extra-san", "not a name"]).is_err());
        assert!(Args::try_parse_from(["x", "--max-size", "5000"]).is_err());
    }
}
