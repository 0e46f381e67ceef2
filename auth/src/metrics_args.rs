//! Flags for a binary's secure metrics endpoint, to `#[command(flatten)]` into its clap `Args`,
//! so the controller and the webhook offer the same ones (kubebuilder's `--metrics-cert-*`
//! names, plus the cache lifetimes), and the one way both start that endpoint
//! ([`MetricsAuthArgs::serve`]).

use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use kube::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::authn::AuthnCacheOptions;
use crate::authz::AuthzCacheOptions;
use crate::layer::AuthOptions;
use crate::secure_server::{SecureServer, SecureServingOptions, ServeError};
use crate::transport::TlsFiles;
use myownshell_runtime::flags::{BindAddress, parse_bind_address};
use myownshell_runtime::time::parse_duration;

/// The Service in front of a binary's `/metrics`. Without certificate files the endpoint
/// serves a self-signed certificate for its DNS names, so a scraper that verifies names
/// against it (with the certificate pinned) reaches it by the Service's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsService {
    /// The Service's name.
    pub name: String,
    /// The Service's namespace (where the binary runs).
    pub namespace: String,
}

impl MetricsService {
    /// `<name>.<namespace>.svc` and its `.cluster.local` form.
    pub fn dns_names(&self) -> Vec<String> {
        let base = format!("{}.{}.svc", self.name, self.namespace);
        vec![base.clone(), format!("{base}.cluster.local")]
    }
}

/// How a binary's `/metrics` endpoint gets its certificate and checks its callers. Each field
/// is a flag; [`MetricsAuthArgs::serving_options`] turns them into what
/// [`crate::serve_secure_metrics`] takes.
// clap makes the doc comment above the `about` of a command that flattens this and has none
// of its own; the controller and the webhook both have one, which wins.
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsAuthArgs {
    /// Address of `/metrics` (HTTPS; callers need a token or client certificate the cluster
    /// authenticates and `get` on the non-resource URL `/metrics`), or 0 to disable it.
    #[arg(long, default_value = "0.0.0.0:8443", value_parser = parse_bind_address)]
    pub metrics_bind_address: BindAddress,
    /// Directory with the metrics serving certificate (e.g. mounted from cert-manager);
    /// a self-signed certificate is used when not given. Reloaded when the files change.
    #[arg(long)]
    pub metrics_cert_path: Option<PathBuf>,
    /// Certificate file name in --metrics-cert-path.
    #[arg(long, default_value = "tls.crt")]
    pub metrics_cert_name: String,
    /// Key file name in --metrics-cert-path.
    #[arg(long, default_value = "tls.key")]
    pub metrics_cert_key: String,
    /// CA bundle for metrics client certificates (user = CN, groups = O).
    #[arg(long)]
    pub metrics_client_ca_file: Option<PathBuf>,
    /// Comma-separated token audiences for metrics callers (default: the apiserver's).
    #[arg(long, value_delimiter = ',')]
    pub metrics_auth_token_audiences: Vec<String>,
    /// How long an accepted metrics token is cached (never past its expiry).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub metrics_auth_cache_ttl: Duration,
    /// How long an allow decision for a metrics caller is cached.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub metrics_authz_allow_cache_ttl: Duration,
    /// How long a deny decision for a metrics caller is cached.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub metrics_authz_deny_cache_ttl: Duration,
}

impl MetricsAuthArgs {
    /// Serve `router` (a binary's `/metrics`) on `--metrics-bind-address`, over TLS, behind
    /// TokenReview + SubjectAccessReview, until `shutdown`. `None` when the address is `0`.
    pub async fn serve(
        &self,
        client: Client,
        router: Router,
        service: &MetricsService,
        shutdown: CancellationToken,
    ) -> Result<Option<JoinHandle<()>>, ServeError> {
        let BindAddress::At(addr) = self.metrics_bind_address else { return Ok(None) };
        let mut options = self.serving_options();
        options.self_signed_names = service.dns_names();
        Ok(Some(SecureServer::bind(addr, client, router, options).await?.spawn(shutdown)))
    }

    /// The options for [`crate::serve_secure_metrics`].
    pub fn serving_options(&self) -> SecureServingOptions {
        let (cert_file, key_file) = match &self.metrics_cert_path {
            Some(dir) => (Some(dir.join(&self.metrics_cert_name)), Some(dir.join(&self.metrics_cert_key))),
            None => (None, None),
        };
        SecureServingOptions {
            tls: TlsFiles { cert_file, key_file, client_ca_file: self.metrics_client_ca_file.clone() },
            auth: AuthOptions {
                token_audiences: self.metrics_auth_token_audiences.iter().filter(|a| !a.is_empty()).cloned().collect(),
                authn_cache: AuthnCacheOptions { ttl: self.metrics_auth_cache_ttl, ..AuthnCacheOptions::default() },
                authz_cache: AuthzCacheOptions {
                    allow_ttl: self.metrics_authz_allow_cache_ttl,
                    deny_ttl: self.metrics_authz_deny_cache_ttl,
                    ..AuthzCacheOptions::default()
                },
                ..AuthOptions::default()
            },
            ..SecureServingOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Binary {
        #[command(flatten)]
        metrics: MetricsAuthArgs,
    }

    #[test]
    fn the_self_signed_names_are_the_services() {
        let service = MetricsService { name: "metrics".into(), namespace: "ops".into() };
        assert_eq!(service.dns_names(), ["metrics.ops.svc", "metrics.ops.svc.cluster.local"]);
    }

    #[test]
    fn defaults_are_self_signed_with_the_standard_lifetimes() {
        let options = Binary::parse_from(["bin"]).metrics.serving_options();
        assert!(options.tls.cert_file.is_none() && options.tls.key_file.is_none());
        assert_eq!(options.auth.authn_cache.ttl, Duration::from_secs(120));
        assert_eq!(options.auth.authz_cache.allow_ttl, Duration::from_secs(300));
        assert_eq!(options.auth.authz_cache.deny_ttl, Duration::from_secs(30));
        assert!(options.auth.token_audiences.is_empty());
    }

    #[test]
    fn flags_fill_the_options() {
        let options = Binary::parse_from([
            "bin",
            "--metrics-cert-path=/certs",
            "--metrics-cert-name=cert.pem",
            "--metrics-client-ca-file=/ca.pem",
            "--metrics-auth-token-audiences=a,b",
            "--metrics-authz-deny-cache-ttl=5s",
        ])
        .metrics
        .serving_options();
        assert_eq!(options.tls.cert_file, Some(PathBuf::from("/certs/cert.pem")));
        assert_eq!(options.tls.key_file, Some(PathBuf::from("/certs/tls.key")));
        assert_eq!(options.tls.client_ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(options.auth.token_audiences, vec!["a", "b"]);
        assert_eq!(options.auth.authz_cache.deny_ttl, Duration::from_secs(5));
        let err = Binary::try_parse_from(["bin", "--metrics-auth-cache-ttl=soon"]).err().unwrap().to_string();
        assert!(err.contains("invalid duration"), "{err}");
    }
}
