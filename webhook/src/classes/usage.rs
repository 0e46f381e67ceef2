//! Who may use a class: RBAC's `use` verb on `myownshellclasses/<name>`, asked of the apiserver
//! by SubjectAccessReview for the requester in the shell's namespace (as PodSecurityPolicy's
//! `use` was: a RoleBinding grants a class in one namespace, a ClusterRoleBinding everywhere),
//! cached like the metrics proxy's reviews (`--class-use-allow-cache-ttl`, 5 minutes;
//! `--class-use-deny-cache-ttl`, 30 seconds); and when it is asked ([`asks_use`]): at creation,
//! when a shell takes a class, and at every start. A shell already running is never stopped for a
//! revoked grant; its next start is refused.
//!
//! The default class needs no grant: whoever may create shells may create them of the default
//! class (as every user may claim volumes of the default StorageClass), which is how
//! `myownshell-editor` gets the default class and no other.

use std::borrow::Cow;
use std::sync::Arc;

use myownshell_api::{MyOwnShellSpec, names};
use myownshell_auth::authn::{ReviewCounters, ReviewError};
use myownshell_auth::authz::{Authorizer, AuthzCacheOptions, Decision};
use myownshell_auth::borrowed::{AttributesRef, ResourceRef};

use crate::review::request::{Operation, UserInfo};

/// What the validating webhook allowed on condition that RBAC lets the requester: the `use` of
/// a class, or the `approve` of a shell (an approval added to it). Its strings are borrowed from
/// the review where they can be: it is asked at every review of a shell of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseCheck<'a> {
    /// The class (for `use`) or the shell (for `approve`).
    pub class: Cow<'a, str>,
    /// Whether it asks `approve` on the shell rather than `use` on the class.
    pub approve: bool,
    /// The shell's namespace.
    pub namespace: Cow<'a, str>,
    /// The requester, as the review named them.
    pub user: UserInfo<'a>,
}

impl<'a> UseCheck<'a> {
    /// The `approve` of the shell `request` is about, by its requester.
    pub fn approve(request: &crate::review::request::Request<'a>) -> Self {
        UseCheck {
            class: request.name.clone(),
            approve: true,
            namespace: request.namespace.clone(),
            user: request.user_info.clone(),
        }
    }
}

/// Whether the shell is being started: running now where it was stopped or paused before, or
/// started again (`spec.lifetime.restartedAt` moved).
fn starts(new: &MyOwnShellSpec, old: &MyOwnShellSpec) -> bool {
    let runs = |s: &MyOwnShellSpec| s.stopped != Some(true) && s.size.is_none_or(|n| n > 0);
    let restarted = |s: &MyOwnShellSpec| s.lifetime.as_ref().and_then(|l| l.restarted_at.clone());
    (runs(new) && !runs(old)) || (runs(new) && restarted(new) != restarted(old))
}

/// The class whose `use` this request needs, if any: the shell's class at creation, when it
/// takes one, and when it starts.
pub fn asks_use<'s>(operation: Operation, new: &'s MyOwnShellSpec, old: Option<&MyOwnShellSpec>) -> Option<&'s str> {
    let class = new.class_name.as_deref()?;
    match (operation, old) {
        (Operation::Create, _) => Some(class),
        (Operation::Update, Some(old)) if old.class_name.as_deref() != Some(class) || starts(new, old) => Some(class),
        _ => None,
    }
}

/// Asks SubjectAccessReview whether users may `use` classes, through a cache.
pub struct ClassUsage {
    authorizer: Authorizer,
}

impl ClassUsage {
    /// Ask through `client`, trusting an allow for `allow_ttl` and a denial for `deny_ttl`.
    pub fn new(client: kube::Client, allow_ttl: std::time::Duration, deny_ttl: std::time::Duration) -> Self {
        let counters = Arc::new(ReviewCounters::default());
        let options = AuthzCacheOptions { allow_ttl, deny_ttl, ..AuthzCacheOptions::default() };
        Self { authorizer: Authorizer::new(client, Vec::new(), options, counters) }
    }

