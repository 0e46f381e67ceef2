//! Authorization: static allow rules, then SubjectAccessReview (of the request's
//! [`crate::attributes`]) with separate allow and deny cache lifetimes (the cache's policy:
//! [`crate::cache`]).

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::Client;
use kube::api::{Api, PostParams};
use moka::Equivalent;

use crate::attributes::RequestAttributes;
use crate::authn::{ReviewCounters, ReviewError};
use crate::borrowed::{AttributesRef, UserRef};
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

/// [`DecisionKey`] borrowed ([`crate::borrowed`]), to look a decision up without copying the
/// user or the request. It hashes as the owned key does: a derived `Hash` hashes the fields in
/// order, and each view as its owned form (`the_borrowed_key_is_the_owned_key` holds it to that).
#[derive(Hash)]
struct DecisionKeyRef<'a, G> {
    user: UserRef<'a, G>,
    attributes: AttributesRef<'a>,
}

impl<G: AsRef<str>> Equivalent<DecisionKey> for DecisionKeyRef<'_, G> {
    fn equivalent(&self, key: &DecisionKey) -> bool {
        self.user.is(&key.user) && self.attributes == key.attributes.borrowed()
    }
}

impl<G: AsRef<str>> DecisionKeyRef<'_, G> {
    fn to_key(&self) -> DecisionKey {
        DecisionKey { user: self.user.to_owned_user(), attributes: self.attributes.to_owned_attributes() }
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
        self.reviewed(DecisionKeyRef { user: user.borrowed(), attributes: attributes.borrowed() }).await
    }

    /// [`Authorizer::authorize`] for a user and a request held in the caller's own strings: a
    /// cached decision is found without copying them, and only a review sent copies them.
    pub async fn authorize_borrowed<G: AsRef<str> + Hash + Sync>(
        &self,
        user: UserRef<'_, G>,
        attributes: AttributesRef<'_>,
    ) -> Result<Decision, ReviewError> {
        if !self.static_rules.is_empty() {
            let (owned_user, owned_attributes) = (user.to_owned_user(), attributes.to_owned_attributes());
            if self.static_rules.iter().any(|rule| rule.allows(&owned_user, &owned_attributes)) {
                return Ok(Decision::Allow);
            }
        }
        self.reviewed(DecisionKeyRef { user, attributes }).await
    }

    /// The cached decision for `key`, or SubjectAccessReview's.
    async fn reviewed<G: AsRef<str> + Hash + Sync>(&self, key: DecisionKeyRef<'_, G>) -> Result<Decision, ReviewError> {
        let (allow_ttl, deny_ttl) = (self.options.allow_ttl, self.options.deny_ttl);
        let ttl_of = move |d: &Decision| match d {
            Decision::Allow => allow_ttl,
            Decision::Deny { .. } => deny_ttl,
        };
        let fetch = || async {
            let owned = key.to_key();
            self.review(&owned.user, &owned.attributes).await
        };
        self.cache.get_or_fetch_by(&key, DecisionKeyRef::to_key, ttl_of, fetch).await
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
    use std::borrow::Cow;
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
        let with_uid = AuthenticatedUser { uid: Some("u-1".into()), ..user("ada", &["dev"]) };
        let extra = [("pod".to_owned(), vec!["p".to_owned()])].into_iter().collect();
        let with_extra = AuthenticatedUser { extra, ..user("ada", &["dev"]) };
        let by_certificate = AuthenticatedUser { method: AuthMethod::ClientCertificate, ..user("ada", &["dev"]) };
        let keys = [
            (user("ada", &["dev"]), use_of("gpu", "team-a")),
            (user("ada", &["dev", "ops"]), use_of("gpu", "team-a")),
            (user("bob", &["dev"]), use_of("gpu", "team-a")),
            (user("ada", &["dev"]), use_of("gpu", "team-b")),
            (user("ada", &["dev"]), RequestAttributes::NonResource { path: "/metrics".into(), verb: "get".into() }),
            (with_uid, use_of("gpu", "team-a")),
            (with_extra, use_of("gpu", "team-a")),
            (by_certificate, use_of("gpu", "team-a")),
        ];
        for (i, (u, a)) in keys.iter().enumerate() {
            let borrowed = DecisionKeyRef { user: u.borrowed(), attributes: a.borrowed() };
            let owned = borrowed.to_key();
            assert_eq!(&owned.user, u, "key {i}: the user copied");
            assert_eq!(&owned.attributes, a, "key {i}: the request copied");
            // As the webhook holds a user: its strings borrowed from a review body.
            let groups: Vec<Cow<'_, str>> = u.groups.iter().map(|g| Cow::Borrowed(g.as_str())).collect();
            let user =
                UserRef { name: &u.name, uid: u.uid.as_deref(), groups: &groups, extra: &u.extra, method: u.method };
            let from_a_body = DecisionKeyRef { user, attributes: a.borrowed() };
            let hash = hasher.hash_one(&owned);
            assert_eq!(hasher.hash_one(&borrowed), hash, "key {i}: the borrowed key hashes apart");
            assert_eq!(hasher.hash_one(&from_a_body), hash, "key {i}: the key of borrowed strings hashes apart");
            for (j, (other_user, other_attributes)) in keys.iter().enumerate() {
                let other = DecisionKey { user: other_user.clone(), attributes: other_attributes.clone() };
                assert_eq!(borrowed.equivalent(&other), i == j, "key {i} against key {j}");
                assert_eq!(from_a_body.equivalent(&other), i == j, "key {i} of borrowed strings against key {j}");
            }
        }
    }
}
