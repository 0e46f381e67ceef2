//! `--config-file`, in kube-rbac-proxy's format (the parts this proxy implements):
//!
//! ```yaml
//! authorization:
//!   # Authorize a resource request instead of the non-resource URL path.
//!   resourceAttributes:
//!     namespace: monitoring
//!     apiGroup: ""
//!     apiVersion: v1
//!     resource: services
//!     subresource: proxy
//!     name: my-service
//!   # Requests that are allowed without a SubjectAccessReview.
//!   static:
//!     - user: { name: "system:serviceaccount:monitoring:prometheus" }
//!       verb: get
//!       path: /metrics
//!       resourceRequest: false
//! ```
//! Unknown fields are rejected, so a typo does not silently widen or narrow access.

use std::path::Path;

use serde::Deserialize;

use http::Method;

use crate::attributes::{RequestAttributes, ResourceRequest, verb_for_method};
use crate::paths::{PathPattern, PathPatternError};
use crate::user::AuthenticatedUser;

/// Why a config file cannot be used. `path` is the file (the `origin` given to
/// [`ProxyConfig::parse`]), so the message says which file and which field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// Not YAML, or not this format: an unknown field, a wrong type, `resource` missing.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The YAML parser's message, with the field and position.
        message: String,
    },
    /// A static rule's `path` is not an exact path or a prefix ending in `*`.
    #[error("{path}: authorization.static[{index}].path: {source}")]
    StaticPath {
        /// The file.
        path: String,
        /// The rule's position in `authorization.static`, from 0.
        index: usize,
        /// What is wrong with the pattern.
        source: PathPatternError,
    },
    /// `authorization.resourceAttributes.resource` is empty: no resource to authorize as.
    #[error("{path}: authorization.resourceAttributes.resource: must not be empty")]
    EmptyResource {
        /// The file.
        path: String,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
/// A whole config file. An empty file, or one without `authorization`, is the default:
/// non-resource URL checks and no static rules, as without `--config-file`.
pub struct ProxyConfig {
    /// `authorization`: what each request is authorized as, and what needs no review.
    #[serde(default)]
    pub authorization: AuthorizationConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
/// The `authorization` section.
pub struct AuthorizationConfig {
    /// `resourceAttributes`: when set, every request, whatever its path, is authorized as this
    /// resource; when not, as the non-resource URL of its path.
    pub resource_attributes: Option<ResourceAttributesConfig>,
    /// `static`: requests allowed without a SubjectAccessReview, checked first (a request no
    /// rule allows is still reviewed; static rules never deny).
    #[serde(default, rename = "static")]
    pub static_rules: Vec<StaticRule>,
}

/// The resource every request is authorized as (the verb comes from the HTTP method).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceAttributesConfig {
    /// `namespace`: where the resource is; unset for a cluster-scoped one.
    pub namespace: Option<String>,
    /// `apiGroup`: unset or `""` for the core group.
    pub api_group: Option<String>,
    /// `apiVersion`, e.g. `v1` (passed on to the review; RBAC rules do not name versions).
    pub api_version: Option<String>,
    /// `resource`: the type, plural as in RBAC rules (`services`); required and not empty.
    pub resource: String,
    /// `subresource`, e.g. `proxy`.
    pub subresource: Option<String>,
    /// `name`: the one object asked about; unset asks about the resource as a whole.
    pub name: Option<String>,
}

impl ResourceAttributesConfig {
    /// A request made with `method`, authorized as this resource.
    pub fn request(&self, method: &Method) -> RequestAttributes {
        RequestAttributes::Resource(ResourceRequest {
            verb: verb_for_method(method),
            namespace: self.namespace.clone(),
            group: self.api_group.clone(),
            version: self.api_version.clone(),
            resource: self.resource.clone(),
            subresource: self.subresource.clone(),
            name: self.name.clone(),
        })
    }
}

/// A static rule's `user`: who the rule is for. Both unset: anyone authenticated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StaticUser {
    /// Empty: any user.
    pub name: Option<String>,
    /// Empty: any groups; otherwise the user must be in at least one.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// A request allowed without asking the apiserver. Unset fields match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StaticRule {
    /// `user`: the `name` and `groups` the caller must have.
    #[serde(default)]
    pub user: StaticUser,
    /// `verb`, as derived from the HTTP method (`get`, `create`, …).
    pub verb: Option<String>,
    /// For non-resource requests: exact, or a prefix ending in `*`.
    pub path: Option<String>,
    /// `resourceRequest`: `true` for a rule about `resourceAttributes` requests (matched by the
    /// fields below), `false` (the default) for one about non-resource paths (matched by
    /// `path`). A rule never matches the other kind.
    #[serde(default)]
    pub resource_request: bool,
    /// `namespace` of a resource request; `""` matches a cluster-scoped one.
    pub namespace: Option<String>,
    /// `apiGroup` of a resource request; `""` is the core group.
    pub api_group: Option<String>,
    /// `resource` of a resource request, e.g. `services`.
    pub resource: Option<String>,
    /// `subresource` of a resource request; `""` matches one without.
    pub subresource: Option<String>,
    /// `name` of a resource request; `""` matches one without.
    pub name: Option<String>,
}

fn field_matches(rule: &Option<String>, actual: &str) -> bool {
    rule.as_deref().is_none_or(|r| r == actual)
}

