//! Command-line flags, named as kubebuilder-generated managers name them.

use std::time::Duration;

use clap::Parser;
use myownshell_auth::metrics_args::MetricsService;
use myownshell_runtime::client::ClientArgs;
use myownshell_runtime::flags::{LogArgs, ProbeArgs};
use myownshell_runtime::time::parse_duration;

/// Reconciles `MyOwnShell` objects into Deployments.
#[derive(Debug, Clone, Parser)]
#[command(name = "myownshell-controller", version, about)]
pub struct Args {
    // A doc comment on a flattened field is not help text: clap takes each flag's own.
    /// `--metrics-bind-address` and the `--metrics-cert-*`, `--metrics-client-ca-file` and
    /// `--metrics-auth*` flags: where the metrics endpoint listens, how it gets its certificate
    /// and checks its callers (shared with the webhook).
    #[command(flatten)]
    pub metrics_auth: myownshell_auth::metrics_args::MetricsAuthArgs,

    /// Service in front of /metrics: its DNS names go into the self-signed metrics certificate.
    #[arg(long, default_value = "myownshell-controller-metrics-service")]
    pub metrics_service_name: String,

    /// `--health-probe-bind-address`, as every binary of the workspace has it.
    #[command(flatten)]
    pub probes: ProbeArgs,

    /// Elect a leader on a Lease, so only one replica reconciles at a time.
    #[arg(long)]
    pub leader_elect: bool,

    /// Name of the leader-election Lease.
    #[arg(long, default_value = "myownshell-controller.myownshell.io")]
    pub leader_election_id: String,

    /// Namespace of the leader-election Lease (default: $POD_NAMESPACE, else myownshell-system).
    #[arg(long)]
    pub leader_election_namespace: Option<String>,

    /// How long a lease is valid after its last renewal; standbys wait this long after a
    /// leader stops renewing.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,

    /// How long the leader keeps trying to renew before it gives up leadership.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,

    /// How often candidates try to acquire or renew the lease.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,

    /// Reconciles running at once (at most one per object). A reconcile mostly waits for the
    /// apiserver, so many cost little here: at 100 spec changes a second over shells whose pods
    /// churn, 16 left changes queued for 28 s (p99) and 64 for under 2 s, with the apiserver's
    /// CPU the limit; when a class's shells come due at one instant (100 stops a second), 64 left
    /// the last of each second's stops waiting for a worker (each began p99 958 ms after its
    /// deadline) and 128 began them within p99 226 ms (`cargo xtask bench controller`). Each
    /// reconcile waiting on the apiserver holds one HTTP/1.1 connection to it, kept open for reuse
    /// after it: after a burst, 128 cost about 4 MiB more of the controller's memory than 64.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub concurrency: u16,

    /// Watch one namespace only (default: all namespaces).
    #[arg(long)]
    pub namespace: Option<String>,

    /// Annotations put on every shell pod, `key=value` comma-separated (a service mesh, log
    /// shipping). Changing them changes the pod template as an upgrade does, and rolls out like one.
    #[arg(long, value_delimiter = ',', value_parser = parse_annotation)]
    pub pod_annotations: Vec<(String, String)>,

    /// The image holding `myownshell-session`, the session holder every shell pod runs as its
    /// container's pid 1 (durable terminals: a closed tab, a gateway restart or a dropped
    /// `kubectl exec` leaves the session running). Unset: the image of the controller's own pod
    /// (the operator's image has it), read at start; `none`: no holder (terminals end with their
    /// connection, as before).
    #[arg(long)]
    pub session_image: Option<String>,

    /// How long a terminal nobody is attached to lives on before it ends with its processes,
    /// unless its shell's class says (`spec.sessions.detachedTimeout`).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub session_detached_timeout: Duration,

    /// The most terminals one shell pod keeps.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_sessions_per_pod: u32,

    /// How a pod template that changed with the operator (an upgrade, `--pod-annotations`) reaches
    /// running shells: `when-quiet` waits until a shell has no pods, nobody has connected for
    /// `--template-update-quiet-after`, or its owner runs `kubectl myownshell update` (shells show
    /// `UpToDate=False` meanwhile); `immediate` restarts every shell's pods at once (a security
    /// fix). A user's own spec change always rolls out at once.
    #[arg(long, value_enum, default_value = "when-quiet")]
    pub template_updates: crate::life::rollout::Mode,

    /// With `--template-updates=when-quiet`: no new connection for this long is a quiet moment.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub template_update_quiet_after: Duration,

    /// How often the controller deletes the Deployments, ReplicaSets and pods labelled as a
    /// shell's whose MyOwnShell is gone (they would run with nobody to say whose they are). 0
    /// turns the sweep off.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub sweep_interval: Duration,

    /// Whether the controller keeps shells' NetworkPolicies (`managed`: in every namespace opened
    /// to shells, one that lets in only the gateway and lets out only DNS and public addresses),
    /// or leaves shells' network to the cluster's own policies (`off`; the policies it made stay
    /// until deleted).
    #[arg(long, value_enum, default_value = "managed")]
    pub network_isolation: NetworkIsolation,

    /// The namespace of the gateway's pods, the one source shells let in (default: the
    /// controller's own namespace, $POD_NAMESPACE, else myownshell-system).
    #[arg(long)]
    pub gateway_namespace: Option<String>,

    /// Address ranges shells may not reach besides the private, shared, link-local and
    /// unique-local ones, comma-separated (`203.0.113.0/24,2001:db8::/32`): a cluster's pod,
    /// Service or node addresses where they are public.
    #[arg(long, value_delimiter = ',')]
    pub shell_egress_except: Vec<crate::network::desired::Cidr>,

