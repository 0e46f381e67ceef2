//! The tower layer: strip spoofable identity headers, authenticate, authorize, then call the
//! inner service with the [`AuthenticatedUser`] in the request extensions, or answer
//! 401 / 403 / 503 / 500 itself. It never lets a request through when a review failed.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode};
use kube::Client;
use myownshell_runtime::server::ConnectionInfo;
use rustls_pki_types::CertificateDer;
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service, ServiceExt};

use crate::attributes::RequestAttributes;
use crate::authn::{
    AuthnCacheOptions, ReviewCounters, ReviewError, TokenAuthenticator, TokenOutcome, user_from_certificate,
};
use crate::authz::{Authorizer, AuthzCacheOptions, Decision};
use crate::config::{AuthorizationConfig, ResourceAttributesConfig};
use crate::denials::{Denial, Denials};
use crate::paths::PathPatterns;
use crate::token::{BearerToken, bearer_token};
use crate::user::AuthenticatedUser;

/// Headers that carry the authenticated identity to an upstream (`--auth-header-fields-enabled`).
#[derive(Debug, Clone)]
pub struct IdentityHeaders {
    /// Carries the user name (`--auth-header-user-field-name`).
    pub user: HeaderName,
    /// Carries the groups, when the user has any (`--auth-header-groups-field-name`).
    pub groups: HeaderName,
    /// Groups are joined into one header value with this separator.
    pub groups_separator: String,
}

impl Default for IdentityHeaders {
    fn default() -> Self {
        Self {
            user: HeaderName::from_static("x-remote-user"),
            groups: HeaderName::from_static("x-remote-groups"),
            groups_separator: "|".into(),
        }
    }
}

/// Everything the auth layer needs besides the kube client.
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    /// TokenReview audiences; empty means the apiserver's own.
    pub token_audiences: Vec<String>,
    /// How long, and how many, TokenReview outcomes are cached.
    pub authn_cache: AuthnCacheOptions,
    /// How long, and how many, SubjectAccessReview decisions are cached.
    pub authz_cache: AuthzCacheOptions,
    /// Resource attributes and static rules (`--config-file`).
    pub authorization: AuthorizationConfig,
    /// If not empty, only these paths are served; others get 404 before any authentication
    /// (`--allow-paths`).
    pub allow_paths: PathPatterns,
    /// Paths served without authentication or authorization (`--ignore-paths`).
    pub ignore_paths: PathPatterns,
    /// Forward the authenticated user in these headers (`--auth-header-fields-enabled`).
    pub identity_headers: Option<IdentityHeaders>,
}

/// Counts of the review API calls made so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReviewCounts {
    /// TokenReviews sent: bearer tokens whose outcome was not cached.
    pub token_reviews: u64,
    /// SubjectAccessReviews sent: decisions no static rule made and none was cached.
    pub subject_access_reviews: u64,
}

struct AuthState {
    authenticator: TokenAuthenticator,
    authorizer: Authorizer,
    resource: Option<ResourceAttributesConfig>,
    allow_paths: PathPatterns,
    ignore_paths: PathPatterns,
    identity_headers: Option<IdentityHeaders>,
    counters: Arc<ReviewCounters>,
    denials: Denials,
}

/// The authentication + authorization layer. Cheap to clone; clones share caches.
#[derive(Clone)]
pub struct RbacAuth {
    state: Arc<AuthState>,
}

impl std::fmt::Debug for RbacAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RbacAuth").field("counts", &self.counts()).finish_non_exhaustive()
    }
}

impl RbacAuth {
    /// Reviews are sent with `client`'s identity, which needs `create` on TokenReviews and
    /// SubjectAccessReviews (`system:auth-delegator`).
    pub fn new(client: Client, options: AuthOptions) -> Self {
        let counters = Arc::new(ReviewCounters::default());
        let authenticator =
            TokenAuthenticator::new(client.clone(), options.token_audiences, options.authn_cache, counters.clone());
        let authorizer =
            Authorizer::new(client, options.authorization.static_rules, options.authz_cache, counters.clone());
        let state = AuthState {
            authenticator,
            authorizer,
            resource: options.authorization.resource_attributes,
            allow_paths: options.allow_paths,
            ignore_paths: options.ignore_paths,
            identity_headers: options.identity_headers,
            counters,
            denials: Denials::default(),
        };
        Self { state: Arc::new(state) }
    }

