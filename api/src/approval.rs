//! Whether a shell has the approval its class asks for ([`verdict`], pure): the controller holds
//! a shell at no pods until it has, the webhook checks who may add an approval ([`may_approve`]),
//! and the plugin and the gateway say what a shell waits for. Read from the shell's
//! `spec.approvals` as the webhook recorded them and from its class as it is now: an approval
//! whose approver the class no longer names counts no more, nor one past the class's
//! `validFor`.

use k8s_openapi::jiff::Timestamp;

use crate::class::ClassApproval;
use crate::types::{Approval, Decision};

/// How long an approval holds when the class does not say.
pub const DEFAULT_VALID_FOR: &str = "8h";

/// What `spec.approvals[].via` says when an approver is named among the class's users.
pub const VIA_USER: &str = "user";
/// The prefix of `via` when an approver is in one of the class's groups (`group:ops`).
pub const VIA_GROUP: &str = "group:";

/// What a shell's approvals come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its class asks for no approval.
    NotRequired,
    /// Approved by these approvers until the first of their approvals needed runs out.
    Approved {
        /// Who approved, in the order they did.
        by: Vec<String>,
        /// When it stops being approved (an approval needed runs out).
        until: Timestamp,
    },
    /// Not (or no longer) approved: which approvals count, how many are needed, and whether
    /// some ran out.
    Waiting {
        /// Who approved, in the order they did (fewer than needed).
        have: Vec<String>,
        /// How many different approvers the class asks for.
        required: usize,
        /// Whether an approval ran out (the shell was approved, and is no longer).
        expired: bool,
    },
    /// An approver said no.
    Rejected {
        /// Who.
        by: String,
        /// Why, if they said.
        reason: Option<String>,
    },
}

impl Verdict {
    /// Whether the shell may run.
    pub fn allows_running(&self) -> bool {
        matches!(self, Verdict::NotRequired | Verdict::Approved { .. })
    }

    /// In words, for the `Approved` condition, `ls` and the page.
    pub fn words(&self) -> String {
        match self {
            Verdict::NotRequired => "no approval needed".to_owned(),
            Verdict::Approved { by, until } => format!("approved by {} until {until}", by.join(", ")),
            Verdict::Waiting { have, required, expired } => {
                let have_words = if have.is_empty() { "none yet".to_owned() } else { have.join(", ") };
                let expired = if *expired { "an approval ran out; " } else { "" };
                format!("{expired}waiting for approval: {} of {required} ({have_words})", have.len())
            }
            Verdict::Rejected { by, reason } => match reason {
                Some(reason) => format!("rejected by {by}: {reason}"),
                None => format!("rejected by {by}"),
            },
        }
    }
}

/// How long an approval of `class` holds, as written (`runtime::time` parses it).
pub fn valid_for(class: &ClassApproval) -> &str {
    class.valid_for.as_deref().unwrap_or(DEFAULT_VALID_FOR)
}

/// Whether the class still lets `via` approve for `by` (an approver it no longer names counts
/// no more).
fn still_named(class: &ClassApproval, by: &str, via: Option<&str>) -> bool {
    let users = class.approvers.users.as_deref().unwrap_or_default();
    let groups = class.approvers.groups.as_deref().unwrap_or_default();
    match via {
        Some(VIA_USER) | None => users.iter().any(|u| u == by),
        Some(via) => via.strip_prefix(VIA_GROUP).is_some_and(|g| groups.iter().any(|x| x == g)),
    }
}

/// What a class asks of approvals: the class's rule, and how long an approval holds (its
/// `validFor`, parsed).
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The class's `spec.approval`.
    pub rule: &'a ClassApproval,
    /// How long an approval holds.
    pub valid_for: std::time::Duration,
}

