//! Who may connect to a shell, as a pure function of the shell's spec and the asker: its owner,
//! those it is shared with, and (break-glass) the administrators. The connect webhook decides
//! every connection into a shell's pods with it (`webhook/src/connect/access.rs`, which also
//! holds the decision table the tests ask of the real apiserver), and the gateway asks it again
//! of every open terminal, so that access lost ends a terminal too.

use crate::MyOwnShellSpec;

/// Why a user may connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The shell predates owners: anyone RBAC allows.
    NoOwner,
    /// The user is the owner.
    Owner,
    /// The user is in `sharedWith.users`.
    SharedUser,
    /// The user is in a group of `sharedWith.groups`.
    SharedGroup,
    /// The user is an administrator (a group of `--admin-groups`): a break-glass connection,
    /// recorded under the administrator's own name.
    Admin,
}

/// Whom a shell lets in, as its spec says.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sharing<'a> {
    /// `spec.owner`; `None` for shells made before owners existed.
    pub owner: Option<&'a str>,
    /// `spec.ownerUID`, when the authenticator gave one (empty is none).
    pub owner_uid: Option<&'a str>,
    /// `spec.sharedWith.users`.
    pub users: &'a [String],
    /// `spec.sharedWith.groups`.
    pub groups: &'a [String],
}

impl<'a> Sharing<'a> {
    /// What `spec` says.
    pub fn of(spec: &'a MyOwnShellSpec) -> Self {
        let shared = spec.shared_with.as_ref();
        Self {
            owner: spec.owner.as_deref(),
            owner_uid: spec.owner_uid.as_deref().filter(|u| !u.is_empty()),
            users: shared.and_then(|s| s.users.as_deref()).unwrap_or_default(),
            groups: shared.and_then(|s| s.groups.as_deref()).unwrap_or_default(),
        }
    }
}

/// Who asks: their name, uid (empty is none) and groups.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a, G> {
    /// The user name.
    pub name: &'a str,
    /// The uid the authenticator gave, if any.
    pub uid: Option<&'a str>,
    /// Their groups.
    pub groups: &'a [G],
}

impl<G: AsRef<str>> Asker<'_, G> {
    fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g.as_ref() == group)
    }
}

/// Whether `user` is the owner: the same name, and the same uid where both have one.
pub fn is_owner<G>(shell: &Sharing<'_>, user: &Asker<'_, G>) -> bool {
    let same_uid = match (shell.owner_uid.filter(|u| !u.is_empty()), user.uid.filter(|u| !u.is_empty())) {
        (Some(recorded), Some(asking)) => recorded == asking,
        _ => true,
    };
    shell.owner == Some(user.name) && same_uid
}

/// Whether `user` may connect to the shell, and why: the owner and those the shell is shared
/// with, and (break-glass) the members of `admin_groups`.
pub fn may_connect<G: AsRef<str>, A: AsRef<str>>(
    shell: &Sharing<'_>,
    user: &Asker<'_, G>,
    admin_groups: &[A],
) -> Option<Grant> {
    if shell.owner.is_none() {
        Some(Grant::NoOwner)
    } else if is_owner(shell, user) {
        Some(Grant::Owner)
    } else if shell.users.iter().any(|u| u == user.name) {
        Some(Grant::SharedUser)
    } else if shell.groups.iter().any(|g| user.in_group(g)) {
        Some(Grant::SharedGroup)
    } else if admin_groups.iter().any(|g| user.in_group(g.as_ref())) {
        Some(Grant::Admin)
    } else {
        None
    }
}