    /// How many TokenReviews and SubjectAccessReviews this layer has sent.
    pub fn counts(&self) -> ReviewCounts {
        ReviewCounts {
            token_reviews: self.state.counters.token_reviews.load(Ordering::Relaxed),
            subject_access_reviews: self.state.counters.subject_access_reviews.load(Ordering::Relaxed),
        }
    }

    /// Log a summary of the denied requests at info every minute that had any, until
    /// `shutdown`, then one of what is left; each denial itself is logged at debug only.
    /// [`crate::SecureServer::run`] runs this; run it beside a server of your own.
    pub async fn report_denials(&self, shutdown: CancellationToken) {
        self.state.denials.report(shutdown).await;
    }
}

impl<S> Layer<S> for RbacAuth {
    type Service = RbacAuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RbacAuthService { inner, state: self.state.clone() }
    }
}

/// The service [`RbacAuth`] wraps around an inner service.
#[derive(Clone)]
pub struct RbacAuthService<S> {
    inner: S,
    state: Arc<AuthState>,
}

impl<S, B> Service<Request<B>> for RbacAuthService<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is checked on the clone that handles the request (see `call`).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let state = self.state.clone();
        Box::pin(async move {
            match state.check(req).await {
                Ok(req) => inner.oneshot(req).await,
                Err(refusal) => Ok(refusal),
            }
        })
    }
}

/// Remove every header an upstream could read as an identity: the `X-Remote-*` family and
/// the configured identity headers. Only this layer may set them.
pub fn strip_identity_headers(headers: &mut HeaderMap, configured: Option<&IdentityHeaders>) {
    let spoofable: Vec<HeaderName> = headers
        .keys()
        .filter(|name| {
            let n = name.as_str();
            n.starts_with("x-remote-")
                || n.starts_with("impersonate-")
                || configured.is_some_and(|c| *name == c.user || *name == c.groups)
        })
        .cloned()
        .collect();
    for name in spoofable {
        headers.remove(&name);
    }
}

fn set_identity_headers(headers: &mut HeaderMap, config: &IdentityHeaders, user: &AuthenticatedUser) {
    // Values that are not valid header text (control characters) are left out, not mangled.
    if let Ok(value) = HeaderValue::from_str(&user.name) {
        headers.insert(config.user.clone(), value);
    }
    if !user.groups.is_empty()
        && let Ok(value) = HeaderValue::from_str(&user.groups.join(&config.groups_separator))
    {
        headers.insert(config.groups.clone(), value);
    }
}

