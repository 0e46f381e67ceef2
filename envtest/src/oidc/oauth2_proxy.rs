//! oauth2-proxy (`github.com/oauth2-proxy/oauth2-proxy/v7`) in front of the gateway, signing
//! people in through the test bed's provider: where its binary is (built from the Go module
//! proxy by `cargo xtask` into [`TOOL`]'s cache folder, like Hydra), its command line, which the
//! README's recipe is made from ([`recipe`]), and the process.
//!
//! The gateway learns who is asking from the ID token oauth2-proxy holds for the person, sent on
//! as `Authorization: Bearer` (`--pass-authorization-header`, the Kubernetes Dashboard's
//! recipe): the gateway shows it to TokenReview like any bearer, so it needs no client
//! certificate from the proxy (oauth2-proxy presents none to an upstream) and never talks to the
//! provider itself. That bearer rides on oauth2-proxy's cookie, so the gateway checks the
//! `Origin` of a browser's bearer requests as it does the session cookie's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;

use crate::assets::CachedTool;
use crate::process::{ManagedProcess, ProcessSpec};
use crate::wait::eventually;

/// The oauth2-proxy release built and run.
pub const VERSION: &str = "v7.15.6";
/// The Go module; its root package is the `oauth2-proxy` command.
pub const MODULE: &str = "github.com/oauth2-proxy/oauth2-proxy/v7";
/// A directory holding [`BINARY`], instead of [`TOOL`]'s cache folder (what `cargo xtask test` sets).
pub const ENV: &str = "MYOWNSHELL_OAUTH2_PROXY";
/// File name of the binary.
pub const BINARY: &str = "oauth2-proxy";
/// Its client id at the provider. The apiserver must take ID tokens of this audience, since the
/// gateway shows them to TokenReview.
pub const CLIENT_ID: &str = "myownshell-oauth2-proxy";
/// oauth2-proxy has no flag for an upstream's CA: it trusts Go's system roots (with
/// `--use-system-trust-store`, beside `--provider-ca-file`), which this variable replaces with a
/// file of our choosing (the gateway's CA).
pub const UPSTREAM_CA_ENV: &str = "SSL_CERT_FILE";
/// How long it may take to fetch the provider's discovery document and listen.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the binary is found.
pub const TOOL: CachedTool = CachedTool {
    name: "oauth2-proxy",
    folder: "oauth2-proxy",
    version: VERSION,
    env: ENV,
    binary: BINARY,
    built_by: "`cargo xtask test`, `cargo xtask e2e` and `cargo xtask oauth2-proxy`",
};

/// The binary, or what is missing and how to get it.
pub fn locate() -> Result<PathBuf, String> {
    TOOL.locate()
}

/// What one oauth2-proxy in front of one gateway is given.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The provider's issuer URL.
    pub issuer: String,
    /// The CA of the provider's serving certificate (PEM file).
    pub issuer_ca_file: PathBuf,
    /// The file holding its client secret at the provider.
    pub client_secret_file: PathBuf,
    /// The file holding the key its cookies are sealed with (32 bytes).
    pub cookie_secret_file: PathBuf,
    /// The origin people open (`https://host:port`): its callback is `<origin>/oauth2/callback`.
    pub origin: String,
    /// Where it listens for HTTPS (`host:port`).
    pub listen: String,
    /// Its serving certificate and key (PEM files).
    pub cert_file: PathBuf,
    /// See `cert_file`.
    pub key_file: PathBuf,
    /// The gateway's URL (`https://…/`); its certificate must chain to [`UPSTREAM_CA_ENV`]'s file.
    pub upstream: String,
}

impl ProxyConfig {
    /// The redirect URI registered at the provider.
    pub fn redirect_url(&self) -> String {
        format!("{}/oauth2/callback", self.origin)
    }

    /// The command line after `oauth2-proxy`; each flag's reason is in the README's recipe.
    pub fn args(&self) -> Vec<String> {
        let path = |p: &Path| p.display().to_string();
        vec![
            "--provider=oidc".into(),
            format!("--oidc-issuer-url={}", self.issuer),
            format!("--provider-ca-file={}", path(&self.issuer_ca_file)),
            // The provider's CA file becomes the roots of every connection it makes, the
            // upstream's too, unless the system's roots (UPSTREAM_CA_ENV's) are kept beside it.
            "--use-system-trust-store=true".into(),
            format!("--client-id={CLIENT_ID}"),
            format!("--client-secret-file={}", path(&self.client_secret_file)),
            "--code-challenge-method=S256".into(),
            // Its default skips the check of the ID token's nonce; the test bed's Hydra sends it back.
            "--insecure-oidc-skip-nonce=false".into(),
            format!("--redirect-url={}", self.redirect_url()),
            // Kubernetes decides what each person may do; the proxy lets in whoever signs in.
            "--email-domain=*".into(),
            "--skip-provider-button".into(),
            format!("--upstream={}", self.upstream),
            "--pass-authorization-header".into(),
            format!("--cookie-secret-file={}", path(&self.cookie_secret_file)),
            "--cookie-secure=true".into(),
            "--cookie-samesite=lax".into(),
            "--cookie-expire=8h".into(),
            "--http-address=-".into(),
            format!("--https-address={}", self.listen),
            format!("--tls-cert-file={}", path(&self.cert_file)),
            format!("--tls-key-file={}", path(&self.key_file)),
            // The default request log writes each URI, the callback's authorization code with it.
            format!("--request-logging-format={REQUEST_LOG}"),
        ]
    }
}

