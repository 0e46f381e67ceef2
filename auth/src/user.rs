//! The authenticated caller, as the layer puts it into request extensions.

use std::collections::BTreeMap;

/// How the caller proved who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// A client certificate signed by `--client-ca-file` (user = CN, groups = O).
    ClientCertificate,
    /// A bearer token that TokenReview accepted.
    BearerToken,
    /// An ID token of the configured OpenID Connect issuer, verified by its keys
    /// ([`crate::oidc`]): what kube-apiserver's JWT authenticator takes for the same issuer.
    OidcIdToken,
}

/// Who made the request. Handlers behind the layer read it with
/// `Extension<AuthenticatedUser>` (axum) or `req.extensions().get::<AuthenticatedUser>()`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthenticatedUser {
    /// The user name RBAC subjects name: TokenReview's `username`
    /// (`system:serviceaccount:<namespace>:<name>` for a service account), or the certificate's CN.
    pub name: String,
    /// TokenReview's `uid`, if it gave one; never for a certificate.
    pub uid: Option<String>,
    /// TokenReview's groups, or the certificate's O values.
    pub groups: Vec<String>,
    /// TokenReview's `extra` (e.g. the pod a service account token is bound to), passed on to
    /// SubjectAccessReview.
    pub extra: BTreeMap<String, Vec<String>>,
    /// Certificate or token.
    pub method: AuthMethod,
}

impl AuthenticatedUser {
    /// A user with no uid and no extra, as a client certificate gives.
    pub fn new(name: impl Into<String>, groups: Vec<String>, method: AuthMethod) -> Self {
        Self { name: name.into(), uid: None, groups, extra: BTreeMap::new(), method }
    }
}
