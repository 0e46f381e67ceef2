//! `spec.home`: its rules (a size that is a quantity within the operator's bounds, a class name
//! the apiserver takes, one pod per home, and on update no shrinking, no change of class, no
//! removal) and its defaults (the operator's size, `onDelete: Delete`).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use myownshell_api::quantity::{self, parse};
use myownshell_api::{Home, HomeOnDelete, MyOwnShellSpec, names};
use serde_json::json;

use super::policy::Policy;
use super::problem::Problem;

/// Whether `name` is a DNS subdomain, as StorageClass names must be.
fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

/// Every rule `spec`'s home breaks (none without a home); `old` is the spec before an update.
pub fn check(spec: &MyOwnShellSpec, old: Option<&MyOwnShellSpec>, policy: &Policy, problems: &mut Vec<Problem>) {
    let old_home = old.and_then(|o| o.home.as_ref());
    let Some(home) = &spec.home else {
        if old_home.is_some() {
            problems.push(Problem::new(
                "home",
                "spec.home",
                "cannot be removed: the shell's files are in it (delete the shell instead: spec.home.onDelete says whether its home goes too)".to_owned(),
            ));
        }
        return;
    };
    if let Some(size) = spec.size.filter(|s| *s > 1) {
        problems.push(Problem::new(
            "home",
            "spec.size",
            format!("must be 0 or 1 when spec.home is set (a home is one ReadWriteOnce volume, which one pod mounts), got {size}"),
        ));
    }
    if let Some(size) = &home.size {
        check_size(size, policy, problems);
    }
    if let Some(class) = home.storage_class_name.as_deref().filter(|c| !is_dns_subdomain(c)) {
        problems.push(Problem::new(
            "home",
            "spec.home.storageClassName",
            format!("must be a StorageClass name (lowercase letters, digits, '-' and '.', at most 253), got {class:?}"),
        ));
    }
    if let Some(old) = old_home {
        check_change(old, home, problems);
    }
}

/// The rule a shell's name breaks if it has a home: its claim, `myownshell-home-<name>`, must
/// be a valid object name too.
pub fn check_name(name: &str, spec: &MyOwnShellSpec) -> Option<Problem> {
    (spec.home.is_some() && name.len() > names::MAX_NAME_WITH_HOME).then(|| {
        Problem::new(
            "home",
            "metadata.name",
            format!(
                "must be at most {} characters for a shell with spec.home (its claim is named {}<name>, at most 253), got {}",
                names::MAX_NAME_WITH_HOME,
                names::HOME_CLAIM_PREFIX,
                name.len()
            ),
        )
    })
}

fn check_size(size: &Quantity, policy: &Policy, problems: &mut Vec<Problem>) {
    let field = "spec.home.size";
    match parse(&size.0) {
        Err(why) => problems.push(Problem::new(
            "home",
            field,
            format!("must be a quantity such as 1Gi ({why}), got {:?}", size.0),
        )),
        Ok(q) if q.millis() <= 0 => {
            problems.push(Problem::new("home", field, format!("must be more than 0, got {:?}", size.0)));
        }
        Ok(q) if parse(&policy.home_max_size).is_ok_and(|max| q.millis() > max.millis()) => {
            problems.push(Problem::new(
                "home",
                field,
                format!("must be at most {} (the operator's --home-max-size), got {:?}", policy.home_max_size, size.0),
            ))
        }
        Ok(_) => {}
    }
}

/// The size a home has: its own, or the default the webhook wrote.
fn size_of<'h>(home: &'h Home, policy: &'h Policy) -> &'h str {
    home.size.as_ref().map_or(policy.home_default_size.as_str(), |q| q.0.as_str())
}

fn check_change(old: &Home, new: &Home, problems: &mut Vec<Problem>) {
    let (before, after) = (old.size.as_ref().map(|q| q.0.as_str()), new.size.as_ref().map(|q| q.0.as_str()));
    if let (Some(before), Some(after)) = (before, after)
        && let (Ok(b), Ok(a)) = (parse(before), parse(after))
        && a.millis() < b.millis()
    {
        problems.push(Problem::new(
            "home",
            "spec.home.size",
            format!("cannot shrink (from {before} to {after}): a volume only grows"),
        ));
    }
    if old.storage_class_name != new.storage_class_name {
        let name =
            |c: &Option<String>| c.as_deref().map_or("unset (the default class)".to_owned(), |c| format!("{c:?}"));
        problems.push(Problem::new(
            "home",
            "spec.home.storageClassName",
            format!(
                "cannot change once the shell has a home (from {} to {}): a claim's class is fixed",
                name(&old.storage_class_name),
                name(&new.storage_class_name)
            ),
        ));
    }
}

