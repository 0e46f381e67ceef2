//! Authorization: which attributes a request is checked as (pure), static allow rules, and
//! SubjectAccessReview with separate allow and deny cache lifetimes (the cache's policy:
//! [`crate::cache`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::Method;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use crate::authn::{ReviewCounters, ReviewError};
use crate::cache::ReviewCache;
use crate::config::{ResourceAttributesConfig, StaticRule};
use crate::user::AuthenticatedUser;

/// The verb a request is authorized for, from its HTTP method (as kube-rbac-proxy maps it).
/// Other methods get their lowercased name, which no ordinary RBAC rule grants.
pub fn verb_for_method(method: &Method) -> String {
    match *method {
        Method::GET | Method::HEAD => "get".into(),
        Method::POST => "create".into(),
        Method::PUT => "update".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE => "delete".into(),
        ref other => other.as_str().to_ascii_lowercase(),
    }
}

/// A resource request, as SubjectAccessReview's `resourceAttributes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ResourceRequest {
    pub verb: String,
    pub namespace: Option<String>,
    pub group: Option<String>,
    pub version: Option<String>,
    pub resource: String,
    pub subresource: Option<String>,
    pub name: Option<String>,
}

/// What is being asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestAttributes {
    NonResource { path: String, verb: String },
    Resource(ResourceRequest),
}

impl RequestAttributes {
    /// The attributes of a request: the non-resource path by default, or the configured resource.
    pub fn of(method: &Method, path: &str, resource: Option<&ResourceAttributesConfig>) -> Self {
        let verb = verb_for_method(method);
        match resource {
            None => Self::NonResource { path: path.to_owned(), verb },
            Some(r) => Self::Resource(ResourceRequest {
                verb,
                namespace: r.namespace.clone(),
                group: r.api_group.clone(),
                version: r.api_version.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                name: r.name.clone(),
            }),
        }
    }

    pub fn verb(&self) -> &str {
        match self {
            Self::NonResource { verb, .. } => verb,
            Self::Resource(r) => &r.verb,
        }
    }

    /// The permission in words, for 403 bodies and logs: `get non-resource URL "/metrics"`.
    pub fn describe(&self) -> String {
        match self {
            Self::NonResource { path, verb } => format!("{verb} non-resource URL {path:?}"),
            Self::Resource(r) => {
                let mut what = r.resource.clone();
                if let Some(sub) = r.subresource.as_deref().filter(|s| !s.is_empty()) {
                    what = format!("{what}/{sub}");
                }
                if let Some(group) = r.group.as_deref().filter(|g| !g.is_empty()) {
                    what = format!("{what}.{group}");
                }
                let mut text = format!("{} {what}", r.verb);
                if let Some(name) = r.name.as_deref().filter(|n| !n.is_empty()) {
                    text = format!("{text} {name:?}");
                }
                match r.namespace.as_deref().filter(|n| !n.is_empty()) {
                    Some(ns) => format!("{text} in namespace {ns:?}"),
                    None => format!("{text} at the cluster scope"),
                }
            }
        }
    }

    fn to_spec(&self, user: &AuthenticatedUser) -> SubjectAccessReviewSpec {
        let mut spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            ..SubjectAccessReviewSpec::default()
        };
        match self {
            Self::NonResource { path, verb } => {
                spec.non_resource_attributes =
                    Some(NonResourceAttributes { path: Some(path.clone()), verb: Some(verb.clone()) });
            }
            Self::Resource(r) => {
                spec.resource_attributes = Some(ResourceAttributes {
                    verb: Some(r.verb.clone()),
                    namespace: r.namespace.clone(),
                    group: r.group.clone(),
                    version: r.version.clone(),
                    resource: Some(r.resource.clone()),
                    subresource: r.subresource.clone(),
                    name: r.name.clone(),
                    ..ResourceAttributes::default()
                });
            }
        }
        spec
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied; `reason` is the apiserver's (may be empty).
    Deny {
        reason: String,
    },
}

