//! What makes the test apiserver trust the test bed's issuer: an `AuthenticationConfiguration`
//! (`apiserver.config.k8s.io/v1`, GA since Kubernetes 1.34) with one JWT authenticator, given
//! with `--authentication-config`. As kube-apiserver 1.35.4 behaves: that flag and any
//! `--oidc-*` flag refuse to start together ("authentication-config file and oidc-* flags are
//! mutually exclusive"; the harness sets none), while `--anonymous-auth` is accepted beside a file
//! without an `anonymous` section, such as this one. The harness's client certificates and
//! ServiceAccount tokens go on working beside it.
//!
//! The apiserver fetches the issuer's discovery document and keys itself, in the background,
//! every 10 s until it has them: it starts, and `/readyz` says ready, while the issuer is down
//! (it logs "oidc authenticator: initializing plugin: … connection refused"), and it refuses every
//! token of that issuer with 401 ("oidc: authenticator not initialized") until then. So the issuer
//! is started first, and a caller that needs tokens accepted waits for one to be (see
//! [`super::TrustingCluster`]; `tests/oidc.rs` starts them the other way round too).

use std::path::Path;

use serde_json::json;

/// The prefix of every user name that comes from the test bed's issuer: `oidc:alice`, never
/// mistaken for a ServiceAccount or a certificate's user.
pub const USERNAME_PREFIX: &str = "oidc:";
/// The prefix of every group that comes from the test bed's issuer: `oidc:admins`.
pub const GROUPS_PREFIX: &str = "oidc:";

/// One issuer the apiserver trusts.
#[derive(Debug, Clone)]
pub struct JwtIssuer {
    /// The issuer URL, exactly as its discovery document and its tokens' `iss` say.
    pub url: String,
    /// PEM of the CA that signed the issuer's serving certificate.
    pub certificate_authority: String,
    /// The accepted `aud` values (the client ids); any one of them will do.
    pub audiences: Vec<String>,
}

/// The `AuthenticationConfiguration` document: the user name from `sub`, the groups from
/// `groups`, both prefixed. JSON, which the apiserver reads as YAML.
pub fn authentication_config(issuer: &JwtIssuer) -> String {
    let config = json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AuthenticationConfiguration",
        "jwt": [{
            "issuer": {
                "url": issuer.url,
                "audiences": issuer.audiences,
                "audienceMatchPolicy": "MatchAny",
                "certificateAuthority": issuer.certificate_authority,
            },
            "claimMappings": {
                "username": { "claim": "sub", "prefix": USERNAME_PREFIX },
                "groups": { "claim": "groups", "prefix": GROUPS_PREFIX },
            },
        }],
    });
    // A json! value always serializes.
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

/// The kube-apiserver flags for a configuration file at `path`.
pub fn apiserver_args(path: &Path) -> Vec<String> {
    vec![format!("--authentication-config={}", path.display())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_groups_come_prefixed_from_sub_and_groups() {
        let issuer = JwtIssuer {
            url: "https://127.0.0.1:4444".into(),
            certificate_authority: "PEM".into(),
            audiences: vec!["a".into(), "b".into()],
        };
        let doc: serde_json::Value = serde_json::from_str(&authentication_config(&issuer)).unwrap();
        let jwt = &doc["jwt"][0];
        assert_eq!(doc["apiVersion"], "apiserver.config.k8s.io/v1");
        assert_eq!(jwt["issuer"]["url"], "https://127.0.0.1:4444");
        assert_eq!(jwt["issuer"]["audiences"], json!(["a", "b"]));
        assert_eq!(jwt["claimMappings"]["username"], json!({ "claim": "sub", "prefix": "oidc:" }));
        assert_eq!(jwt["claimMappings"]["groups"], json!({ "claim": "groups", "prefix": "oidc:" }));
        assert!(doc.get("anonymous").is_none(), "an anonymous section would conflict with --anonymous-auth");
    }
}
