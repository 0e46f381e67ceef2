//! The issuer's discovery document (`/.well-known/openid-configuration`, OpenID Connect
//! Discovery 1.0): where to send a person to sign in, where to exchange a code, where the keys
//! are. Read once at start; its `issuer` must be exactly the configured one (section 4.3), or a
//! document served for another issuer could name keys that issuer never had.

use serde::Deserialize;

use super::OidcError;

/// The largest discovery document read (real ones are a few KiB).
pub(crate) const DOCUMENT_LIMIT: usize = 64 * 1024;

/// What the gateway uses of an issuer's discovery document.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Provider {
    /// The issuer, exactly as the configured URL.
    pub issuer: String,
    /// Where a person is sent to sign in (the authorization request).
    pub authorization_endpoint: String,
    /// Where a code and a refresh token are exchanged.
    pub token_endpoint: String,
    /// The issuer's public keys (a JWK Set).
    pub jwks_uri: String,
    /// Where a person signs out at the issuer (RP-initiated logout), if it offers one.
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
    /// Where a refresh token is revoked (RFC 7009), if the issuer offers it.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The PKCE methods the issuer says it takes; absent says nothing (many take S256 without
    /// saying so).
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
}

/// The discovery document's URL for `issuer` (a trailing `/` of the issuer is not doubled).
pub fn document_url(issuer: &str) -> String {
    format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'))
}

/// Read and check a discovery document for the configured `issuer`.
pub fn parse(issuer: &str, body: &[u8]) -> Result<Provider, OidcError> {
    let provider: Provider = serde_json::from_slice(body)
        .map_err(|e| OidcError::Provider(format!("the issuer's discovery document does not read: {e}")))?;
    if provider.issuer != issuer {
        return Err(OidcError::Provider(format!(
            "the discovery document names issuer {:?}, not the configured {issuer:?} (they must be equal, \
             trailing slash included)",
            provider.issuer
        )));
    }
    for (field, url) in [
        ("authorization_endpoint", &provider.authorization_endpoint),
        ("token_endpoint", &provider.token_endpoint),
        ("jwks_uri", &provider.jwks_uri),
    ] {
        if !url.starts_with("https://") {
            return Err(OidcError::Provider(format!("the discovery document's {field} {url:?} is not an https URL")));
        }
    }
    if let Some(methods) = &provider.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(OidcError::Provider(format!(
            "the issuer does not take PKCE with S256 (code_challenge_methods_supported: {methods:?})"
        )));
    }
    Ok(provider)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://idp.example";

    fn document(issuer: &str, extra: &str) -> String {
        format!(
            r#"{{"issuer":"{issuer}","authorization_endpoint":"https://idp.example/auth","token_endpoint":"https://idp.example/token","jwks_uri":"https://idp.example/keys"{extra}}}"#
        )
    }

    #[test]
    fn a_document_is_read_and_checked() {
        let cases: [(&str, String, Result<(), &str>); 7] = [
            ("plain", document(ISSUER, ""), Ok(())),
            ("with S256", document(ISSUER, r#","code_challenge_methods_supported":["plain","S256"]"#), Ok(())),
            ("another issuer", document("https://evil.example", ""), Err("not the configured")),
            ("a trailing slash more", document("https://idp.example/", ""), Err("not the configured")),
            ("plain only", document(ISSUER, r#","code_challenge_methods_supported":["plain"]"#), Err("S256")),
            ("not JSON", "<html>".to_owned(), Err("does not read")),
            (
                "http keys",
                document(ISSUER, "").replace("https://idp.example/keys", "http://idp.example/keys"),
                Err("jwks_uri"),
            ),
        ];
        for (name, body, want) in cases {
            match (parse(ISSUER, body.as_bytes()), want) {
                (Ok(p), Ok(())) => assert_eq!(p.jwks_uri, "https://idp.example/keys", "{name}"),
                (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_document_url_has_one_slash() {
        assert_eq!(document_url("https://a/b"), "https://a/b/.well-known/openid-configuration");
        assert_eq!(document_url("https://a/b/"), "https://a/b/.well-known/openid-configuration");
    }
}
