//! Authentication: a verified client certificate first (user = CN, groups = O, as
//! kube-apiserver reads them), then `Authorization: Bearer` through TokenReview, cached by token
//! hash for at most the configured TTL and never past the token's own expiry (the cache's
//! policy: [`crate::cache`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::Client;
use kube::api::{Api, PostParams};
use rustls_pki_types::CertificateDer;

use crate::cache::ReviewCache;
use crate::token::{TokenHash, authn_ttl, jwt_expiry};
use crate::user::{AuthMethod, AuthenticatedUser};

/// Why a review could not give an answer. Either way the request is refused (never fail open).
/// Cloneable, because every caller waiting on a failed review gets the same error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    /// The apiserver could not be reached or did not answer in time.
    #[error("the apiserver is unavailable: {0}")]
    Unavailable(Arc<kube::Error>),
    /// The apiserver answered with an error, or the review carried an evaluation error.
    #[error("the review failed: {0}")]
    Failed(String),
}

impl ReviewError {
    pub(crate) fn from_kube(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => Self::Failed(format!("{} ({})", status.message, status.code)),
            other => Self::Unavailable(Arc::new(other)),
        }
    }
}

/// Why a client certificate that the TLS layer accepted names no user; the request gets a
/// 401 (the message is the logged reason).
#[derive(Debug, thiserror::Error)]
pub enum CertificateUserError {
    /// The DER does not parse (the parser's message).
    #[error("client certificate is not valid X.509: {0}")]
    Parse(String),
    /// The subject has no, or an empty, CN: there is no user name to authorize.
    #[error("client certificate has no subject common name")]
    NoCommonName,
}

/// The user a client certificate names: CN is the user, each O a group. The TLS layer has
/// already verified the chain against `--client-ca-file`; this only reads the subject.
pub fn user_from_certificate(der: &CertificateDer<'_>) -> Result<AuthenticatedUser, CertificateUserError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| CertificateUserError::Parse(e.to_string()))?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())
        .ok_or(CertificateUserError::NoCommonName)?;
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_owned).collect();
    Ok(AuthenticatedUser::new(name, groups, AuthMethod::ClientCertificate))
}

/// What TokenReview said about a token (both answers are cached).
#[derive(Debug, Clone)]
pub enum TokenOutcome {
    /// Valid, for this user (as TokenReview names them, with groups, uid and extra).
    Authenticated(AuthenticatedUser),
    /// Invalid, valid for none of the wanted audiences, or naming no user ([`outcome_of`]).
    Rejected,
}

/// Cache sizes and lifetimes for authentication.
#[derive(Debug, Clone)]
pub struct AuthnCacheOptions {
    /// How long an accepted token is trusted without asking again (capped by its `exp`).
    pub ttl: Duration,
    /// How long a rejected token is rejected without asking again.
    pub rejected_ttl: Duration,
    /// The most tokens whose outcome is kept, accepted and rejected together.
    pub capacity: usize,
}

impl Default for AuthnCacheOptions {
    fn default() -> Self {
        Self { ttl: Duration::from_secs(120), rejected_ttl: Duration::from_secs(10), capacity: 4096 }
    }
}

/// Counters of the API calls made, for tests and for the proxy's own logs.
#[derive(Debug, Default)]
pub struct ReviewCounters {
    /// TokenReviews sent: bearer tokens whose outcome was not cached.
    pub token_reviews: AtomicU64,
    /// SubjectAccessReviews sent: decisions no static rule made and none was cached.
    pub subject_access_reviews: AtomicU64,
}

/// Authenticates bearer tokens with TokenReview, through a cache.
pub struct TokenAuthenticator {
    client: Client,
    audiences: Vec<String>,
    options: AuthnCacheOptions,
    cache: ReviewCache<TokenHash, TokenOutcome>,
    counters: Arc<ReviewCounters>,
}

impl TokenAuthenticator {
    /// `audiences` empty means the apiserver's own audiences.
    pub fn new(
        client: Client,
        audiences: Vec<String>,
        options: AuthnCacheOptions,
        counters: Arc<ReviewCounters>,
    ) -> Self {
        let cache = ReviewCache::new(options.capacity);
        Self { client, audiences, options, cache, counters }
    }

    /// How many tokens' outcomes are cached (at most the configured capacity).
    pub async fn cached_tokens(&self) -> u64 {
        self.cache.settled_len().await
    }