/// One line per request, without its URI or any header but the user agent's name.
pub const REQUEST_LOG: &str = "{{.Client}} {{.Username}} {{.RequestMethod}} {{.StatusCode}}";

/// The README's recipe: the command [`ProxyConfig::args`] makes, with an installation's values
/// in place of the test's, one flag a line.
pub fn recipe() -> String {
    let config = ProxyConfig {
        issuer: "https://id.example.com".into(),
        issuer_ca_file: "/etc/oauth2-proxy/issuer-ca.crt".into(),
        client_secret_file: "/etc/oauth2-proxy/client-secret".into(),
        cookie_secret_file: "/etc/oauth2-proxy/cookie-secret".into(),
        origin: "https://shells.example.com".into(),
        listen: "0.0.0.0:8443".into(),
        cert_file: "/etc/oauth2-proxy/tls.crt".into(),
        key_file: "/etc/oauth2-proxy/tls.key".into(),
        upstream: "https://myownshell-gateway.myownshell-system.svc/".into(),
    };
    let mut lines = vec![format!("{UPSTREAM_CA_ENV}=/etc/oauth2-proxy/gateway-ca.crt {BINARY}")];
    lines.extend(config.args().into_iter().map(|arg| format!("  {}", shell_quote(&arg))));
    lines.join(" \\\n") + "\n"
}

/// `arg` as a POSIX shell reads it back.
fn shell_quote(arg: &str) -> String {
    if arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./:,".contains(c)) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Start `binary` with `config`, trusting `upstream_ca` for the gateway, logging to
/// `dir/oauth2-proxy.log`; wait until it answers `/ping` (`tls` trusts its certificate). It dies
/// with the test process (see [`crate::process`]).
pub async fn start(
    binary: &Path,
    config: &ProxyConfig,
    upstream_ca: &Path,
    dir: &Path,
    tls: &Arc<ClientConfig>,
) -> Result<ManagedProcess, String> {
    let spec = ProcessSpec::new("oauth2-proxy", binary, dir.join("oauth2-proxy.log"))
        .args(config.args())
        .env(UPSTREAM_CA_ENV, upstream_ca.as_os_str());
    let process = ManagedProcess::spawn(spec).map_err(|e| format!("starting {}: {e}", binary.display()))?;
    let process = std::sync::Mutex::new(process);
    let exited = || process.lock().unwrap_or_else(std::sync::PoisonError::into_inner).exit_status();
    let ping = format!("{}/ping", config.origin);
    let ready = eventually("oauth2-proxy to answer /ping", START_TIMEOUT, || async {
        if let Some(exit) = exited() {
            // Not worth polling further: said at once.
            return Ok(Err(format!("oauth2-proxy exited ({exit})")));
        }
        let request = http::Request::get(&ping).body(Vec::new()).map_err(|e| e.to_string())?;
        let answer = super::https::send(tls, request).await?;
        if answer.status == 200 { Ok(Ok(())) } else { Err(format!("{} {}", answer.status, answer.text())) }
    })
    .await;
    let process = process.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    match ready {
        Ok(Ok(())) => Ok(process),
        Ok(Err(e)) | Err(e) => Err(format!("{e}; its log ends:\n{}", process.log_tail(30))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_is_the_tests_command_line_one_flag_a_line() {
        let recipe = recipe();
        assert!(recipe.starts_with("SSL_CERT_FILE=/etc/oauth2-proxy/gateway-ca.crt oauth2-proxy \\\n"), "{recipe}");
        assert!(recipe.contains("\n  --pass-authorization-header \\\n"), "{recipe}");
        assert!(recipe.contains("\n  '--email-domain=*' \\\n"), "{recipe}");
        assert!(recipe.contains("--redirect-url=https://shells.example.com/oauth2/callback"), "{recipe}");
        assert!(recipe.ends_with(&format!("  '--request-logging-format={REQUEST_LOG}'\n")), "{recipe}");
        assert!(!REQUEST_LOG.contains("URI"), "the callback's URI holds the authorization code");
    }
}
