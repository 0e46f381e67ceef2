//! The standalone proxy's flags (named and meant as kube-rbac-proxy's), checked into a [`Plan`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use http::HeaderName;

use crate::proxy::{UpstreamError, UpstreamUrl};
use myownshell_auth::authn::AuthnCacheOptions;
use myownshell_auth::authz::AuthzCacheOptions;
use myownshell_auth::config::{ConfigError, ProxyConfig};
use myownshell_auth::layer::{AuthOptions, IdentityHeaders};
use myownshell_auth::paths::{PathPatternError, PathPatterns};
use myownshell_auth::secure_server::SecureServingOptions;
use myownshell_auth::transport::TlsFiles;
use myownshell_runtime::client::ClientArgs;
use myownshell_runtime::flags::{BindAddress, LogArgs, ProbeArgs};
use myownshell_runtime::guard::GuardConfig;
use myownshell_runtime::server::ServeOptions;
use myownshell_runtime::time::parse_duration;

/// Command-line flags (named and meant as kube-rbac-proxy's).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "myownshell-rbac-proxy",
    version,
    about = "Authenticating, authorizing TLS proxy (kube-rbac-proxy style)"
)]
pub struct Args {
    /// Address the TLS endpoint listens on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub secure_listen_address: SocketAddr,
    /// The HTTP upstream requests are forwarded to, e.g. http://127.0.0.1:8080/.
    #[arg(long)]
    pub upstream: String,
    /// Comma-separated paths that may be proxied (exact, or a prefix ending in `*`); others get 404.
    #[arg(long, value_delimiter = ',')]
    pub allow_paths: Vec<String>,
    /// Comma-separated paths proxied without authentication or authorization.
    #[arg(long, value_delimiter = ',')]
    pub ignore_paths: Vec<String>,
    /// kube-rbac-proxy style configuration (resource attributes, static authorization).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Serving certificate (PEM); reloaded when it changes. Self-signed when not given.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA bundle for client certificates (user = CN, groups = O); checked before any token.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Comma-separated audiences a token must be valid for (default: the apiserver's).
    #[arg(long, value_delimiter = ',')]
    pub auth_token_audiences: Vec<String>,
    /// Forward the authenticated user and groups to the upstream in headers.
    #[arg(long)]
    pub auth_header_fields_enabled: bool,
    /// Header that carries the user name (with --auth-header-fields-enabled).
    #[arg(long, default_value = "x-remote-user")]
    pub auth_header_user_field_name: String,
    /// Header that carries the user's groups (with --auth-header-fields-enabled).
    #[arg(long, default_value = "x-remote-groups")]
    pub auth_header_groups_field_name: String,
    /// Separator between the groups in --auth-header-groups-field-name.
    #[arg(long, default_value = "|")]
    pub auth_header_groups_field_separator: String,
    // A doc comment on a flattened field is not help text: clap takes each flag's own.
    /// `--health-probe-bind-address`, as every binary of the workspace has it.
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// `--kubeconfig` (for TokenReview and SubjectAccessReview), as every binary of the
    /// workspace has it.
    #[command(flatten)]
    pub client: ClientArgs,
    /// How long an accepted token is cached (never past its expiry).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub auth_cache_ttl: Duration,
    /// How long an allow decision is cached.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub authz_allow_cache_ttl: Duration,
    /// How long a deny decision is cached.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub authz_deny_cache_ttl: Duration,
    /// How often the certificate files are checked for changes.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub tls_reload_interval: Duration,
    /// How long a client may take to send a whole request, head and body, and a new connection
    /// to start its first: slower ones are cut, so trickling or silent clients cannot hold every
    /// connection. Raise it for large, slow uploads.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub request_read_timeout: Duration,
    // A doc comment on a flattened field is not help text: clap takes each flag's own.
    /// `--log-format`, as every binary of the workspace has it.
    #[command(flatten)]
    pub log: LogArgs,
    /// Runtime threads. One (the default) avoids a cross-thread wake-up at each hop of a
    /// request, which is most of a sidecar's cost; raise it for a proxy that must use many cores.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
}

/// A flag that cannot be used; the message names it.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    /// Both were given; as with kube-rbac-proxy, one list decides.
    #[error("--allow-paths and --ignore-paths cannot be used together")]
    AllowAndIgnore,
    /// An `--allow-paths` pattern is invalid.
    #[error("--allow-paths: {0}")]
    AllowPaths(PathPatternError),
    /// An `--ignore-paths` pattern is invalid.
    #[error("--ignore-paths: {0}")]
    IgnorePaths(PathPatternError),
    /// An `--auth-header-*-field-name` is not a valid HTTP header name.
    #[error("--auth-header-{field}-field-name {value:?}: not a valid header name")]
    HeaderName {
        /// `user` or `groups`: which flag.
        field: &'static str,
        /// The name given.
        value: String,
    },
    /// `--upstream` is unusable.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// `--config-file` could not be read or is invalid.
    #[error("--config-file: {0}")]
    Config(#[from] ConfigError),
}

/// Flags checked and turned into the parts the proxy is made of.
#[derive(Debug)]
pub struct Plan {
    /// Where authorized requests are forwarded.
    pub upstream: UpstreamUrl,
    /// Where `/healthz` and `/readyz` are served; none when disabled.
    pub health: Option<SocketAddr>,
    /// TLS and the auth layer of the secure endpoint.
    pub serving: SecureServingOptions,
}

fn header_name(field: &'static str, value: &str) -> Result<HeaderName, FlagError> {
    HeaderName::from_bytes(value.as_bytes()).map_err(|_| FlagError::HeaderName { field, value: value.to_owned() })
}

