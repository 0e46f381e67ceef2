//! The authenticated caller, as the layer puts it into request extensions.

use std::collections::BTreeMap;

/// How the caller proved who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// A client certificate signed by `--client-ca-file` (user = CN, groups = O).
    ClientCertificate,
    /// A bearer token that TokenReview accepted.
    BearerToken,
}

/// Who made the request. Handlers behind the layer read it with
/// `Extension<AuthenticatedUser>` (axum) or `req.extensions().get::<AuthenticatedUser>()`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthenticatedUser {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
    pub method: AuthMethod,
}

impl AuthenticatedUser {
    pub fn new(name: impl Into<String>, groups: Vec<String>, method: AuthMethod) -> Self {
        Self { name: name.into(), uid: None, groups, extra: BTreeMap::new(), method }
    }
}