    /// Who `token` belongs to: from the cache, or from one TokenReview that concurrent callers
    /// with the same token share. An error is no answer; callers refuse the request.
    pub async fn authenticate(&self, token: &str) -> Result<TokenOutcome, ReviewError> {
        let (ttl, rejected_ttl) = (self.options.ttl, self.options.rejected_ttl);
        // Only called on a miss, so cache hits never parse the token.
        let ttl_of = move |outcome: &TokenOutcome| match outcome {
            TokenOutcome::Authenticated(_) => authn_ttl(ttl, jwt_expiry(token), SystemTime::now()),
            TokenOutcome::Rejected => rejected_ttl,
        };
        self.cache.get_or_fetch(&TokenHash::of(token), ttl_of, || self.review(token)).await
    }

    async fn review(&self, token: &str) -> Result<TokenOutcome, ReviewError> {
        self.counters.token_reviews.fetch_add(1, Ordering::Relaxed);
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: (!self.audiences.is_empty()).then(|| self.audiences.clone()),
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(ReviewError::from_kube)?;
        Ok(outcome_of(reviewed.status.unwrap_or_default(), &self.audiences))
    }
}

/// Read a TokenReview status. Accepted only if authenticated, with a user name, and (when
/// audiences were asked for) valid for at least one of them, as kube-rbac-proxy checks.
pub fn outcome_of(status: TokenReviewStatus, wanted_audiences: &[String]) -> TokenOutcome {
    if status.authenticated != Some(true) {
        return TokenOutcome::Rejected;
    }
    if !wanted_audiences.is_empty() {
        let granted = status.audiences.unwrap_or_default();
        if !granted.iter().any(|a| wanted_audiences.contains(a)) {
            return TokenOutcome::Rejected;
        }
    }
    let Some(info) = status.user else { return TokenOutcome::Rejected };
    let Some(name) = info.username.filter(|n| !n.is_empty()) else { return TokenOutcome::Rejected };
    TokenOutcome::Authenticated(AuthenticatedUser {
        name,
        uid: info.uid,
        groups: info.groups.unwrap_or_default(),
        extra: info.extra.unwrap_or_default(),
        method: AuthMethod::BearerToken,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::authentication::v1::UserInfo;
    use myownshell_certs::pki::{CertificateAuthority, LeafSpec};
    use rustls_pki_types::pem::PemObject;

    use super::*;

    fn status(authenticated: Option<bool>, user: Option<&str>, audiences: Option<&[&str]>) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated,
            user: user.map(|u| UserInfo {
                username: Some(u.to_owned()),
                groups: Some(vec!["g".into()]),
                ..UserInfo::default()
            }),
            audiences: audiences.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            error: None,
        }
    }

    #[test]
    fn token_review_statuses_are_read_strictly() {
        let aud = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let cases = [
            (status(Some(true), Some("alice"), None), aud(&[]), Some("alice")),
            (status(Some(true), Some("alice"), Some(&["api"])), aud(&["api"]), Some("alice")),
            (status(Some(true), Some("alice"), Some(&["x", "api"])), aud(&["api", "y"]), Some("alice")),
            (status(Some(true), Some("alice"), Some(&["other"])), aud(&["api"]), None),
            (status(Some(true), Some("alice"), None), aud(&["api"]), None),
            (status(Some(false), Some("alice"), None), aud(&[]), None),
            (status(None, Some("alice"), None), aud(&[]), None),
            (status(Some(true), None, None), aud(&[]), None),
            (status(Some(true), Some(""), None), aud(&[]), None),
        ];
        for (i, (st, wanted, want)) in cases.into_iter().enumerate() {
            let got = match outcome_of(st, &wanted) {
                TokenOutcome::Authenticated(u) => {
                    assert_eq!(u.groups, vec!["g".to_owned()]);
                    Some(u.name)
                }
                TokenOutcome::Rejected => None,
            };
            assert_eq!(got.as_deref(), want, "case {i}");
        }
    }

    #[test]
    fn certificates_name_user_and_groups() {
        let ca = CertificateAuthority::generate("ca", Duration::from_secs(3600)).unwrap();
        let leaf = ca.issue(&LeafSpec::client("alice", vec!["team-a".into()], Duration::from_secs(3600))).unwrap();
        let der = CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap();
        let user = user_from_certificate(&der).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["team-a"]);
        assert_eq!(user.method, AuthMethod::ClientCertificate);
        let err = user_from_certificate(&CertificateDer::from(vec![1, 2, 3])).unwrap_err();
        assert!(err.to_string().contains("not valid X.509"), "{err}");
    }
}