fn plain(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn unauthorized() -> Response {
    let mut response = plain(StatusCode::UNAUTHORIZED, "Unauthorized\n".into());
    response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

fn review_failed(stage: &str, error: &ReviewError, path: &str) -> Response {
    // The details go to the log; the caller learns only that it is not their fault.
    tracing::warn!(stage, path, error = %error, decision = "error", "request refused: review failed");
    match error {
        ReviewError::Unavailable(_) => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the authorization backend is unreachable\n".into(),
        ),
        ReviewError::Failed(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n".into()),
    }
}

impl AuthState {
    /// The request, ready for the inner service, or the response that refuses it.
    async fn check<B>(&self, mut req: Request<B>) -> Result<Request<B>, Response> {
        strip_identity_headers(req.headers_mut(), self.identity_headers.as_ref());
        let path = req.uri().path().to_owned();
        if !self.allow_paths.is_empty() && !self.allow_paths.matches(&path) {
            return Err(plain(StatusCode::NOT_FOUND, "404 page not found\n".into()));
        }
        if self.ignore_paths.matches(&path) {
            req.headers_mut().remove(AUTHORIZATION);
            return Ok(req);
        }
        let attributes = match &self.resource {
            Some(resource) => resource.request(req.method()),
            None => RequestAttributes::non_resource(req.method(), &path),
        };
        // Only the (Sync) parts of the request are held across the reviews' awaits.
        let peer_leaf = req
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|info| info.peer_certificates.as_ref())
            .and_then(|chain| chain.first())
            .cloned();
        let user = self.authenticate(peer_leaf.as_ref(), req.headers(), &attributes, &path).await?;
        match self.authorizer.authorize(&user, &attributes).await {
            Ok(Decision::Allow) => {}
            Ok(Decision::Deny { reason }) => {
                let permission = attributes.describe();
                self.denials.denied(Denial::Forbidden, &reason, Some(&user.name), attributes.verb(), &path);
                return Err(plain(
                    StatusCode::FORBIDDEN,
                    format!("Forbidden: user {:?} is not allowed to {permission}\n", user.name),
                ));
            }
            Err(e) => return Err(review_failed("authorization", &e, &path)),
        }
        tracing::debug!(user = %user.name, verb = attributes.verb(), path, decision = "allow", "request allowed");
        // The upstream gets the identity from us, never the caller's credential.
        req.headers_mut().remove(AUTHORIZATION);
        if let Some(config) = &self.identity_headers {
            set_identity_headers(req.headers_mut(), config, &user);
        }
        req.extensions_mut().insert(user);
        Ok(req)
    }

    async fn authenticate(
        &self,
        peer_leaf: Option<&CertificateDer<'static>>,
        headers: &HeaderMap,
        attributes: &RequestAttributes,
        path: &str,
    ) -> Result<AuthenticatedUser, Response> {
        let deny = |why: &str| {
            self.denials.denied(Denial::Unauthenticated, why, None, attributes.verb(), path);
            unauthorized()
        };
        // A verified client certificate decides before any token is looked at.
        if let Some(leaf) = peer_leaf {
            return user_from_certificate(leaf).map_err(|e| deny(&e.to_string()));
        }
        let token = match bearer_token(headers) {
            BearerToken::Present(token) => token,
            BearerToken::Missing => return Err(deny("no bearer token")),
            BearerToken::Malformed => return Err(deny("malformed Authorization header")),
        };
        match self.authenticator.authenticate(token).await {
            Ok(TokenOutcome::Authenticated(user)) => Ok(user),
            Ok(TokenOutcome::Rejected) => Err(deny("token rejected by TokenReview")),
            Err(e) => Err(review_failed("authentication", &e, path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::AuthMethod;

    #[test]
    fn identity_headers_are_stripped_before_anything_else() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-remote-user", "admin"),
            ("X-Remote-Group", "system:masters"),
            ("x-remote-extra-scopes", "all"),
            ("impersonate-user", "admin"),
            ("x-forwarded-user", "admin"),
            ("accept", "text/plain"),
        ] {
            headers.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_static(value));
        }
        let custom =
            IdentityHeaders { user: HeaderName::from_static("x-forwarded-user"), ..IdentityHeaders::default() };
        strip_identity_headers(&mut headers, Some(&custom));
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, vec!["accept"]);
    }

    #[test]
    fn identity_headers_carry_user_and_joined_groups() {
        let mut headers = HeaderMap::new();
        let user = AuthenticatedUser::new("alice", vec!["a".into(), "b".into()], AuthMethod::BearerToken);
        set_identity_headers(&mut headers, &IdentityHeaders::default(), &user);
        assert_eq!(headers["x-remote-user"], "alice");
        assert_eq!(headers["x-remote-groups"], "a|b");
        let mut headers = HeaderMap::new();
        let odd = AuthenticatedUser::new("bad\nname", vec![], AuthMethod::BearerToken);
        set_identity_headers(&mut headers, &IdentityHeaders::default(), &odd);
        assert!(headers.is_empty());
    }

    #[test]
    fn refusals_have_the_right_status_and_no_detail() {
        let r = unauthorized();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers()[WWW_AUTHENTICATE], "Bearer");
        let failed = review_failed("authentication", &ReviewError::Failed("secret detail".into()), "/metrics");
        assert_eq!(failed.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