/// What `approvals` of a shell owned by `owner`, of a class asking for `asked`, come to at `now`.
pub fn verdict(asked: Option<Asked<'_>>, approvals: &[Approval], owner: Option<&str>, now: Timestamp) -> Verdict {
    let Some(Asked { rule: class, valid_for }) = asked else { return Verdict::NotRequired };
    let required = usize::try_from(class.required.unwrap_or(1).max(1)).unwrap_or(1);
    let valid_secs = i64::try_from(valid_for.as_secs()).unwrap_or(i64::MAX / 2);
    let mut approved: Vec<(String, Timestamp)> = Vec::new();
    let mut expired = false;
    for approval in approvals {
        let (Some(by), Some(at)) = (approval.by.as_deref(), approval.at.as_ref()) else { continue };
        if Some(by) == owner || !still_named(class, by, approval.via.as_deref()) {
            continue;
        }
        if approval.decision == Decision::Reject {
            return Verdict::Rejected { by: by.to_owned(), reason: approval.reason.clone() };
        }
        let until = Timestamp::from_second(at.0.as_second().saturating_add(valid_secs)).unwrap_or(Timestamp::MAX);
        if until <= now {
            expired = true;
            continue;
        }
        match approved.iter_mut().find(|(who, _)| who == by) {
            Some((_, latest)) => *latest = (*latest).max(until),
            None => approved.push((by.to_owned(), until)),
        }
    }
    if approved.len() < required {
        let have = approved.into_iter().map(|(by, _)| by).collect();
        return Verdict::Waiting { have, required, expired };
    }
    // Approved until the `required`-th latest expiry: after it, fewer than needed hold.
    let mut ends: Vec<Timestamp> = approved.iter().map(|(_, until)| *until).collect();
    ends.sort_by(|a, b| b.cmp(a));
    let until = ends[required - 1];
    Verdict::Approved { by: approved.into_iter().map(|(by, _)| by).collect(), until }
}

/// Who is asking to add an approval: their name and groups, as the cluster authenticated them.
#[derive(Debug, Clone, Copy)]
pub struct Approver<'a> {
    /// The user name.
    pub name: &'a str,
    /// Their groups.
    pub groups: &'a [String],
}

