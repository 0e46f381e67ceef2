//! Who asks: the requester of an admission review as the apiserver authenticated (or
//! impersonated) them. Its own module because both the admission rules and the access decisions
//! (`crate::connect::access`) read it, and neither should depend on the other for it.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};

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
    #[serde(default, borrow, deserialize_with = "borrowed_list")]
    pub groups: Vec<Cow<'a, str>>,
}

impl UserInfo<'_> {
    /// The user as SubjectAccessReview takes them (without extras, which the review does not
    /// decode: an authorizer that grants by extras then refuses, never allows more).
    pub fn authenticated(&self) -> myownshell_auth::user::AuthenticatedUser {
        self.borrowed().to_owned_user()
    }

    /// [`UserInfo::authenticated`], borrowed: to look up a cached review without copying the user.
    pub fn borrowed(&self) -> myownshell_auth::borrowed::UserRef<'_, Cow<'_, str>> {
        myownshell_auth::borrowed::UserRef {
            name: &self.username,
            uid: self.uid(),
            groups: &self.groups,
            extra: &myownshell_auth::borrowed::NO_EXTRA,
            method: myownshell_auth::user::AuthMethod::BearerToken,
        }
    }

    /// The uid, if the authenticator gave a non-empty one.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref().filter(|u| !u.is_empty())
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// A list of strings, each borrowed from the body unless it holds an escape: serde's `borrow`
/// reaches a `Cow` field, not the `Cow`s in a list, which it copies one by one (every review's
/// `userInfo.groups`, a shell's finalizers).
pub(crate) fn borrowed_list<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Vec<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    // Same layout, so the list is collected in place.
    Ok(Vec::<Text<'a>>::deserialize(d)?.into_iter().map(|Text(text)| text).collect())
}

/// [`borrowed_list`] of a list that may be absent or null.
pub(crate) fn borrowed_optional_list<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<Cow<'a, str>>>, D::Error> {
    #[derive(Deserialize)]
    struct List<'a>(#[serde(borrow, deserialize_with = "borrowed_list")] Vec<Cow<'a, str>>);
    Ok(Option::<List<'a>>::deserialize(d)?.map(|List(list)| list))
}