/// The patch operations that default `spec`'s home: the operator's size and `onDelete:
/// Delete`, where unset.
pub fn default_operations(spec: Option<&MyOwnShellSpec>, policy: &Policy) -> Vec<PatchOperation> {
    let Some(home) = spec.and_then(|s| s.home.as_ref()) else { return Vec::new() };
    let add = |field: &str, value| {
        PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(["spec", "home", field]), value })
    };
    let mut operations = Vec::new();
    if home.size.is_none() {
        operations.push(add("size", json!(quantity::canonical(size_of(home, policy)))));
    }
    if home.on_delete.is_none() {
        operations.push(add("onDelete", json!(HomeOnDelete::Delete)));
    }
    operations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(size: Option<i32>, home: Option<Home>) -> MyOwnShellSpec {
        MyOwnShellSpec { size, home, ..MyOwnShellSpec::default() }
    }

    fn home(size: Option<&str>, class: Option<&str>) -> Home {
        Home { size: size.map(|s| Quantity(s.into())), storage_class_name: class.map(str::to_owned), on_delete: None }
    }

    #[test]
    fn the_home_rules() {
        let policy = Policy::default();
        let rows: Vec<(&str, MyOwnShellSpec, Option<MyOwnShellSpec>, &[&str])> = vec![
            ("no home", spec(Some(3), None), None, &[]),
            ("a home", spec(Some(1), Some(home(Some("5Gi"), Some("local-path")))), None, &[]),
            ("a home, paused", spec(Some(0), Some(home(None, None))), None, &[]),
            (
                "two pods",
                spec(Some(2), Some(home(None, None))),
                None,
                &["spec.size: must be 0 or 1 when spec.home is set"],
            ),
            (
                "not a quantity",
                spec(None, Some(home(Some("lots"), None))),
                None,
                &["spec.home.size: must be a quantity such as 1Gi"],
            ),
            (
                "nothing",
                spec(None, Some(home(Some("0"), None))),
                None,
                &["spec.home.size: must be more than 0, got \"0\""],
            ),
            (
                "too big",
                spec(None, Some(home(Some("11Gi"), None))),
                None,
                &["spec.home.size: must be at most 10Gi (the operator's --home-max-size), got \"11Gi\""],
            ),
            (
                "a bad class",
                spec(None, Some(home(None, Some("Fast_SSD")))),
                None,
                &["spec.home.storageClassName: must be a StorageClass name"],
            ),
            ("grown", spec(None, Some(home(Some("2Gi"), None))), Some(spec(None, Some(home(Some("1Gi"), None)))), &[]),
            (
                "shrunk",
                spec(None, Some(home(Some("512Mi"), None))),
                Some(spec(None, Some(home(Some("1Gi"), None)))),
                &["spec.home.size: cannot shrink (from 1Gi to 512Mi): a volume only grows"],
            ),
            (
                "class changed",
                spec(None, Some(home(None, Some("b")))),
                Some(spec(None, Some(home(None, Some("a"))))),
                &["spec.home.storageClassName: cannot change once the shell has a home (from \"a\" to \"b\")"],
            ),
            (
                "class set later",
                spec(None, Some(home(None, Some("b")))),
                Some(spec(None, Some(home(None, None)))),
                &["from unset (the default class) to \"b\""],
            ),
            ("removed", spec(None, None), Some(spec(None, Some(home(None, None)))), &["spec.home: cannot be removed"]),
            ("added later", spec(Some(1), Some(home(None, None))), Some(spec(Some(1), None)), &[]),
        ];
        for (what, new, old, want) in rows {
            let mut problems = Vec::new();
            check(&new, old.as_ref(), &policy, &mut problems);
            let said: Vec<String> = problems.iter().map(Problem::to_string).collect();
            assert_eq!(said.len(), want.len(), "{what}: {said:?}");
            for (said, want) in said.iter().zip(want) {
                assert!(said.contains(want), "{what}: {said:?} should say {want:?}");
            }
        }
    }

    #[test]
    fn a_long_name_leaves_room_for_the_claims() {
        let with_home = spec(None, Some(home(None, None)));
        assert_eq!(check_name(&"a".repeat(237), &with_home), None);
        let problem = check_name(&"a".repeat(238), &with_home).unwrap().to_string();
        assert!(
            problem.starts_with("metadata.name: must be at most 237 characters for a shell with spec.home"),
            "{problem}"
        );
        assert_eq!(check_name(&"a".repeat(253), &spec(None, None)), None, "no home, no limit");
    }

    #[test]
    fn defaults_fill_what_a_home_leaves_unset() {
        let policy = Policy::default();
        assert!(default_operations(Some(&spec(None, None)), &policy).is_empty());
        let ops = serde_json::to_value(default_operations(Some(&spec(None, Some(home(None, None)))), &policy)).unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "add", "path": "/spec/home/size", "value": "1Gi"},
                {"op": "add", "path": "/spec/home/onDelete", "value": "Delete"}
            ])
        );
        let full = Home { on_delete: Some(HomeOnDelete::Retain), ..home(Some("2Gi"), None) };
        assert!(default_operations(Some(&spec(None, Some(full))), &policy).is_empty());
    }
}
