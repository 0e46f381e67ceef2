//! The flags of sign-in by an OpenID Connect identity provider, named and meant as
//! kube-apiserver's `--oidc-*` flags, so that one set of values makes a person the same user to
//! the gateway and to the apiserver.

use std::path::PathBuf;

use myownshell_auth::oidc::{ClaimRules, ClientSecret, OidcOptions};

/// `--oidc-*`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OidcArgs {
    /// The identity provider's issuer URL (https): with it, the page offers "Sign in" through
    /// the provider (the authorization-code flow with PKCE). The apiserver must trust the same
    /// issuer for the same client id (its --authentication-config or --oidc-issuer-url), since
    /// the gateway shows it the ID token as the user's.
    #[arg(long, requires_all = ["oidc_client_id", "oidc_redirect_url"])]
    pub oidc_issuer_url: Option<String>,
    /// The gateway's client id at the provider: the audience of its ID tokens.
    #[arg(long)]
    pub oidc_client_id: Option<String>,
    /// A file holding the client's secret (a confidential client: client_secret_basic).
    /// Without it, a public client (PKCE alone).
    #[arg(long)]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// Where the provider sends people back: this gateway's https URL as they reach it, with
    /// the path /oidc/callback (registered at the provider as a redirect URI).
    #[arg(long)]
    pub oidc_redirect_url: Option<String>,
    /// The CA of the provider's certificate (PEM); default: the system's roots.
    #[arg(long)]
    pub oidc_ca_file: Option<PathBuf>,
    /// The claim naming the user (kube-apiserver's meaning).
    #[arg(long, default_value = "sub")]
    pub oidc_username_claim: String,
    /// Put before every user name. Unset: the issuer URL and `#`, but for the `email` claim; `-`:
    /// nothing (kube-apiserver's meaning).
    #[arg(long)]
    pub oidc_username_prefix: Option<String>,
    /// The claim naming the user's groups (a string or a list).
    #[arg(long)]
    pub oidc_groups_claim: Option<String>,
    /// Put before every group.
    #[arg(long, default_value = "")]
    pub oidc_groups_prefix: String,
    /// Scopes asked for besides `openid` (`offline_access`: a refresh token, so that a sign-in
    /// lasts --session-max-age, its ID token renewed before it expires).
    #[arg(long, value_delimiter = ',', default_value = "email,profile,offline_access")]
    pub oidc_extra_scopes: Vec<String>,
}

/// Why the `--oidc-*` flags do not make a configuration.
#[derive(Debug, thiserror::Error)]
#[error("--oidc-client-secret-file {path}: {reason}")]
pub struct SecretFileError {
    path: String,
    reason: String,
}

impl OidcArgs {
    /// The verifier's options, when --oidc-issuer-url is given; the secret read from its file.
    pub fn options(&self) -> Result<Option<OidcOptions>, SecretFileError> {
        let (Some(issuer_url), Some(client_id)) = (&self.oidc_issuer_url, &self.oidc_client_id) else {
            return Ok(None);
        };
        let client_secret = match &self.oidc_client_secret_file {
            None => None,
            Some(path) => {
                let error = |reason: String| SecretFileError { path: path.display().to_string(), reason };
                let meta = std::fs::metadata(path).map_err(|e| error(e.to_string()))?;
                // A secret is a line, not a file to stream: bounded before it is read.
                if meta.len() > 4096 {
                    return Err(error(format!("{} bytes; a client secret is at most 4096", meta.len())));
                }
                let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
                let secret = text.trim();
                if secret.is_empty() {
                    return Err(error("it is empty".into()));
                }
                Some(ClientSecret(secret.to_owned()))
            }
        };
        Ok(Some(OidcOptions {
            issuer_url: issuer_url.clone(),
            client_id: client_id.clone(),
            ca_file: self.oidc_ca_file.clone(),
            client_secret,
            claims: ClaimRules {
                username_claim: self.oidc_username_claim.clone(),
                username_prefix: self.oidc_username_prefix.clone(),
                groups_claim: self.oidc_groups_claim.clone(),
                groups_prefix: self.oidc_groups_prefix.clone(),
            },
        }))
    }
}