impl StaticRule {
    /// Whether this rule allows `user` to make a request with `attributes`.
    pub fn allows(&self, user: &AuthenticatedUser, attributes: &RequestAttributes) -> bool {
        if !field_matches(&self.user.name, &user.name) {
            return false;
        }
        if !self.user.groups.is_empty() && !self.user.groups.iter().any(|g| user.groups.contains(g)) {
            return false;
        }
        match attributes {
            RequestAttributes::NonResource { path, verb } => {
                !self.resource_request
                    && field_matches(&self.verb, verb)
                    && self.path.as_deref().is_none_or(|p| p.parse::<PathPattern>().is_ok_and(|p| p.matches(path)))
            }
            RequestAttributes::Resource(r) => {
                self.resource_request
                    && field_matches(&self.verb, &r.verb)
                    && field_matches(&self.namespace, r.namespace.as_deref().unwrap_or_default())
                    && field_matches(&self.api_group, r.group.as_deref().unwrap_or_default())
                    && field_matches(&self.resource, &r.resource)
                    && field_matches(&self.subresource, r.subresource.as_deref().unwrap_or_default())
                    && field_matches(&self.name, r.name.as_deref().unwrap_or_default())
            }
        }
    }
}

impl ProxyConfig {
    /// Parse and check a config document; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Self = if text.trim().is_empty() {
            Self::default()
        } else {
            serde_saphyr::from_str(text)
                .map_err(|e| ConfigError::Parse { path: origin.to_owned(), message: e.to_string() })?
        };
        for (index, rule) in config.authorization.static_rules.iter().enumerate() {
            if let Some(p) = &rule.path {
                p.parse::<PathPattern>().map_err(|source| ConfigError::StaticPath {
                    path: origin.to_owned(),
                    index,
                    source,
                })?;
            }
        }
        if config.authorization.resource_attributes.as_ref().is_some_and(|r| r.resource.trim().is_empty()) {
            return Err(ConfigError::EmptyResource { path: origin.to_owned() });
        }
        Ok(config)
    }

    /// Read and [`parse`](Self::parse) the file at `path` (`--config-file`).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: origin.clone(), source })?;
        Self::parse(&text, &origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::AuthMethod;

    #[test]
    fn kube_rbac_proxy_configs_parse() {
        let text = r#"
authorization:
  resourceAttributes:
    namespace: monitoring
    apiVersion: v1
    resource: services
    subresource: proxy
    name: my-service
  static:
    - user:
        name: alice
      verb: get
      path: /metrics
"#;
        let config = ProxyConfig::parse(text, "cfg").unwrap();
        let attrs = config.authorization.resource_attributes.unwrap();
        assert_eq!(attrs.namespace.as_deref(), Some("monitoring"));
        assert_eq!(attrs.resource, "services");
        assert_eq!(attrs.subresource.as_deref(), Some("proxy"));
        assert_eq!(config.authorization.static_rules.len(), 1);
        assert_eq!(ProxyConfig::parse("", "cfg").unwrap(), ProxyConfig::default());
    }

    #[test]
    fn bad_configs_name_the_field() {
        let cases = [
            ("authorization:\n  resourceAttribute:\n    resource: x\n", "resourceAttribute"),
            ("authorization:\n  static:\n    - path: metrics\n", "authorization.static[0].path"),
            ("authorization:\n  resourceAttributes:\n    resource: \"\"\n", "resourceAttributes.resource"),
            ("authorization:\n  resourceAttributes:\n    namespace: x\n", "resource"),
            ("authorization: [1, 2]\n", "cfg"),
        ];
        for (text, want) in cases {
            let err = ProxyConfig::parse(text, "cfg").unwrap_err().to_string();
            assert!(err.contains(want) && err.starts_with("cfg"), "{text}: {err}");
        }
    }

    fn user(name: &str, groups: &[&str]) -> AuthenticatedUser {
        AuthenticatedUser::new(name, groups.iter().map(|g| (*g).to_owned()).collect(), AuthMethod::BearerToken)
    }

    fn non_resource(path: &str, verb: &str) -> RequestAttributes {
        RequestAttributes::NonResource { path: path.into(), verb: verb.into() }
    }

    #[test]
    fn static_rules_match_user_groups_verb_and_path() {
        let rule = |name: Option<&str>, groups: &[&str], verb: Option<&str>, path: Option<&str>| StaticRule {
            user: StaticUser { name: name.map(Into::into), groups: groups.iter().map(|g| (*g).to_owned()).collect() },
            verb: verb.map(Into::into),
            path: path.map(Into::into),
            ..StaticRule::default()
        };
        let alice = user("alice", &["team"]);
        let cases = [
            (rule(Some("alice"), &[], Some("get"), Some("/metrics")), non_resource("/metrics", "get"), true),
            (rule(Some("alice"), &[], Some("get"), Some("/metrics")), non_resource("/metrics", "create"), false),
            (rule(Some("alice"), &[], Some("get"), Some("/metrics")), non_resource("/other", "get"), false),
            (rule(Some("bob"), &[], None, None), non_resource("/metrics", "get"), false),
            (rule(None, &["team"], None, Some("/debug/*")), non_resource("/debug/x", "get"), true),
            (rule(None, &["other"], None, None), non_resource("/metrics", "get"), false),
            (rule(None, &[], None, None), non_resource("/anything", "delete"), true),
        ];
        for (i, (rule, attrs, want)) in cases.into_iter().enumerate() {
            assert_eq!(rule.allows(&alice, &attrs), want, "case {i}");
        }
        // A non-resource rule never allows a resource request, and vice versa.
        let resource = RequestAttributes::Resource(ResourceRequest {
            verb: "get".into(),
            resource: "services".into(),
            ..ResourceRequest::default()
        });
        assert!(!rule(None, &[], None, None).allows(&alice, &resource));
        let resource_rule =
            StaticRule { resource_request: true, resource: Some("services".into()), ..StaticRule::default() };
        assert!(resource_rule.allows(&alice, &resource));
        assert!(!resource_rule.allows(&alice, &non_resource("/metrics", "get")));
    }
}
