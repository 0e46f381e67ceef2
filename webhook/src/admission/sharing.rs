//! `spec.sharedWith`: the rules its lists must meet, and the warnings for shares that open a
//! shell wider than they seem to (to anyone who may edit the namespace).

use myownshell_api::{MyOwnShellSpec, SharedWith};

use super::problem::Problem;

/// The most names each list may hold (the CRD schema's bound too).
pub const MAX_NAMES: usize = 64;
/// The longest name (the CRD schema's bound too).
pub const MAX_NAME_LEN: usize = 1024;

/// Identities that no request bears that anyone signed: sharing with them means nothing or
/// means everyone.
const UNSIGNED: [(&str, &str); 2] = [("users", "system:anonymous"), ("groups", "system:unauthenticated")];

/// Every rule `shared` breaks.
pub fn check(shared: &SharedWith, problems: &mut Vec<Problem>) {
    for (list, names) in [("users", &shared.users), ("groups", &shared.groups)] {
        let names = names.as_deref().unwrap_or_default();
        let field = format!("spec.sharedWith.{list}");
        if names.len() > MAX_NAMES {
            problems.push(Problem::new(
                "sharedWith",
                field.clone(),
                format!("must hold at most {MAX_NAMES} names, got {}", names.len()),
            ));
        }
        for (i, name) in names.iter().enumerate() {
            let field = format!("{field}[{i}]");
            let why = if name.trim().is_empty() {
                Some("must be a name, not blank".to_owned())
            } else if name.trim() != name {
                Some("must not start or end with white space".to_owned())
            } else if let Some(c) = name.chars().find(|c| c.is_control()) {
                Some(format!("must not hold a control character (U+{:04X})", u32::from(c)))
            } else if name.len() > MAX_NAME_LEN {
                Some(format!("must be at most {MAX_NAME_LEN} characters long, got {}", name.len()))
            } else if UNSIGNED.contains(&(list, name.as_str())) {
                Some("would let in requests nobody signed; name the users or groups who may connect".to_owned())
            } else {
                None
            };
            if let Some(why) = why {
                problems.push(Problem::new("sharedWith", field, format!("{why}, got {name:?}")));
            }
        }
    }
}

