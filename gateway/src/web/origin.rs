//! Whether a request that carries the session cookie comes from the gateway's own page.
//!
//! The cookie is `SameSite=Strict`, but a WebSocket handshake is not covered by CORS, so the
//! `Origin` a browser always sends is checked too (the cross-site WebSocket hijacking defence):
//! it must be one of `--allowed-origins`, or, when none are given, the origin the request was
//! addressed to (`https://` and its `Host`). Requests authenticated by a bearer token need an
//! Origin only when they carry one (see `signin`: a proxy in front may add the bearer from its
//! own cookie).

/// The origins pages may be served from.
#[derive(Debug, Clone, Default)]
pub struct AllowedOrigins(Vec<String>);

impl AllowedOrigins {
    /// From `--allowed-origins` (empty: the request's own host only). Trailing slashes are
    /// ignored, as browsers never send them.
    pub fn new(origins: &[String]) -> Self {
        Self(origins.iter().map(|o| o.trim_end_matches('/').to_ascii_lowercase()).collect())
    }

    /// Whether a cookie-carrying request with this `Origin` and `Host` may go on.
    pub fn allows(&self, origin: Option<&str>, host: Option<&str>) -> bool {
        let Some(origin) = origin.map(str::to_ascii_lowercase) else { return false };
        if self.0.is_empty() {
            return host.is_some_and(|h| origin == format!("https://{}", h.to_ascii_lowercase()));
        }
        self.0.contains(&origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let own = AllowedOrigins::default();
        let listed = AllowedOrigins::new(&["https://shells.example.com/".into()]);
        // (what, allowed, Origin, Host, allowed or not)
        type Case<'a> = (&'a str, &'a AllowedOrigins, Option<&'a str>, Option<&'a str>, bool);
        let cases: &[Case<'_>] = &[
            ("own page", &own, Some("https://127.0.0.1:8443"), Some("127.0.0.1:8443"), true),
            ("case does not matter", &own, Some("https://Gateway:8443"), Some("gateway:8443"), true),
            ("another site", &own, Some("https://evil.example"), Some("127.0.0.1:8443"), false),
            ("plain http page", &own, Some("http://127.0.0.1:8443"), Some("127.0.0.1:8443"), false),
            ("another port", &own, Some("https://127.0.0.1:9443"), Some("127.0.0.1:8443"), false),
            ("no origin", &own, None, Some("127.0.0.1:8443"), false),
            ("opaque origin", &own, Some("null"), Some("127.0.0.1:8443"), false),
            ("no host", &own, Some("https://127.0.0.1:8443"), None, false),
            ("listed", &listed, Some("https://shells.example.com"), Some("10.0.0.1:8443"), true),
            ("listed only", &listed, Some("https://10.0.0.1:8443"), Some("10.0.0.1:8443"), false),
        ];
        for (name, allowed, origin, host, want) in cases {
            assert_eq!(allowed.allows(*origin, *host), *want, "{name}");
        }
    }
}
