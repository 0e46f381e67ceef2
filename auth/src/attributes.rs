//! What a request is authorized as (pure): a non-resource URL and a verb from its HTTP method,
//! as kube-rbac-proxy does by default, or a configured resource (`config`); and how that reads
//! in a SubjectAccessReview and in a 403.

use http::Method;
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, ResourceAttributes, SubjectAccessReviewSpec};

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
    /// From the HTTP method ([`verb_for_method`]), as for a non-resource request.
    pub verb: String,
    /// None (or empty) for a cluster-scoped resource.
    pub namespace: Option<String>,
    /// The API group; none or empty for the core group.
    pub group: Option<String>,
    /// The API version, e.g. `v1` (RBAC rules do not name versions, so RBAC ignores it).
    pub version: Option<String>,
    /// The resource type, plural as in RBAC rules: `services`.
    pub resource: String,
    /// E.g. `proxy` for `services/proxy`.
    pub subresource: Option<String>,
    /// The one object asked about; none means the resource as a whole.
    pub name: Option<String>,
}

/// What is being asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestAttributes {
    /// A URL path that is not a Kubernetes resource (kube-rbac-proxy's default), granted by RBAC
    /// rules with `nonResourceURLs`.
    NonResource {
        /// The request's URL path, without the query.
        path: String,
        /// From the HTTP method ([`verb_for_method`]).
        verb: String,
    },
    /// The resource `--config-file` names (`resourceAttributes`), whatever the path.
    Resource(ResourceRequest),
}

impl RequestAttributes {
    /// A request for the non-resource URL `path` (what kube-rbac-proxy checks by default).
    pub fn non_resource(method: &Method, path: &str) -> Self {
        Self::NonResource { path: path.to_owned(), verb: verb_for_method(method) }
    }

    /// The verb, for either kind of request (each request's debug log line shows it).
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

    pub(crate) fn to_spec(&self, user: &AuthenticatedUser) -> SubjectAccessReviewSpec {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ResourceAttributesConfig;
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
        let plain = RequestAttributes::non_resource(&Method::GET, "/metrics");
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
        let resource = config.request(&Method::POST);
        assert_eq!(resource.verb(), "create");
        assert_eq!(resource.describe(), r#"create services/proxy "app" in namespace "monitoring""#);
        let cluster = ResourceAttributesConfig {
            api_group: Some("myownshell.io".into()),
            resource: "myownshells".into(),
            ..ResourceAttributesConfig::default()
        };
        let described = cluster.request(&Method::GET).describe();
        assert_eq!(described, "get myownshells.myownshell.io at the cluster scope");
    }

    #[test]
    fn review_specs_carry_the_whole_user() {
        let mut user = AuthenticatedUser::new("alice", vec!["g".into()], AuthMethod::BearerToken);
        user.uid = Some("u1".into());
        user.extra.insert("scopes".into(), vec!["s".into()]);
        let spec = RequestAttributes::non_resource(&Method::GET, "/metrics").to_spec(&user);
        assert_eq!(spec.user.as_deref(), Some("alice"));
        assert_eq!(spec.uid.as_deref(), Some("u1"));
        assert_eq!(spec.groups, Some(vec!["g".to_owned()]));
        assert_eq!(spec.extra.unwrap()["scopes"], vec!["s".to_owned()]);
        let nra = spec.non_resource_attributes.unwrap();
        assert_eq!((nra.path.as_deref(), nra.verb.as_deref()), (Some("/metrics"), Some("get")));
        assert!(spec.resource_attributes.is_none());
    }
}
