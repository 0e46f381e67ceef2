//! A shell is its owner's: nobody changes `spec.owner` (a shell is handed over by its new owner
//! creating it again), and only the owner, or a member of an administrators' group the operator
//! names (`--admin-groups`), changes anything else in the spec. Otherwise a namespace editor would
//! add himself to `sharedWith`, or plant a command in the owner's next pod. Metadata changes
//! (labels, finalizers) and deletion stay with RBAC.

use myownshell_api::MyOwnShellSpec;

use crate::connect::access::{self, ShellAccess};
use crate::review::request::{Request, UserInfo};
use crate::review::response::Response;

/// The refusal of an update from `old` to `new` by `user`, if it is refused.
pub fn refusal(
    old: &MyOwnShellSpec,
    new: &MyOwnShellSpec,
    user: &UserInfo<'_>,
    admin_groups: &[String],
) -> Option<String> {
    if old.owner != new.owner || old.owner_uid != new.owner_uid {
        let was = old.owner.as_deref().map_or_else(|| "none".to_owned(), |o| format!("{o:?}"));
        return Some(format!(
            "spec.owner: cannot be changed (it is {was}): to hand the shell over, its new owner creates it again"
        ));
    }
    // Approvals are an approver's to add (`super::approvals` holds each to its class), so a
    // change of them alone is not the owner's to make or refuse here.
    let without_approvals = |s: &MyOwnShellSpec| MyOwnShellSpec { approvals: None, ..s.clone() };
    if old == new
        || without_approvals(old) == without_approvals(new)
        || access::may_change_spec(old.owner.as_deref(), old.owner_uid.as_deref(), user, admin_groups)
    {
        return None;
    }
    Some(spec_refusal(old.owner.as_deref().unwrap_or_default(), user, admin_groups))
}

/// The refusal of `kubectl scale` of `shell` by `user`, if it is refused. `None` for `shell`:
/// the webhook does not know the shell (yet), so it cannot tell whose it is.
pub fn scale_refusal(shell: Option<&ShellAccess>, user: &UserInfo<'_>, admin_groups: &[String]) -> Option<String> {
    let Some(shell) = shell else {
        return Some(
            "cannot tell whose shell this is yet (the webhook has not seen it): try again in a moment".to_owned(),
        );
    };
    if access::may_change_spec(shell.owner.as_deref(), shell.owner_uid.as_deref(), user, admin_groups) {
        return None;
    }
    Some(spec_refusal(shell.owner.as_deref().unwrap_or_default(), user, admin_groups))
}

fn spec_refusal(owner: &str, user: &UserInfo<'_>, admin_groups: &[String]) -> String {
    let admins = match admin_groups {
        [] => String::new(),
        groups => format!(" (or a member of {})", groups.join(", ")),
    };
    format!("spec: only the shell's owner {owner}{admins} may change it, not {}", user.username)
}

/// `message` as a 403 answer to `request`.
pub fn forbid<'a>(request: &Request<'a>, message: String) -> Response<'a> {
    Response::deny(request.uid.clone(), 403, "Forbidden", message)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use myownshell_api::SharedWith;

    use super::*;

    fn user(name: &str) -> UserInfo<'_> {
        UserInfo { username: Cow::Borrowed(name), uid: None, groups: vec![Cow::Borrowed("system:authenticated")] }
    }

    fn spec(owner: Option<&str>, size: i32, shared: &[&str]) -> MyOwnShellSpec {
        MyOwnShellSpec {
            size: Some(size),
            owner: owner.map(Into::into),
            shared_with: Some(SharedWith {
                users: Some(shared.iter().map(|s| (*s).to_owned()).collect()),
                groups: None,
            }),
            ..MyOwnShellSpec::default()
        }
    }

    #[test]
    fn who_may_change_what() {
        let admins = vec!["platform-admins".to_owned()];
        let alice = Some("alice");
        let cases: Vec<(&str, MyOwnShellSpec, MyOwnShellSpec, UserInfo<'_>, Option<&str>)> = vec![
            ("the owner resizes", spec(alice, 1, &[]), spec(alice, 2, &[]), user("alice"), None),
            ("the owner shares", spec(alice, 1, &[]), spec(alice, 1, &["bob"]), user("alice"), None),
            (
                "an editor shares with himself",
                spec(alice, 1, &[]),
                spec(alice, 1, &["bob"]),
                user("bob"),
                Some("spec: only the shell's owner alice (or a member of platform-admins) may change it, not bob"),
            ),
            (
                "a shared user changes the spec",
                spec(alice, 1, &["bob"]),
                spec(alice, 3, &["bob"]),
                user("bob"),
                Some("not bob"),
            ),
            ("anyone leaves the spec as it is", spec(alice, 1, &[]), spec(alice, 1, &[]), user("bob"), None),
            (
                "an administrator",
                spec(alice, 1, &[]),
                spec(alice, 5, &[]),
                UserInfo { groups: vec![Cow::Borrowed("platform-admins")], ..user("root") },
                None,
            ),
            (
                "the owner changes the owner",
                spec(alice, 1, &[]),
                spec(Some("bob"), 1, &[]),
                user("alice"),
                Some("spec.owner: cannot be changed (it is \"alice\")"),
            ),
            (
                "an administrator changes the owner",
                spec(alice, 1, &[]),
                spec(Some("bob"), 1, &[]),
                UserInfo { groups: vec![Cow::Borrowed("platform-admins")], ..user("root") },
                Some("spec.owner: cannot be changed"),
            ),
            (
                "an owner given to an old shell",
                spec(None, 1, &[]),
                spec(Some("bob"), 1, &[]),
                user("bob"),
                Some("spec.owner: cannot be changed (it is none)"),
            ),
            ("an old shell: anyone, as before", spec(None, 1, &[]), spec(None, 4, &[]), user("bob"), None),
        ];
        for (what, old, new, user, want) in cases {
            let got = refusal(&old, &new, &user, &admins);
            match (got.as_deref(), want) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(got.contains(want), "{what}: {got}"),
                (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn scaling_is_a_spec_change() {
        let shell = ShellAccess { name: "web".into(), owner: Some("alice".into()), ..ShellAccess::default() };
        assert_eq!(scale_refusal(Some(&shell), &user("alice"), &[]), None);
        assert_eq!(
            scale_refusal(Some(&shell), &user("bob"), &[]).as_deref(),
            Some("spec: only the shell's owner alice may change it, not bob")
        );
        assert!(scale_refusal(None, &user("alice"), &[]).is_some_and(|r| r.contains("try again")));
    }
}