impl Args {
    /// Validate the flags (no I/O except reading `--config-file`).
    pub fn plan(&self) -> Result<Plan, FlagError> {
        let allow_paths = PathPatterns::parse_list(&self.allow_paths).map_err(FlagError::AllowPaths)?;
        let ignore_paths = PathPatterns::parse_list(&self.ignore_paths).map_err(FlagError::IgnorePaths)?;
        if !allow_paths.is_empty() && !ignore_paths.is_empty() {
            return Err(FlagError::AllowAndIgnore);
        }
        let identity_headers = self
            .auth_header_fields_enabled
            .then(|| -> Result<_, FlagError> {
                Ok(IdentityHeaders {
                    user: header_name("user", &self.auth_header_user_field_name)?,
                    groups: header_name("groups", &self.auth_header_groups_field_name)?,
                    groups_separator: self.auth_header_groups_field_separator.clone(),
                })
            })
            .transpose()?;
        let health = match self.probes.health_probe_bind_address {
            BindAddress::Disabled => None,
            BindAddress::At(addr) => Some(addr),
        };
        let config = self.config_file.as_deref().map(ProxyConfig::load).transpose()?.unwrap_or_default();
        let auth = AuthOptions {
            token_audiences: self.auth_token_audiences.iter().filter(|a| !a.is_empty()).cloned().collect(),
            authn_cache: AuthnCacheOptions { ttl: self.auth_cache_ttl, ..AuthnCacheOptions::default() },
            authz_cache: AuthzCacheOptions {
                allow_ttl: self.authz_allow_cache_ttl,
                deny_ttl: self.authz_deny_cache_ttl,
                ..AuthzCacheOptions::default()
            },
            authorization: config.authorization,
            allow_paths,
            ignore_paths,
            identity_headers,
        };
        let serving = SecureServingOptions {
            tls: TlsFiles {
                cert_file: self.tls_cert_file.clone(),
                key_file: self.tls_private_key_file.clone(),
                client_ca_file: self.client_ca_file.clone(),
            },
            self_signed_names: Vec::new(),
            cert_reload_interval: self.tls_reload_interval,
            serve: ServeOptions {
                guard: GuardConfig { request: self.request_read_timeout, ..GuardConfig::default() },
                ..ServeOptions::default()
            },
            auth,
        };
        Ok(Plan { upstream: UpstreamUrl::parse(&self.upstream)?, health, serving })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &[&str]) -> Result<Plan, String> {
        let mut argv = vec!["myownshell-rbac-proxy", "--upstream=http://127.0.0.1:8080/"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).map_err(|e| e.to_string())?.plan().map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_match_kube_rbac_proxy() {
        let plan = plan(&[]).unwrap();
        assert_eq!(plan.health, Some("0.0.0.0:8081".parse().unwrap()));
        let auth = &plan.serving.auth;
        assert!(auth.token_audiences.is_empty() && auth.identity_headers.is_none());
        assert!(auth.allow_paths.is_empty() && auth.ignore_paths.is_empty());
        assert_eq!(auth.authz_cache.allow_ttl, Duration::from_secs(300));
        assert_eq!(auth.authz_cache.deny_ttl, Duration::from_secs(30));
        assert!(plan.serving.tls.cert_file.is_none() && plan.serving.tls.client_ca_file.is_none());
        assert_eq!(plan.serving.serve.guard.request, Duration::from_secs(10), "the runtime's request deadline");
    }

    #[test]
    fn flags_reach_the_options() {
        let plan = plan(&[
            "--auth-token-audiences=a,b",
            "--client-ca-file=/ca.pem",
            "--tls-cert-file=/tls.crt",
            "--tls-private-key-file=/tls.key",
            "--auth-header-fields-enabled",
            "--auth-header-user-field-name=x-user",
            "--ignore-paths=/healthz,/debug/*",
            "--health-probe-bind-address=0",
            "--authz-allow-cache-ttl=1m",
            "--request-read-timeout=2m",
        ])
        .unwrap();
        let auth = &plan.serving.auth;
        assert_eq!(auth.token_audiences, vec!["a", "b"]);
        assert_eq!(plan.serving.tls.client_ca_file.as_deref(), Some(std::path::Path::new("/ca.pem")));
        assert_eq!(plan.serving.tls.key_file.as_deref(), Some(std::path::Path::new("/tls.key")));
        let headers = auth.identity_headers.as_ref().unwrap();
        assert_eq!((headers.user.as_str(), headers.groups.as_str()), ("x-user", "x-remote-groups"));
        assert!(auth.ignore_paths.matches("/debug/pprof") && !auth.ignore_paths.matches("/metrics"));
        assert_eq!(plan.health, None);
        assert_eq!(auth.authz_cache.allow_ttl, Duration::from_secs(60));
        assert_eq!(plan.serving.serve.guard.request, Duration::from_secs(120));
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let cases: [(&[&str], &str); 6] = [
            (&["--allow-paths=/a", "--ignore-paths=/b"], "cannot be used together"),
            (&["--ignore-paths=x"], "--ignore-paths: path pattern \"x\""),
            (&["--auth-header-fields-enabled", "--auth-header-groups-field-name=bad name"], "--auth-header-groups"),
            (&["--health-probe-bind-address=localhost"], "--health-probe-bind-address"),
            (&["--config-file=/nonexistent/config.yaml"], "/nonexistent/config.yaml"),
            (&["--tls-private-key-file=/k"], "--tls-cert-file"),
        ];
        for (args, want) in cases {
            let err = plan(args).err().unwrap_or_default();
            assert!(err.contains(want), "{args:?}: {err}");
        }
        let err = Args::try_parse_from(["p", "--upstream=ftp://x/"]).unwrap().plan().err().unwrap().to_string();
        assert!(err.contains("only http://"), "{err}");
    }
}