    /// Addresses shells may ask DNS (port 53, UDP and TCP) besides kube-system's
    /// `k8s-app: kube-dns` pods, comma-separated: a node-local DNS cache (`169.254.20.10/32`),
    /// which the link-local range would otherwise keep out of reach.
    #[arg(long, value_delimiter = ',')]
    pub shell_dns: Vec<crate::network::desired::Cidr>,

    /// Address ranges a class's `spec.network.egress` may open to its shells, comma-separated
    /// (`10.20.0.0/16`): a class range outside them opens nothing, and the controller logs it.
    /// None by default. The cloud metadata address is opened only when named exactly
    /// (`169.254.169.254/32`).
    #[arg(long, value_delimiter = ',')]
    pub class_egress_allowed: Vec<crate::network::desired::Cidr>,

    /// `--log-format` (text or JSON), shared by every binary.
    #[command(flatten)]
    pub log: LogArgs,

    /// `--kubeconfig`, shared by every binary.
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `--network-isolation`: who keeps shells' NetworkPolicies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NetworkIsolation {
    /// The controller, in every namespace opened to shells.
    Managed,
    /// Nobody: the cluster manages its own.
    Off,
}

/// `key=value`, the key a valid annotation name.
fn parse_annotation(text: &str) -> Result<(String, String), String> {
    let (key, value) = text.split_once('=').ok_or_else(|| format!("{text:?} is not key=value"))?;
    let name = key.rsplit('/').next().unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if valid { Ok((key.to_owned(), value.to_owned())) } else { Err(format!("{key:?} is not a valid annotation name")) }
}

impl Args {
    /// What the flags ask of every shell, the session holder from `session_image` (the flag's, or
    /// the controller's own: [`crate::process::own_image`]).
    pub fn settings(&self, session_image: Option<String>) -> crate::context::Settings {
        let session = session_image.map(|image| crate::holder::SessionSettings {
            image,
            detached_timeout: self.session_detached_timeout,
            max_sessions: self.max_sessions_per_pod,
        });
        crate::context::Settings {
            template: crate::deployment::TemplateSettings {
                pod_annotations: self.pod_annotations.iter().cloned().collect(),
                session,
            },
            rollout: crate::life::rollout::Policy {
                mode: self.template_updates,
                quiet_after: self.template_update_quiet_after,
            },
        }
    }

    /// What shells' NetworkPolicies are made of, or `None` with `--network-isolation=off`.
    pub fn network_settings(&self) -> Option<crate::network::desired::Settings> {
        (self.network_isolation == NetworkIsolation::Managed).then(|| crate::network::desired::Settings {
            gateway_namespace: self.gateway_namespace.clone().unwrap_or_else(myownshell_runtime::pod::namespace),
            egress_except: self.shell_egress_except.clone(),
            dns: self.shell_dns.clone(),
            class_egress_allowed: self.class_egress_allowed.clone(),
        })
    }

    /// The Service in front of `/metrics`, in the namespace the controller runs in: the
    /// self-signed metrics certificate is for its names.
    pub fn metrics_service(&self) -> MetricsService {
        MetricsService { name: self.metrics_service_name.clone(), namespace: myownshell_runtime::pod::namespace() }
    }

    /// The Lease namespace: the flag, else the namespace the pod runs in, else the default.
    pub fn lease_namespace(&self) -> String {
        self.leader_election_namespace.clone().unwrap_or_else(myownshell_runtime::pod::namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use myownshell_runtime::flags::BindAddress;

    #[test]
    fn defaults_follow_controller_runtime() {
        let args = Args::parse_from(["myownshell-controller"]);
        assert_eq!(args.lease_duration, Duration::from_secs(15));
        assert_eq!(args.renew_deadline, Duration::from_secs(10));
        assert_eq!(args.retry_period, Duration::from_secs(2));
        assert_eq!(args.probes.health_probe_bind_address, BindAddress::At("0.0.0.0:8081".parse().unwrap()));
        assert_eq!(args.metrics_auth.metrics_bind_address, BindAddress::At("0.0.0.0:8443".parse().unwrap()));
        assert!(!args.leader_elect);
        assert_eq!(args.log.log_format, myownshell_runtime::log::LogFormat::Text);
        assert_eq!(args.namespace, None);
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let err = Args::try_parse_from(["c", "--lease-duration", "soon"]).unwrap_err().to_string();
        assert!(err.contains("--lease-duration") && err.contains("invalid duration"), "{err}");
        let err = Args::try_parse_from(["c", "--concurrency", "0"]).unwrap_err().to_string();
        assert!(err.contains("--concurrency"), "{err}");
        let err = Args::try_parse_from(["c", "--shell-egress-except", "10.0.0.1/8"]).unwrap_err().to_string();
        assert!(err.contains("--shell-egress-except") && err.contains("past the prefix"), "{err}");
    }

    #[test]
    fn network_isolation_is_on_unless_turned_off() {
        let args = Args::parse_from(["c", "--gateway-namespace", "ops", "--shell-egress-except", "203.0.113.0/24"]);
        let settings = args.network_settings().unwrap();
        assert_eq!(settings.gateway_namespace, "ops");
        assert_eq!(settings.egress_except.iter().map(ToString::to_string).collect::<Vec<_>>(), ["203.0.113.0/24"]);
        assert_eq!(Args::parse_from(["c", "--network-isolation", "off"]).network_settings(), None);
    }
}
