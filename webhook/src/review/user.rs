//! Who asks: the requester of an admission review as the apiserver authenticated (or
//! impersonated) them. Its own module because both the admission rules and the access decisions
//! (`crate::connect::access`) read it, and neither should depend on the other for it.

use std::borrow::Cow;

use serde::Deserialize;

/// `request.userInfo`: the requester as the apiserver authenticated (or impersonated) them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct UserInfo<'a> {
    /// The user name (`alice@example.com`, `system:serviceaccount:team:ci`).
    #[serde(default, borrow)]
    pub username: Cow<'a, str>,
    /// The uid the authenticator gave, if any (none for client certificates).
    #[serde(default, borrow)]
    pub uid: Option<Cow<'a, str>>,
    /// The user's groups.
    #[serde(default, borrow)]
    pub groups: Vec<Cow<'a, str>>,
}

impl UserInfo<'_> {
    /// The uid, if the authenticator gave a non-empty one.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref().filter(|u| !u.is_empty())
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}
