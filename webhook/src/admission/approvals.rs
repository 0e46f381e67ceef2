//! Who may add and take back approvals of a shell (`spec.approvals`), and what the webhook
//! records in them. Pure.
//!
//! The list only grows by its approvers' own entries: an entry added by a request is stamped
//! with who made it (`by`), why they may (`via`) and when (`at`), whatever the request said
//! there ([`stamped`], the mutating webhook); the validating webhook then holds each added entry
//! to its class ([`refusal`]): its approver named by the class and not the shell's owner, a
//! reason where the class wants one. An entry is never changed, and only its author (or an
//! administrator) takes it back: the owner cannot remove a rejection. RBAC's `approve` verb on
//! the shell is asked by the HTTP layer after this (a SubjectAccessReview, as for a class's
//! `use`).

use myownshell_api::approval::{Approver, may_approve};
use myownshell_api::{Approval, ClassApproval};

use crate::review::request::UserInfo;

/// The entries appended to `old` in `new`, once the ones taken out are left aside: `new` must be
/// `old`'s remaining entries, in their order, then the added ones. `None` when it is not (an
/// entry changed, or moved).
fn appended<'a>(old: &[Approval], new: &'a [Approval]) -> Option<&'a [Approval]> {
    let kept: Vec<&Approval> = old.iter().filter(|o| new.contains(o)).collect();
    let in_place = new.len() >= kept.len() && kept.iter().zip(new).all(|(k, n)| *k == n);
    in_place.then(|| &new[kept.len()..])
}