/// Cache sizes and lifetimes for authorization decisions.
#[derive(Debug, Clone)]
pub struct AuthzCacheOptions {
    pub allow_ttl: Duration,
    /// Shorter than `allow_ttl`, so a newly granted permission takes effect soon.
    pub deny_ttl: Duration,
    pub capacity: usize,
}

impl Default for AuthzCacheOptions {
    fn default() -> Self {
        Self { allow_ttl: Duration::from_secs(300), deny_ttl: Duration::from_secs(30), capacity: 4096 }
    }
}

type DecisionKey = (AuthenticatedUser, RequestAttributes);

/// Decides with static rules first, then SubjectAccessReview through a cache.
pub struct Authorizer {
    client: Client,
    static_rules: Vec<StaticRule>,
    options: AuthzCacheOptions,
    cache: ReviewCache<DecisionKey, Decision>,
    counters: Arc<ReviewCounters>,
}

impl Authorizer {
    pub fn new(
        client: Client,
        static_rules: Vec<StaticRule>,
        options: AuthzCacheOptions,
        counters: Arc<ReviewCounters>,
    ) -> Self {
        let cache = ReviewCache::new(options.capacity);
        Self { client, static_rules, options, cache, counters }
    }

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
        let key = (user.clone(), attributes.clone());
        self.cache.get_or_fetch(&key, ttl_of, || self.review(user, attributes)).await
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
    use super::*;
    use crate::user::AuthMethod;

    #[test]
    fn methods_map_to_verbs() {
        let cases = [
            (Method::GET, "get"),
            (Method::HEAD, "get"),
            (Method::POST, "create"),
            (Method::PUT, "update"),
            (Method::PATCH, "patch"),
            (Method::DELETE, "delete"),
            (Method::OPTIONS, "options"),
            (Method::from_bytes(b"PROPFIND").unwrap(), "propfind"),
        ];
        for (method, want) in cases {
            assert_eq!(verb_for_method(&method), want, "{method}");
        }
    }

    #[test]
    fn attributes_are_the_path_or_the_configured_resource() {
        let plain = RequestAttributes::of(&Method::GET, "/metrics", None);
        assert_eq!(plain, RequestAttributes::NonResource { path: "/metrics".into(), verb: "get".into() });
        assert_eq!(plain.describe(), r#"get non-resource URL "/metrics""#);

        let config = ResourceAttributesConfig {
            namespace: Some("monitoring".into()),
            api_version: Some("v1".into()),
            resource: "services".into(),
            subresource: Some("proxy".into()),
            name: Some("app".into()),
            ..ResourceAttributesConfig::default()
        };
        let resource = RequestAttributes::of(&Method::POST, "/ignored", Some(&config));
        assert_eq!(resource.verb(), "create");
        assert_eq!(resource.describe(), r#"create services/proxy "app" in namespace "monitoring""#);
        let cluster = ResourceAttributesConfig {
            api_group: Some("myownshell.io".into()),
            resource: "myownshells".into(),
            ..ResourceAttributesConfig::default()
        };
        let described = RequestAttributes::of(&Method::GET, "/", Some(&cluster)).describe();
        assert_eq!(described, "get myownshells.myownshell.io at the cluster scope");
    }

    #[test]
    fn review_specs_carry_the_whole_user() {
        let mut user = AuthenticatedUser::new("alice", vec!["g".into()], AuthMethod::BearerToken);
        user.uid = Some("u1".into());
        user.extra.insert("scopes".into(), vec!["s".into()]);
        let spec = RequestAttributes::of(&Method::GET, "/metrics", None).to_spec(&user);
        assert_eq!(spec.user.as_deref(), Some("alice"));
        assert_eq!(spec.uid.as_deref(), Some("u1"));
        assert_eq!(spec.groups, Some(vec!["g".to_owned()]));
        assert_eq!(spec.extra.unwrap()["scopes"], vec!["s".to_owned()]);
        let nra = spec.non_resource_attributes.unwrap();
        assert_eq!((nra.path.as_deref(), nra.verb.as_deref()), (Some("/metrics"), Some("get")));
        assert!(spec.resource_attributes.is_none());
    }
}