/// Warnings for a spec whose owner or shares reach further than they seem: anyone who may edit
/// a namespace can act as its ServiceAccounts (the built-in `edit` role may impersonate them).
pub fn warnings(spec: &MyOwnShellSpec, namespace: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    // `system:serviceaccount:<namespace>:<name>`, and the group of them all.
    let own_account = |user: &str| {
        user.strip_prefix("system:serviceaccount:")
            .and_then(|r| r.strip_prefix(namespace))
            .is_some_and(|r| r.starts_with(':'))
    };
    let own_accounts = |group: &str| group.strip_prefix("system:serviceaccounts:") == Some(namespace);
    if let Some(owner) = spec.owner.as_deref().filter(|o| own_account(o)) {
        warnings.push(format!(
            "spec.owner: the shell belongs to {owner}, a ServiceAccount of this namespace: anyone who may edit the namespace can act as it and connect"
        ));
    }
    let Some(shared) = &spec.shared_with else { return warnings };
    for (i, user) in shared.users.iter().flatten().enumerate() {
        if own_account(user) {
            warnings.push(format!(
                "spec.sharedWith.users[{i}]: {user} is a ServiceAccount of this namespace: anyone who may edit the namespace can act as it and connect"
            ));
        }
    }
    for (i, group) in shared.groups.iter().flatten().enumerate() {
        let reach = match group.as_str() {
            "system:authenticated" => Some("anyone whom RBAC lets connect to pods in this namespace"),
            "system:serviceaccounts" => Some("every ServiceAccount, which anyone who may edit a namespace can act as"),
            g if own_accounts(g) => {
                Some("the ServiceAccounts of this namespace, which anyone who may edit it can act as")
            }
            _ => None,
        };
        if let Some(reach) = reach {
            warnings.push(format!("spec.sharedWith.groups[{i}]: {group} opens the shell to {reach}"));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(users: &[&str], groups: &[&str]) -> SharedWith {
        let list = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect());
        SharedWith { users: list(users), groups: list(groups) }
    }

    #[test]
    fn rules_of_the_lists() {
        let too_many: Vec<String> = (0..65).map(|i| format!("user{i}")).collect();
        let too_many: Vec<&str> = too_many.iter().map(String::as_str).collect();
        let long = "x".repeat(1025);
        let cases: Vec<(SharedWith, Vec<&str>)> = vec![
            (shared(&["bob", "carol@example.com"], &["devs", "system:authenticated"]), vec![]),
            (shared(&[""], &[]), vec!["spec.sharedWith.users[0]: must be a name, not blank, got \"\""]),
            (shared(&[], &["devs", "  "]), vec!["spec.sharedWith.groups[1]: must be a name, not blank, got \"  \""]),
            (
                shared(&[" bob"], &[]),
                vec!["spec.sharedWith.users[0]: must not start or end with white space, got \" bob\""],
            ),
            (shared(&["b\u{7}ob"], &[]), vec!["spec.sharedWith.users[0]: must not hold a control character (U+0007)"]),
            (
                shared(&[long.as_str()], &[]),
                vec!["spec.sharedWith.users[0]: must be at most 1024 characters long, got 1025"],
            ),
            (shared(&too_many, &[]), vec!["spec.sharedWith.users: must hold at most 64 names, got 65"]),
            (
                shared(&["system:anonymous"], &["system:unauthenticated"]),
                vec!["users[0]: would let in requests nobody signed", "groups[0]: would let in requests nobody signed"],
            ),
            (shared(&["system:unauthenticated"], &["system:anonymous"]), vec![]),
        ];
        for (shared, want) in cases {
            let mut problems = Vec::new();
            check(&shared, &mut problems);
            let got: Vec<String> = problems.iter().map(ToString::to_string).collect();
            assert_eq!(got.len(), want.len(), "{shared:?}: {got:?}");
            for (got, want) in got.iter().zip(&want) {
                assert!(got.contains(want), "{got} lacks {want}");
            }
        }
    }

    #[test]
    fn warnings_for_shares_wider_than_they_seem() {
        let spec = |owner: &str, users: &[&str], groups: &[&str]| MyOwnShellSpec {
            owner: Some(owner.to_owned()),
            shared_with: Some(shared(users, groups)),
            ..MyOwnShellSpec::default()
        };
        let cases: Vec<(MyOwnShellSpec, Vec<&str>)> = vec![
            (spec("alice", &["bob", "system:serviceaccount:other:ci"], &["devs"]), vec![]),
            (
                spec("system:serviceaccount:team:ci", &[], &[]),
                vec!["spec.owner: the shell belongs to system:serviceaccount:team:ci"],
            ),
            (
                spec("alice", &["system:serviceaccount:team:ci"], &[]),
                vec!["spec.sharedWith.users[0]: system:serviceaccount:team:ci is a ServiceAccount"],
            ),
            (
                spec(
                    "alice",
                    &[],
                    &[
                        "system:authenticated",
                        "system:serviceaccounts",
                        "system:serviceaccounts:team",
                        "system:serviceaccounts:other",
                    ],
                ),
                vec![
                    "groups[0]: system:authenticated opens",
                    "groups[1]: system:serviceaccounts opens",
                    "groups[2]: system:serviceaccounts:team opens",
                ],
            ),
        ];
        for (spec, want) in cases {
            let got = warnings(&spec, "team");
            assert_eq!(got.len(), want.len(), "{got:?}");
            for (got, want) in got.iter().zip(&want) {
                assert!(got.contains(want), "{got} lacks {want}");
            }
        }
    }
}
