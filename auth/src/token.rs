//! Bearer tokens: taking them out of a request, naming them by hash, and reading their expiry.
//!
//! A token is a credential, so nothing here keeps, logs or compares it beyond the moment of
//! hashing: caches are keyed by [`TokenHash`], and the raw string goes only to TokenReview.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderMap;
use http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

/// What the `Authorization` header held.
#[derive(PartialEq, Eq)]
pub enum BearerToken<'a> {
    /// No `Authorization` header at all.
    Missing,
    /// A header that is not `Bearer <token>` (other scheme, empty token, not ASCII).
    Malformed,
    /// The token after the scheme, without surrounding spaces.
    Present(&'a str),
}

impl fmt::Debug for BearerToken<'_> {
    // Never print the token itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => f.write_str("Missing"),
            Self::Malformed => f.write_str("Malformed"),
            Self::Present(_) => f.write_str("Present(<redacted>)"),
        }
    }
}

/// The bearer token of a request (the scheme is case-insensitive, as RFC 7235 says).
pub fn bearer_token(headers: &HeaderMap) -> BearerToken<'_> {
    let Some(value) = headers.get(AUTHORIZATION) else { return BearerToken::Missing };
    let Ok(value) = value.to_str() else { return BearerToken::Malformed };
    let Some((scheme, token)) = value.split_once(' ') else { return BearerToken::Malformed };
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
        return BearerToken::Malformed;
    }
    BearerToken::Present(token)
}

/// SHA-256 of a token: the only form in which a token is remembered.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// The hash that stands for `token` from here on (e.g. as a cache key).
    pub fn of(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

impl fmt::Debug for TokenHash {
    // A short prefix is enough to correlate, and is not the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({:02x}{:02x}{:02x}{:02x}…)", self.0[0], self.0[1], self.0[2], self.0[3])
    }
}

/// The `exp` claim of a JWT, read **without verifying anything**: TokenReview decides whether
/// the token is valid; this only keeps a cached "authenticated" from outliving the token.
/// `None` for anything that is not a JWT with a numeric `exp`.
pub fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?;
    let seconds = exp.as_u64().or_else(|| exp.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64))?;
    UNIX_EPOCH.checked_add(Duration::from_secs(seconds))
}

/// How long an authentication result may be cached: `ttl`, cut short by the token's expiry.
/// Zero when the token has already expired.
pub fn authn_ttl(ttl: Duration, expiry: Option<SystemTime>, now: SystemTime) -> Duration {
    match expiry {
        Some(exp) => ttl.min(exp.duration_since(now).unwrap_or(Duration::ZERO)),
        None => ttl,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(AUTHORIZATION, HeaderValue::from_str(a).unwrap());
        }
        h
    }

    #[test]
    fn bearer_tokens_are_parsed_strictly() {
        let cases = [
            (None, BearerToken::Missing),
            (Some("Bearer abc"), BearerToken::Present("abc")),
            (Some("bearer abc"), BearerToken::Present("abc")),
            (Some("BEARER   abc "), BearerToken::Present("abc")),
            (Some("Basic dXNlcjpwYXNz"), BearerToken::Malformed),
            (Some("Bearer"), BearerToken::Malformed),
            (Some("Bearer "), BearerToken::Malformed),
            (Some("Bearer a b"), BearerToken::Malformed),
            (Some("abc"), BearerToken::Malformed),
        ];
        for (auth, want) in cases {
            let h = headers(auth);
            assert_eq!(bearer_token(&h), want, "{auth:?}");
        }
    }

    #[test]
    fn token_hashes_are_stable_and_redacted() {
        assert_eq!(TokenHash::of("a"), TokenHash::of("a"));
        assert_ne!(TokenHash::of("a"), TokenHash::of("b"));
        let debug = format!("{:?}", TokenHash::of("super-secret"));
        assert!(!debug.contains("super-secret"), "{debug}");
        assert!(!format!("{:?}", BearerToken::Present("super-secret")).contains("super-secret"));
    }

    fn jwt(payload: &str) -> String {
        format!("eyJhbGciOiJSUzI1NiJ9.{}.c2lnbmF0dXJl", URL_SAFE_NO_PAD.encode(payload))
    }

    #[test]
    fn jwt_expiry_reads_exp_or_nothing() {
        let at = |s: u64| Some(UNIX_EPOCH + Duration::from_secs(s));
        let cases = [
            (jwt(r#"{"exp":1700000000,"sub":"x"}"#), at(1_700_000_000)),
            (jwt(r#"{"exp":1700000000.5}"#), at(1_700_000_000)),
            (jwt(r#"{"sub":"x"}"#), None),
            (jwt(r#"{"exp":"soon"}"#), None),
            (jwt(r#"{"exp":-5}"#), None),
            (jwt("not json"), None),
            ("garbage".to_owned(), None),
            ("a.b".to_owned(), None),
            ("a.b.c.d".to_owned(), None),
            ("a.!!!.c".to_owned(), None),
        ];
        for (token, want) in cases {
            assert_eq!(jwt_expiry(&token), want, "{token}");
        }
    }

    #[test]
    fn authn_ttl_never_outlives_the_token() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let ttl = Duration::from_secs(120);
        let cases = [
            (None, ttl),
            (Some(now + Duration::from_secs(3_600)), ttl),
            (Some(now + Duration::from_secs(30)), Duration::from_secs(30)),
            (Some(now), Duration::ZERO),
            (Some(now - Duration::from_secs(5)), Duration::ZERO),
        ];
        for (expiry, want) in cases {
            assert_eq!(authn_ttl(ttl, expiry, now), want, "{expiry:?}");
        }
    }
}