    /// Whether `check.user` may use `check.class` (or approve the shell); an error is no answer
    /// (the caller refuses). Nothing is copied unless the answer is not cached.
    pub async fn allows(&self, check: &UseCheck<'_>) -> Result<bool, ReviewError> {
        let (verb, resource) = match check.approve {
            true => (names::APPROVE_VERB, names::PLURAL),
            false => (names::USE_VERB, names::CLASS_PLURAL),
        };
        let attributes = AttributesRef::Resource(ResourceRef {
            verb,
            namespace: Some(&check.namespace),
            group: Some(names::GROUP),
            resource,
            name: Some(&check.class),
            ..ResourceRef::default()
        });
        let decision = self.authorizer.authorize_borrowed(check.user.borrowed(), attributes).await?;
        Ok(matches!(decision, Decision::Allow))
    }
}

/// The refusal of `check`, in words.
pub fn refusal(check: &UseCheck<'_>) -> String {
    if check.approve {
        return format!(
            "{} may not approve MyOwnShell {:?} in namespace {}: RBAC must grant the verb \"approve\" on \
             myownshells/{} (the myownshell-approver ClusterRole)",
            check.user.username, check.class, check.namespace, check.class
        );
    }
    format!(
        "{} may not use MyOwnShellClass {:?} in namespace {}: RBAC must grant the verb \"use\" on \
         myownshellclasses/{} (kubectl myownshell classes lists the classes you may use)",
        check.user.username, check.class, check.namespace, check.class
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use myownshell_api::Lifetime;

    use super::*;

    fn spec(class: Option<&str>, stopped: Option<bool>, size: Option<i32>, restarted: Option<i64>) -> MyOwnShellSpec {
        MyOwnShellSpec {
            class_name: class.map(Into::into),
            stopped,
            size,
            lifetime: restarted.map(|s| Lifetime {
                restarted_at: Some(Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap_or_default())),
                ..Lifetime::default()
            }),
            ..MyOwnShellSpec::default()
        }
    }

    #[test]
    fn use_is_asked_at_creation_when_taking_a_class_and_at_every_start() {
        // (what, operation, new, old, asked)
        type Case = (&'static str, Operation, MyOwnShellSpec, Option<MyOwnShellSpec>, Option<&'static str>);
        let small = Some("small");
        let cases: Vec<Case> = vec![
            ("created", Operation::Create, spec(small, None, None, None), None, small),
            ("created without a class", Operation::Create, spec(None, None, None, None), None, None),
            (
                "an edit while running",
                Operation::Update,
                spec(small, None, Some(2), None),
                Some(spec(small, None, Some(1), None)),
                None,
            ),
            (
                "stopped",
                Operation::Update,
                spec(small, Some(true), None, None),
                Some(spec(small, None, None, None)),
                None,
            ),
            (
                "started",
                Operation::Update,
                spec(small, Some(false), None, None),
                Some(spec(small, Some(true), None, None)),
                small,
            ),
            (
                "unpaused",
                Operation::Update,
                spec(small, None, Some(1), None),
                Some(spec(small, None, Some(0), None)),
                small,
            ),
            (
                "paused",
                Operation::Update,
                spec(small, None, Some(0), None),
                Some(spec(small, None, Some(1), None)),
                None,
            ),
            (
                "restarted",
                Operation::Update,
                spec(small, None, None, Some(2)),
                Some(spec(small, None, None, Some(1))),
                small,
            ),
            (
                "takes a class",
                Operation::Update,
                spec(small, None, None, None),
                Some(spec(None, None, None, None)),
                small,
            ),
            (
                "a stopped edit",
                Operation::Update,
                spec(small, Some(true), Some(2), None),
                Some(spec(small, Some(true), Some(1), None)),
                None,
            ),
        ];
        for (what, operation, new, old, want) in &cases {
            assert_eq!(asks_use(*operation, new, old.as_ref()), *want, "{what}");
        }
    }
}
