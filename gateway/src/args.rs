//! The gateway's flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use myownshell_runtime::client::ClientArgs;
use myownshell_runtime::flags::{LogArgs, ProbeArgs};
use myownshell_runtime::time::parse_duration;

/// `myownshell-gateway`: shells in the browser, opened as the user who signed in.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "myownshell-gateway", version)]
pub struct Args {
    /// Address of the page, its API and its terminals (HTTPS).
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub bind_address: SocketAddr,
    /// The serving certificate (PEM); with --tls-private-key-file. Reloaded when it changes.
    /// Without both, a self-signed certificate for localhost and --tls-self-signed-names.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Extra DNS names of the self-signed certificate (e.g. the Service's).
    #[arg(long, value_delimiter = ',')]
    pub tls_self_signed_names: Vec<String>,
    /// Origins the page may be served from (e.g. https://shells.example.com), when it is
    /// reached through a name other than the one each request is addressed to. Default: the
    /// request's own `https://HOST`.
    #[arg(long, value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// The `node_modules` directory holding xterm.js and its fit add-on, as `npm ci` in
    /// gateway/web installs them.
    #[arg(long, default_value = "/usr/share/myownshell-gateway/node_modules")]
    pub assets_dir: PathBuf,
    /// The CA of an authenticating proxy's client certificate: with it, a request on a
    /// connection whose certificate it signed is the user the proxy names in
    /// --requestheader-username-headers (kube-apiserver's request-header authentication).
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Common names the proxy's certificate may have (empty: any the CA signed).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the proxy's user, the first present wins.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    pub requestheader_username_headers: Vec<String>,
    /// Headers naming the user's groups.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers naming the user's extras (`<prefix><key>`).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// How users are impersonated: `legacy` (the `impersonate` verb; any cluster) or
    /// `constrained` (Kubernetes' constrained impersonation, alpha in 1.35: the
    /// `ConstrainedImpersonation` feature gate; grant config/gateway/constrained-impersonation's
    /// ClusterRole instead). ServiceAccounts are then named by user name only.
    #[arg(long, value_enum, default_value_t = crate::exec::impersonate::Mode::Legacy)]
    pub impersonation: crate::exec::impersonate::Mode,
    /// Audiences a sign-in token must be valid for (default: the apiserver's own).
    #[arg(long, value_delimiter = ',')]
    pub auth_token_audiences: Vec<String>,
    /// How long a browser stays signed in (never past its token's expiry).
    #[arg(long, default_value = "8h", value_parser = parse_duration)]
    pub session_max_age: Duration,
    /// The Secret (in the gateway's namespace) holding the key browser sessions are sealed
    /// with, shared by every replica so that a page stays signed in when its replica goes; made
    /// with a random key by the first replica that finds none. Unreadable: a key of this
    /// replica's own (sessions then end with it).
    #[arg(long, default_value = "myownshell-gateway-session-key")]
    pub session_key_secret: String,
    /// The ConfigMap, in the gateway's namespace, where every replica records the sessions
    /// signed out on it and from which every replica learns them, so that a signed-out session's
    /// cookie opens nothing on any replica. Used when the session key is shared.
    #[arg(long, default_value = "myownshell-gateway-signed-out")]
    pub signed_out_config_map: String,
    /// How long an accepted token is trusted without asking TokenReview again.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub auth_cache_ttl: Duration,
    /// The most signed-in browsers at once.
    #[arg(long, default_value_t = 10_000)]
    pub max_sessions: usize,
    /// The most signed-in browsers one user may have at once: signing in once more ends their
    /// oldest session (so one token cannot fill --max-sessions).
    #[arg(long, default_value_t = 10)]
    pub max_sessions_per_user: usize,
    /// How long a terminal whose page went away keeps running for the page to come back.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub reattach_grace: Duration,
    /// Bytes of a terminal's recent output kept to draw again on reattach.
    #[arg(long, default_value_t = 64 * 1024)]
    pub scrollback_bytes: usize,
    /// The most terminals open at once.
    #[arg(long, default_value_t = 2000)]
    pub max_terminals: usize,
    /// The most terminals one user may have open at once.
    #[arg(long, default_value_t = 16)]
    pub max_terminals_per_user: usize,
    /// What a terminal runs in the shell's pod.
    #[arg(long, num_args = 1.., default_values = ["sh"])]
    pub command: Vec<String>,
    /// How long a new terminal waits for a ready pod of its shell.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// The largest message a page may send (pastes are split by the page below it).
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_message_bytes: usize,
    /// How often the shells with open terminals are looked at: a terminal in use since the last
    /// look is recorded as the shell's `status.lastConnection` (kind `gateway`), and a coming
    /// stop is shown in its terminals.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub activity_interval: Duration,
    /// Where gateway sessions are recorded (a folder; recording is off without it): those of
    /// shells with `spec.recordSessions`, or all with --record-all-sessions.
    #[arg(long)]
    pub recordings_dir: Option<PathBuf>,
    /// Record every gateway session, whatever the shells ask.
    #[arg(long, requires = "recordings_dir")]
    pub record_all_sessions: bool,
    /// The most one recording holds. A recorded session never goes on unrecorded: when its
    /// recording is full (or any quota below is reached, or the disk fails) the recording says so
    /// and the terminal ends, saying why.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    pub recording_max_bytes: u64,
    /// The most one shell's recordings hold in all: beyond it, its recorded sessions end and new
    /// ones are refused until the retention sweep frees room.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    pub recordings_max_shell_bytes: u64,
    /// The most all recordings hold in all (keep it below the volume's size): beyond it, every
    /// recorded session ends and new ones are refused until the retention sweep frees room.
    #[arg(long, default_value_t = 8 * 1024 * 1024 * 1024)]
    pub recordings_max_total_bytes: u64,
    /// How long recordings are kept.
    #[arg(long, default_value = "720h", value_parser = parse_duration)]
    pub recording_retention: Duration,
    /// The groups whose members may connect to every shell (break-glass, recorded under their own
    /// name): keep them in step with the webhook's --admin-groups. An open terminal whose user
    /// no longer may connect is closed within --activity-interval.
    #[arg(long, value_delimiter = ',', default_value = "system:masters")]
    pub admin_groups: Vec<String>,
    /// How often an idle page is pinged; one silent for three pings is treated as gone.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub ping_interval: Duration,
    /// After SIGTERM the gateway (already not ready) goes on serving, new pages included, until
    /// this pod's address has left the ready endpoints of --service-name, then this long more
    /// while kube-proxy on every node catches up; only then are its pages told to reattach
    /// (through another replica: a page told sooner could reach this one again). Without
    /// --pod-ip, this long after SIGTERM.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub shutdown_delay: Duration,
    /// How many of a stopping gateway's held terminals move to another replica at once: each
    /// page opens its session through another replica before this one lets it go, and the next
    /// page's turn comes when it has. A few at a time keep the node from starting an exec for
    /// every page in the same moment.
    #[arg(long, default_value_t = 8)]
    pub handover_concurrency: usize,
    /// How long a stopping gateway paces the move of its held terminals, from the moment it
    /// stops serving: the pages still waiting then are all told to reattach at once. With
    /// --shutdown-delay and --shutdown-max-wait it must stay below the pod's
    /// terminationGracePeriodSeconds, with 10 s left for the last pages to move.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub handover_within: Duration,
    /// The longest the gateway waits for its address to leave the Service's endpoints after
    /// SIGTERM. --shutdown-delay plus this must stay below the pod's
    /// terminationGracePeriodSeconds, with time left to tell every page.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub shutdown_max_wait: Duration,
    /// The gateway's Service, whose endpoints a stopping gateway follows (in its own namespace).
    #[arg(long, default_value = "myownshell-gateway")]
    pub service_name: String,
    /// This pod's address (the downward API's status.podIP), to follow it in the Service's
    /// EndpointSlices on shutdown. Unset (not running as a pod): only --shutdown-delay.
    #[arg(long, env = "POD_IP")]
    pub pod_ip: Option<std::net::IpAddr>,
    // A doc comment on a flattened field is not help text: clap takes each flag's own.
    /// `--oidc-*`.
    #[command(flatten)]
    pub oidc: crate::signin::oidc_args::OidcArgs,
    /// `--health-probe-bind-address`.
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// `--kubeconfig`.
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--log-format`.
    #[command(flatten)]
    pub log: LogArgs,
}

impl Args {
    /// The authenticating proxy, when --client-ca-file is given.
    pub fn front_proxy(&self) -> Option<myownshell_auth::request_header::FrontProxy> {
        self.client_ca_file.as_ref().map(|_| myownshell_auth::request_header::FrontProxy {
            allowed_names: self.requestheader_allowed_names.clone(),
            user_headers: self.requestheader_username_headers.clone(),
            group_headers: self.requestheader_group_headers.clone(),
            extra_prefixes: self.requestheader_extra_headers_prefix.clone(),
        })
    }
}