/// `new`'s approvals as the webhook records them: each entry added to `old` stamped with who
/// made the request, why they may (as far as the class says; validation refuses otherwise) and
/// `now`. `None` when nothing was added.
pub fn stamped(
    old: &[Approval],
    new: &[Approval],
    user: &UserInfo<'_>,
    class: Option<&ClassApproval>,
    owner: Option<&str>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Option<Vec<Approval>> {
    let fresh = appended(old, new).filter(|fresh| !fresh.is_empty())?;
    let groups: Vec<String> = user.groups.iter().map(|g| g.to_string()).collect();
    let approver = Approver { name: &user.username, groups: &groups };
    let via = may_approve(class, approver, owner).ok();
    let mut all = new[..new.len() - fresh.len()].to_vec();
    all.extend(fresh.iter().map(|a| Approval {
        by: Some(user.username.to_string()),
        via: via.clone(),
        at: Some(now.clone()),
        ..a.clone()
    }));
    Some(all)
}

/// Why `user`'s change of a shell's approvals from `old` to `new` is refused, if it is: every
/// entry added must be theirs (as stamped), allowed by the class, with a reason where asked;
/// every entry gone must have been theirs (or `user` an administrator); none changed.
pub fn refusal(
    old: &[Approval],
    new: &[Approval],
    user: &UserInfo<'_>,
    admin: bool,
    class: Option<&ClassApproval>,
    owner: Option<&str>,
) -> Option<String> {
    let name = user.username.as_ref();
    let gone: Vec<&Approval> = old.iter().filter(|o| !new.contains(o)).collect();
    let Some(fresh) = appended(old, new) else {
        return Some(format!(
            "spec.approvals: an entry cannot be changed afterwards, nor moved: only added at the end, or taken \
             back by its author ({name} changed one)"
        ));
    };
    if let Some(theirs) = gone.iter().find(|o| o.by.as_deref() != Some(name)).filter(|_| !admin) {
        let by = theirs.by.as_deref().unwrap_or("nobody");
        return Some(format!("spec.approvals: only {by} takes back {by}'s word (it was given), not {name}"));
    }
    if fresh.is_empty() {
        return None;
    }
    let groups: Vec<String> = user.groups.iter().map(|g| g.to_string()).collect();
    let via = match may_approve(class, Approver { name, groups: &groups }, owner) {
        Ok(via) => via,
        Err(why) => return Some(format!("spec.approvals: {name} may not approve this shell: {why}")),
    };
    for entry in fresh {
        if entry.by.as_deref() != Some(name) || entry.via.as_deref() != Some(via.as_str()) || entry.at.is_none() {
            return Some(format!(
                "spec.approvals: an entry is given by whoever adds it, as the webhook records it ({name} added one \
                 by {})",
                entry.by.as_deref().unwrap_or("nobody")
            ));
        }
        let reason_asked = class.and_then(|c| c.reason_required).unwrap_or(false);
        if reason_asked && entry.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
            return Some("spec.approvals: its class wants a reason with every approval (--reason)".to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use myownshell_api::{ApprovalSubjects, Decision};

    use super::*;

    fn user<'a>(name: &'a str, groups: &[&'a str]) -> UserInfo<'a> {
        UserInfo {
            username: Cow::Borrowed(name),
            uid: None,
            groups: groups.iter().map(|g| Cow::Borrowed(*g)).collect(),
        }
    }

    fn class(reason: bool) -> ClassApproval {
        ClassApproval {
            required: Some(1),
            approvers: ApprovalSubjects { users: Some(vec!["bob".into()]), groups: Some(vec!["ops".into()]) },
            reason_required: Some(reason),
            valid_for: None,
        }
    }

    fn now() -> Time {
        Time(Timestamp::from_second(1_800_000_000).unwrap())
    }

    fn given(by: &str, via: &str, decision: Decision, reason: Option<&str>) -> Approval {
        Approval {
            by: Some(by.into()),
            via: Some(via.into()),
            at: Some(now()),
            decision,
            reason: reason.map(Into::into),
        }
    }

    fn asked(decision: Decision, reason: Option<&str>) -> Approval {
        Approval { decision, reason: reason.map(Into::into), ..Approval::default() }
    }

    #[test]
    fn added_entries_are_stamped_with_who_why_and_when() {
        let bob = user("bob", &["system:authenticated"]);
        let forged = Approval { by: Some("carol".into()), ..asked(Decision::Approve, None) };
        let stamped = stamped(&[], &[forged], &bob, Some(&class(false)), Some("alice"), &now()).unwrap();
        assert_eq!(stamped, vec![given("bob", "user", Decision::Approve, None)]);
        let dan = user("dan", &["ops"]);
        let old = stamped.clone();
        let mut new = old.clone();
        new.push(asked(Decision::Reject, Some("not today")));
        let both = super::stamped(&old, &new, &dan, Some(&class(false)), Some("alice"), &now()).unwrap();
        assert_eq!(both[1], given("dan", "group:ops", Decision::Reject, Some("not today")));
        assert_eq!(super::stamped(&old, &old, &dan, Some(&class(false)), Some("alice"), &now()), None, "nothing added");
    }

    #[test]
    fn who_may_add_and_take_back_what() {
        let bobs = given("bob", "user", Decision::Approve, None);
        let carols = given("carol", "user", Decision::Reject, Some("no"));
        let alice = user("alice", &["ops"]);
        let bob = user("bob", &[]);
        let eve = user("eve", &[]);
        let classed = class(false);
        let with_reason = class(true);
        type Case<'a> =
            (&'a str, Vec<Approval>, Vec<Approval>, &'a UserInfo<'a>, bool, &'a ClassApproval, Option<&'a str>);
        let cases: Vec<Case> = vec![
            ("bob approves", vec![], vec![bobs.clone()], &bob, false, &classed, None),
            (
                "the owner approves her own, though in the group",
                vec![],
                vec![given("alice", "group:ops", Decision::Approve, None)],
                &alice,
                false,
                &classed,
                Some("alice owns it"),
            ),
            (
                "a stranger approves",
                vec![],
                vec![given("eve", "user", Decision::Approve, None)],
                &eve,
                false,
                &classed,
                Some("eve is not among its class's approvers"),
            ),
            (
                "bob adds an entry in carol's name",
                vec![],
                vec![given("carol", "user", Decision::Approve, None)],
                &bob,
                false,
                &classed,
                Some("an entry is given by whoever adds it"),
            ),
            (
                "bob without a reason the class wants",
                vec![],
                vec![bobs.clone()],
                &bob,
                false,
                &with_reason,
                Some("wants a reason"),
            ),
            (
                "bob with one",
                vec![],
                vec![given("bob", "user", Decision::Approve, Some("on call"))],
                &bob,
                false,
                &with_reason,
                None,
            ),
            (
                "the owner removes carol's rejection",
                vec![carols.clone()],
                vec![],
                &alice,
                false,
                &classed,
                Some("only carol takes back carol's word"),
            ),
            ("bob takes his own back", vec![bobs.clone()], vec![], &bob, false, &classed, None),
            ("an administrator removes any", vec![carols.clone()], vec![], &eve, true, &classed, None),
            (
                "bob changes his approval into carol's",
                vec![bobs.clone()],
                vec![given("carol", "user", Decision::Approve, None)],
                &bob,
                false,
                &classed,
                Some("an entry is given by whoever adds it"),
            ),
            ("nothing changes", vec![bobs.clone()], vec![bobs.clone()], &eve, false, &classed, None),
        ];
        for (what, old, new, who, admin, class, want) in cases {
            let got = refusal(&old, &new, who, admin, Some(class), Some("alice"));
            match (want, &got) {
                (None, None) => {}
                (Some(part), Some(message)) if message.contains(part) => {}
                _ => panic!("{what}: got {got:?}, want {want:?}"),
            }
        }
    }
}
