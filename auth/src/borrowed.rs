//! A user and a request borrowed from whatever strings the caller holds them in
//! ([`UserRef`], [`AttributesRef`]), to look up a cached decision without copying them: each
//! hashes and compares as its owned form ([`AuthenticatedUser`], [`RequestAttributes`]) does,
//! and becomes one only when a decision is not cached and a review must be sent.
//!
//! Why: the webhook asks whether a requester may use a class at every review of a shell of a
//! class, with the user and the namespace in strings borrowed from the AdmissionReview. Copying
//! them into the owned forms took 11 allocations a review, and an allocation costs about 0.1 µs
//! on a busy 2-core webhook (`cargo xtask bench webhook`'s class row).
//!
//! A derived `Hash` hashes the fields in order, a `&str`, a `String` and a `Cow<str>` alike, a
//! slice or a `Vec` as its length and then each element, an `Option` and an enum as their
//! variant and then what it holds. So a view with the owned form's fields, in the same order
//! and the same variants, hashes as the owned form (`a_view_hashes_and_compares_as_its_owned_form`
//! holds them to it).

use std::collections::BTreeMap;

use crate::attributes::{RequestAttributes, ResourceRequest};
use crate::user::{AuthMethod, AuthenticatedUser};

/// An [`AuthenticatedUser`], borrowed; `G` is how the caller holds a group's name, and must hash
/// as the `str` it holds (`String`, `&str` and `Cow<str>` do). A `G` that hashed otherwise would
/// only make every lookup miss: [`UserRef::is`] compares the strings.
#[derive(Debug, Hash)]
pub struct UserRef<'a, G> {
    /// The user's name.
    pub name: &'a str,
    /// The uid, if any.
    pub uid: Option<&'a str>,
    /// The groups.
    pub groups: &'a [G],
    /// The extras.
    pub extra: &'a BTreeMap<String, Vec<String>>,
    /// How the user proved who they are.
    pub method: AuthMethod,
}

/// No extras, for callers that have none.
pub static NO_EXTRA: BTreeMap<String, Vec<String>> = BTreeMap::new();

impl<G: AsRef<str>> UserRef<'_, G> {
    /// Whether this is `user`, field for field.
    pub fn is(&self, user: &AuthenticatedUser) -> bool {
        self.name == user.name
            && self.uid == user.uid.as_deref()
            && self.groups.len() == user.groups.len()
            && self.groups.iter().zip(&user.groups).all(|(a, b)| a.as_ref() == b)
            && *self.extra == user.extra
            && self.method == user.method
    }

    /// The owned user.
    pub fn to_owned_user(&self) -> AuthenticatedUser {
        AuthenticatedUser {
            name: self.name.to_owned(),
            uid: self.uid.map(str::to_owned),
            groups: self.groups.iter().map(|g| g.as_ref().to_owned()).collect(),
            extra: self.extra.clone(),
            method: self.method,
        }
    }
}

impl AuthenticatedUser {
    /// This user, borrowed.
    pub fn borrowed(&self) -> UserRef<'_, String> {
        UserRef {
            name: &self.name,
            uid: self.uid.as_deref(),
            groups: &self.groups,
            extra: &self.extra,
            method: self.method,
        }
    }
}

/// A [`ResourceRequest`], borrowed: the same fields in the same order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ResourceRef<'a> {
    /// The verb.
    pub verb: &'a str,
    /// The namespace.
    pub namespace: Option<&'a str>,
    /// The API group.
    pub group: Option<&'a str>,
    /// The API version.
    pub version: Option<&'a str>,
    /// The resource type, plural.
    pub resource: &'a str,
    /// The subresource.
    pub subresource: Option<&'a str>,
    /// The one object asked about.
    pub name: Option<&'a str>,
}

/// A [`RequestAttributes`], borrowed: the same variants in the same order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributesRef<'a> {
    /// A non-resource URL.
    NonResource {
        /// The URL path.
        path: &'a str,
        /// The verb.
        verb: &'a str,
    },
    /// A resource.
    Resource(ResourceRef<'a>),
}

impl AttributesRef<'_> {
    /// The owned request.
    pub fn to_owned_attributes(&self) -> RequestAttributes {
        let owned = |s: Option<&str>| s.map(str::to_owned);
        match *self {
            AttributesRef::NonResource { path, verb } => {
                RequestAttributes::NonResource { path: path.to_owned(), verb: verb.to_owned() }
            }
            AttributesRef::Resource(r) => RequestAttributes::Resource(ResourceRequest {
                verb: r.verb.to_owned(),
                namespace: owned(r.namespace),
                group: owned(r.group),
                version: owned(r.version),
                resource: r.resource.to_owned(),
                subresource: owned(r.subresource),
                name: owned(r.name),
            }),
        }
    }
}

impl RequestAttributes {
    /// This request, borrowed.
    pub fn borrowed(&self) -> AttributesRef<'_> {
        match self {
            RequestAttributes::NonResource { path, verb } => AttributesRef::NonResource { path, verb },
            RequestAttributes::Resource(r) => AttributesRef::Resource(ResourceRef {
                verb: &r.verb,
                namespace: r.namespace.as_deref(),
                group: r.group.as_deref(),
                version: r.version.as_deref(),
                resource: &r.resource,
                subresource: r.subresource.as_deref(),
                name: r.name.as_deref(),
            }),
        }
    }
}
