//! Authorization: static allow rules, then SubjectAccessReview (of the request's
//! [`crate::attributes`]) with separate allow and deny cache lifetimes (the cache's policy:
//! [`crate::cache`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::Client;
use kube::api::{Api, PostParams};
use moka::Equivalent;

use crate::attributes::RequestAttributes;
use crate::authn::{ReviewCounters, ReviewError};
use crate::cache::ReviewCache;
use crate::config::StaticRule;
use crate::user::AuthenticatedUser;

/// What authorization answered for one user and request (both answers are cached).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// By a static rule or by SubjectAccessReview.
    Allow,
    /// Denied; `reason` is the apiserver's (may be empty).
    Deny {
        /// Goes to the log only: the 403 names the missing permission instead.
        reason: String,
    },
}

/// Cache sizes and lifetimes for authorization decisions.
#[derive(Debug, Clone)]
pub struct AuthzCacheOptions {
    /// How long an allow is trusted without asking again: a revoked permission can go on
    /// working this long.
    pub allow_ttl: Duration,
    /// Shorter than `allow_ttl`, so a newly granted permission takes effect soon.
    pub deny_ttl: Duration,
    /// The most (user, request) decisions kept, allows and denies together.
    pub capacity: usize,
}

impl Default for AuthzCacheOptions {
    fn default() -> Self {
        Self { allow_ttl: Duration::from_secs(300), deny_ttl: Duration::from_secs(30), capacity: 4096 }
    }
}

/// What a decision is cached under: who asked, for what.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DecisionKey {
    user: AuthenticatedUser,
    attributes: RequestAttributes,
}

/// [`DecisionKey`] borrowed, to look a decision up without copying the user or the request.
/// It hashes as the owned key does: a derived `Hash` hashes the fields in order, and a
/// reference as what it points to (`the_borrowed_key_is_the_owned_key` holds it to that).
#[derive(Hash)]
struct DecisionKeyRef<'a> {
    user: &'a AuthenticatedUser,
    attributes: &'a RequestAttributes,
}

impl Equivalent<DecisionKey> for DecisionKeyRef<'_> {
    fn equivalent(&self, key: &DecisionKey) -> bool {
        *self.user == key.user && *self.attributes == key.attributes
    }
}

impl DecisionKeyRef<'_> {
    fn to_key(&self) -> DecisionKey {
        DecisionKey { user: self.user.clone(), attributes: self.attributes.clone() }
    }
}

/// Decides with static rules first, then SubjectAccessReview through a cache.
pub struct Authorizer {
    client: Client,
    static_rules: Vec<StaticRule>,
    options: AuthzCacheOptions,
    cache: ReviewCache<DecisionKey, Decision>,
    counters: Arc<ReviewCounters>,
}

impl Authorizer {
    /// Asks the apiserver through `client` for what `static_rules` do not allow; each review
    /// sent is counted in `counters`.
    pub fn new(
        client: Client,
        static_rules: Vec<StaticRule>,
        options: AuthzCacheOptions,
        counters: Arc<ReviewCounters>,
    ) -> Self {
        let cache = ReviewCache::new(options.capacity);
        Self { client, static_rules, options, cache, counters }
    }

    /// Whether `user` may make a request with `attributes`. A matching static rule allows at
    /// once (nothing cached or counted); otherwise the cached or a new SubjectAccessReview
    /// decides. An error is no answer; callers refuse the request.
    pub async fn authorize(
        &self,
        user: &AuthenticatedUser,
        attributes: &RequestAttributes,
    ) -> Result<Decision, ReviewError> {
        if self.static_rules.iter().any(|rule| rule.allows(user, attributes)) {
            return Ok(Decision::Allow);
        }
        let (allow_ttl, deny_ttl) = (self.options.allow_ttl, self.options.deny_ttl);
        let ttl_of = move |d: &Decision| match d {
            Decision::Allow => allow_ttl,
            Decision::Deny { .. } => deny_ttl,
        };
        let key = DecisionKeyRef { user, attributes };
        self.cache.get_or_fetch_by(&key, DecisionKeyRef::to_key, ttl_of, || self.review(user, attributes)).await
    }

    async fn review(&self, user: &AuthenticatedUser, attributes: &RequestAttributes) -> Result<Decision, ReviewError> {
        self.counters.subject_access_reviews.fetch_add(1, Ordering::Relaxed);
        let review = SubjectAccessReview { spec: attributes.to_spec(user), ..SubjectAccessReview::default() };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(ReviewError::from_kube)?;
        let status = reviewed.status.unwrap_or_default();
        if status.allowed {
            return Ok(Decision::Allow);
        }
        Ok(Decision::Deny { reason: status.reason.unwrap_or_default() })
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;
    use crate::attributes::ResourceRequest;
    use crate::user::AuthMethod;

    fn user(name: &str, groups: &[&str]) -> AuthenticatedUser {
        AuthenticatedUser::new(name, groups.iter().map(|g| (*g).to_owned()).collect(), AuthMethod::BearerToken)
    }

    fn use_of(class: &str, namespace: &str) -> RequestAttributes {
        RequestAttributes::Resource(ResourceRequest {
            verb: "use".into(),
            namespace: Some(namespace.into()),
            group: Some("myownshell.io".into()),
            resource: "myownshellclasses".into(),
            name: Some(class.into()),
            ..ResourceRequest::default()
        })
    }

    #[test]
    fn the_borrowed_key_is_the_owned_key() {
        let hasher = std::collections::hash_map::RandomState::new();
        let keys = [
            (user("ada", &["dev"]), use_of("gpu", "team-a")),
            (user("ada", &["dev", "ops"]), use_of("gpu", "team-a")),
            (user("bob", &["dev"]), use_of("gpu", "team-a")),
            (user("ada", &["dev"]), use_of("gpu", "team-b")),
            (user("ada", &["dev"]), RequestAttributes::NonResource { path: "/metrics".into(), verb: "get".into() }),
        ];
        for (i, (u, a)) in keys.iter().enumerate() {
            let borrowed = DecisionKeyRef { user: u, attributes: a };
            let owned = borrowed.to_key();
            assert_eq!(hasher.hash_one(&borrowed), hasher.hash_one(&owned), "key {i}: the two hash apart");
            for (j, (other_user, other_attributes)) in keys.iter().enumerate() {
                let other = DecisionKey { user: other_user.clone(), attributes: other_attributes.clone() };
                assert_eq!(borrowed.equivalent(&other), i == j, "key {i} against key {j}");
            }
        }
    }
}