/// Whether `approver` may approve (or reject) a shell owned by `owner` of a class asking for
/// `class`: `Ok(via)` (what to record as `via`), or why not, in words.
pub fn may_approve(
    class: Option<&ClassApproval>,
    approver: Approver<'_>,
    owner: Option<&str>,
) -> Result<String, String> {
    let Some(class) = class else {
        return Err("its class asks for no approval".to_owned());
    };
    if Some(approver.name) == owner {
        return Err(format!("{} owns it, and nobody approves their own shell", approver.name));
    }
    if class.approvers.users.as_deref().unwrap_or_default().iter().any(|u| u == approver.name) {
        return Ok(VIA_USER.to_owned());
    }
    let groups = class.approvers.groups.as_deref().unwrap_or_default();
    match groups.iter().find(|g| approver.groups.contains(g)) {
        Some(group) => Ok(format!("{VIA_GROUP}{group}")),
        None => Err(format!("{} is not among its class's approvers", approver.name)),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::class::ApprovalSubjects;

    const T0: i64 = 1_800_000_000;
    const HOUR: i64 = 3600;

    fn at(offset: i64) -> Timestamp {
        Timestamp::from_second(T0 + offset).unwrap()
    }

    fn class(required: i32, users: &[&str], groups: &[&str]) -> ClassApproval {
        ClassApproval {
            required: Some(required),
            approvers: ApprovalSubjects {
                users: Some(users.iter().map(|u| (*u).to_owned()).collect()),
                groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            },
            reason_required: None,
            valid_for: Some("8h".into()),
        }
    }

    fn said(by: &str, via: &str, offset: i64, decision: Decision) -> Approval {
        Approval {
            by: Some(by.into()),
            via: Some(via.into()),
            at: Some(Time(at(offset))),
            decision,
            reason: (decision == Decision::Reject).then(|| "not today".to_owned()),
        }
    }

    fn yes(by: &str, via: &str, offset: i64) -> Approval {
        said(by, via, offset, Decision::Approve)
    }

    #[test]
    fn what_approvals_come_to() {
        let one = class(1, &["bob"], &["ops"]);
        let two = class(2, &["bob", "carol"], &["ops"]);
        let only_carol = class(1, &["carol"], &[]);
        let only_sec = class(1, &[], &["sec"]);
        let waiting = |have: &[&str], required, expired| Verdict::Waiting {
            have: have.iter().map(|h| (*h).to_owned()).collect(),
            required,
            expired,
        };
        let approved =
            |by: &[&str], until| Verdict::Approved { by: by.iter().map(|b| (*b).to_owned()).collect(), until };
        let cases: Vec<(&str, Option<&ClassApproval>, Vec<Approval>, Verdict)> = vec![
            ("no approval asked", None, vec![], Verdict::NotRequired),
            ("none given", Some(&one), vec![], waiting(&[], 1, false)),
            ("one by a named user", Some(&one), vec![yes("bob", "user", 0)], approved(&["bob"], at(8 * HOUR))),
            ("one through a group", Some(&one), vec![yes("dan", "group:ops", 0)], approved(&["dan"], at(8 * HOUR))),
            ("the owner's own counts for nothing", Some(&one), vec![yes("alice", "user", 0)], waiting(&[], 1, false)),
            ("one of two", Some(&two), vec![yes("bob", "user", 0)], waiting(&["bob"], 2, false)),
            (
                "twice by the same approver is one",
                Some(&two),
                vec![yes("bob", "user", 0), yes("bob", "user", 60)],
                waiting(&["bob"], 2, false),
            ),
            (
                "two of two: until the earlier runs out",
                Some(&two),
                vec![yes("bob", "user", 0), yes("carol", "user", HOUR)],
                approved(&["bob", "carol"], at(8 * HOUR)),
            ),
            ("run out", Some(&one), vec![yes("bob", "user", -9 * HOUR)], waiting(&[], 1, true)),
            (
                "one run out, a newer one holds",
                Some(&one),
                vec![yes("bob", "user", -9 * HOUR), yes("carol", "group:ops", -HOUR)],
                approved(&["carol"], at(7 * HOUR)),
            ),
            (
                "a rejection wins",
                Some(&two),
                vec![yes("bob", "user", 0), said("carol", "user", 60, Decision::Reject)],
                Verdict::Rejected { by: "carol".into(), reason: Some("not today".into()) },
            ),
            (
                "an approver the class no longer names",
                Some(&only_carol),
                vec![yes("bob", "user", 0)],
                waiting(&[], 1, false),
            ),
            (
                "a group the class no longer names",
                Some(&only_sec),
                vec![yes("dan", "group:ops", 0)],
                waiting(&[], 1, false),
            ),
            ("an entry nobody recorded (no by, no at)", Some(&one), vec![Approval::default()], waiting(&[], 1, false)),
        ];
        for (what, class, approvals, want) in cases {
            let asked = class.map(|rule| Asked { rule, valid_for: std::time::Duration::from_secs(8 * HOUR as u64) });
            assert_eq!(verdict(asked, &approvals, Some("alice"), at(60)), want, "{what}");
        }
    }

    #[test]
    fn who_may_approve() {
        let class = class(1, &["bob"], &["ops"]);
        let ops = vec!["ops".to_owned(), "system:authenticated".to_owned()];
        let none: Vec<String> = vec![];
        /// What, the class's rule, who approves, their groups, and the answer.
        type Case<'a> = (&'a str, Option<&'a ClassApproval>, &'a str, &'a [String], Result<&'a str, &'a str>);
        let cases: Vec<Case> = vec![
            ("a named user", Some(&class), "bob", &none, Ok("user")),
            ("through a group", Some(&class), "dan", &ops, Ok("group:ops")),
            (
                "the owner, even in the group",
                Some(&class),
                "alice",
                &ops,
                Err("alice owns it, and nobody approves their own shell"),
            ),
            ("anyone else", Some(&class), "eve", &none, Err("eve is not among its class's approvers")),
            ("no approval asked", None, "bob", &none, Err("its class asks for no approval")),
        ];
        for (what, class, name, groups, want) in cases {
            let got = may_approve(class, Approver { name, groups }, Some("alice"));
            assert_eq!(got.as_deref().map_err(String::as_str), want, "{what}");
        }
    }
}
