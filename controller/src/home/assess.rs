//! What a shell's home claim means for the shell, as a pure function: `status.home`, the
//! `HomeReady` condition, and the problem (if any) that is the shell's `Degraded` reason.

use myownshell_api::HomeStatus;
use myownshell_api::names::reasons;

use crate::health::diagnose::Diagnosis;
use crate::home::cached::CachedClaim;
use crate::home::claim::Ownership;

/// What kube-scheduler says of a pod with a claim of a class that binds at once (`Immediate`)
/// and is not bound yet (its VolumeBinding plugin): it places such a pod only once the claim is
/// bound.
pub const UNBOUND_IMMEDIATE: &str = "unbound immediate PersistentVolumeClaims";

/// The home as the status tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// `status.home`.
    pub status: HomeStatus,
    /// `HomeReady`: status, reason, message.
    pub ready: (bool, &'static str, String),
    /// A problem the shell cannot get past by itself: its `Degraded` reason and message.
    pub problem: Option<(&'static str, String)>,
    /// The shell must run no pods: the claim of its name is not its home.
    pub hold: bool,
}

/// The claim of `name` as found: `None` before it exists, else the claim and whose it is.
/// `node_not_ready` says why a node is not ready (`None`: it is, or is unknown).
pub fn assess(
    name: &str,
    claim: Option<(&CachedClaim, Ownership)>,
    node_not_ready: &dyn Fn(&str) -> Option<String>,
) -> Assessment {
    let mut status = HomeStatus { claim_name: name.to_owned(), phase: "Missing".to_owned(), ..HomeStatus::default() };
    let Some((claim, ownership)) = claim else {
        let ready = (false, reasons::HOME_PENDING, format!("the claim {name} is being created"));
        return Assessment { status, ready, problem: None, hold: false };
    };
    status.phase.clone_from(&claim.phase);
    if ownership == Ownership::Foreign {
        let message = format!(
            "a PersistentVolumeClaim named {name} exists and is not this shell's home (another object controls it, or it was kept for another owner): the shell runs no pods until it is renamed or deleted"
        );
        return problem(status, reasons::HOME_CLAIM_CONFLICT, message, true);
    }
    status.capacity.clone_from(&claim.capacity);
    status.node.clone_from(&claim.node);
    if let Some(since) = &claim.deleting_since {
        let message = format!(
            "the claim {name} is being deleted (since {}); it stays while a pod uses it, and a new, empty home is made after it is gone",
            since.0
        );
        return Assessment { status, ready: (false, reasons::HOME_TERMINATING, message), problem: None, hold: false };
    }
    match claim.phase.as_str() {
        "Lost" => {
            let message = format!(
                "the claim {name} lost its volume: its files are unreachable until an administrator restores the volume (or deletes the claim, for a new, empty home)"
            );
            problem(status, reasons::HOME_LOST, message, false)
        }
        "Bound" => bound(name, status, claim, node_not_ready),
        _ if claim.storage_class.is_none() => {
            let message = format!(
                "the claim {name} has no storage class: spec.home.storageClassName is unset and the cluster has no default StorageClass, so no volume is made for it (set spec.home.storageClassName, or have an administrator mark a class as the default)"
            );
            problem(status, reasons::HOME_NO_STORAGE_CLASS, message, false)
        }
        _ => {
            let class = claim.storage_class.as_deref().unwrap_or_default();
            let message = format!(
                "the claim {name} waits for a volume of class {class} (a class that binds on first use makes one when the shell's pod is scheduled)"
            );
            Assessment { status, ready: (false, reasons::HOME_PENDING, message), problem: None, hold: false }
        }
    }
}

fn bound(
    name: &str,
    status: HomeStatus,
    claim: &CachedClaim,
    node_not_ready: &dyn Fn(&str) -> Option<String>,
) -> Assessment {
    let capacity = claim.capacity.as_ref().map_or("?", |q| q.0.as_str()).to_owned();
    if let Some((node, why)) = claim.node.as_deref().and_then(|n| node_not_ready(n).map(|why| (n, why))) {
        let message = format!(
            "the home's volume lives on node {node}, which is not ready: {why}; the shell's pod can run only there, and runs again, files and all, when the node returns (network storage would follow the pod instead)"
        );
        return problem(status, reasons::HOME_NODE_UNAVAILABLE, message, false);
    }
    let on = claim.node.as_deref().map(|n| format!(" on node {n}")).unwrap_or_default();
    let shell = myownshell_api::names::shell_of_home_claim(name).unwrap_or(name);
    let ready = if claim.resize_pending {
        (
            true,
            reasons::HOME_RESIZE_PENDING,
            format!(
                "the volume grew to {capacity}{on}; its file system grows when the shell's pod next starts (`kubectl myownshell update {shell}` restarts it now)"
            ),
        )
    } else {
        (true, reasons::HOME_BOUND, format!("the claim {name} is bound: {capacity}{on}"))
    };
    Assessment { status, ready, problem: None, hold: false }
}

/// Whether `diagnosis` of the pods of a shell with a home (`home`: `None` for a shell without
/// one) is only that home not bound yet: the scheduler places a pod whose claim's class binds at
/// once only after the claim is bound, and says so as `Unschedulable`. `HomeReady=False`
/// (`HomePending`) tells the wait, and it passes by itself: it is not the shell's `Degraded`
/// reason. Told as one, a start with such a home went `Degraded` with a Warning Event and back a
/// moment later: two status writes and an Event for nothing wrong. Nor just after the claim
/// binds: the scheduler tries the pod again about a second later, and until then its word is
/// the same. Any other reason a pod cannot be scheduled is told, home or not (a class that binds
/// on first use waits for the pod to be placed, so there the scheduler's reason is the one that
/// matters; a lost or classless home is the home's own `Degraded` reason).
pub fn pod_waits_for_home(home: Option<&Assessment>, diagnosis: &Diagnosis) -> bool {
    home.is_some() && diagnosis.reason == reasons::UNSCHEDULABLE && diagnosis.message.contains(UNBOUND_IMMEDIATE)
}

fn problem(status: HomeStatus, reason: &'static str, message: String, hold: bool) -> Assessment {
    let problem = Some((reason, message.clone()));
    Assessment { status, ready: (false, reason, message), problem, hold }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn claim(phase: &str) -> CachedClaim {
        CachedClaim {
            phase: phase.to_owned(),
            storage_class: Some("local-path".into()),
            capacity: (phase == "Bound").then(|| Quantity("1Gi".into())),
            node: (phase == "Bound").then(|| "node-a".to_owned()),
            ..CachedClaim::default()
        }
    }

    #[test]
    fn what_a_claim_means_for_the_shell() {
        let down = |n: &str| (n == "node-a").then(|| "Ready is Unknown since 2026-11-28T01:00:00Z".to_owned());
        let up = |_: &str| None;
        let mut resizing = claim("Bound");
        resizing.resize_pending = true;
        let mut classless = claim("Pending");
        classless.storage_class = None;
        let mut deleting = claim("Bound");
        deleting.deleting_since = Some(Time(Timestamp::UNIX_EPOCH));
        let bound = claim("Bound");
        let pending = claim("Pending");
        let lost = claim("Lost");
        type Row<'a> = (&'a str, Option<(&'a CachedClaim, Ownership)>, bool, (bool, &'a str), Option<&'a str>, bool);
        let rows: [Row<'_>; 9] = [
            ("not made yet", None, true, (false, reasons::HOME_PENDING), None, false),
            ("bound", Some((&bound, Ownership::Ours)), true, (true, reasons::HOME_BOUND), None, false),
            ("kept, taken up", Some((&bound, Ownership::Retained)), true, (true, reasons::HOME_BOUND), None, false),
            (
                "bound, grown",
                Some((&resizing, Ownership::Ours)),
                true,
                (true, reasons::HOME_RESIZE_PENDING),
                None,
                false,
            ),
            ("waiting for a pod", Some((&pending, Ownership::Ours)), true, (false, reasons::HOME_PENDING), None, false),
            (
                "no class",
                Some((&classless, Ownership::Ours)),
                true,
                (false, reasons::HOME_NO_STORAGE_CLASS),
                Some(reasons::HOME_NO_STORAGE_CLASS),
                false,
            ),
            (
                "lost",
                Some((&lost, Ownership::Ours)),
                true,
                (false, reasons::HOME_LOST),
                Some(reasons::HOME_LOST),
                false,
            ),
            (
                "being deleted",
                Some((&deleting, Ownership::Ours)),
                true,
                (false, reasons::HOME_TERMINATING),
                None,
                false,
            ),
            (
                "someone else's",
                Some((&bound, Ownership::Foreign)),
                true,
                (false, reasons::HOME_CLAIM_CONFLICT),
                Some(reasons::HOME_CLAIM_CONFLICT),
                true,
            ),
        ];
        for (what, found, node_up, (ready, reason), problem, hold) in rows {
            let a = assess("alice", found, if node_up { &up } else { &down });
            assert_eq!((a.ready.0, a.ready.1), (ready, reason), "{what}: {}", a.ready.2);
            assert_eq!(a.problem.as_ref().map(|p| p.0), problem, "{what}");
            assert_eq!(a.hold, hold, "{what}");
            assert!(a.ready.2.contains("alice"), "{what}: the message names the claim: {}", a.ready.2);
        }
        let grown = assess("myownshell-home-alice", Some((&resizing, Ownership::Ours)), &up);
        assert!(grown.ready.2.contains("`kubectl myownshell update alice`"), "names the shell: {}", grown.ready.2);
        let gone = assess("alice", Some((&bound, Ownership::Ours)), &down);
        assert_eq!(gone.ready.1, reasons::HOME_NODE_UNAVAILABLE);
        assert!(gone.ready.2.contains("node node-a") && gone.ready.2.contains("since 2026-11-28"), "{}", gone.ready.2);
        assert_eq!(gone.status.node.as_deref(), Some("node-a"));
        let foreign = assess("alice", Some((&bound, Ownership::Foreign)), &up);
        assert_eq!((foreign.status.capacity, foreign.status.node), (None, None), "nothing of a foreign claim is told");
    }

    #[test]
    fn a_pod_waiting_only_for_its_home_to_bind_is_not_a_problem() {
        let up = |_: &str| None;
        let (pending, bound) = (claim("Pending"), claim("Bound"));
        let waiting = assess("h", Some((&pending, Ownership::Ours)), &up);
        let not_made = assess("h", None, &up);
        let ready = assess("h", Some((&bound, Ownership::Ours)), &up);
        let unschedulable = |message: &str| Diagnosis {
            reason: reasons::UNSCHEDULABLE,
            message: format!("pod h-1 cannot be scheduled: 0/3 nodes are available: {message}"),
            until: None,
        };
        let unbound =
            unschedulable("pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available");
        let full = unschedulable("3 Too many pods.");
        let crashing = Diagnosis { reason: reasons::CRASH_LOOPING, message: UNBOUND_IMMEDIATE.into(), until: None };
        let rows: [(&str, Option<&Assessment>, &Diagnosis, bool); 7] = [
            ("claim pending, the scheduler waits for it", Some(&waiting), &unbound, true),
            ("claim being made, the same", Some(&not_made), &unbound, true),
            ("claim just bound, the scheduler not yet at the pod again", Some(&ready), &unbound, true),
            ("claim pending, but the cluster is full", Some(&waiting), &full, false),
            ("another problem, whatever its words", Some(&waiting), &crashing, false),
            ("no home: nothing of ours to wait for", None, &unbound, false),
            ("bound and full", Some(&ready), &full, false),
        ];
        for (what, home, diagnosis, waits) in rows {
            assert_eq!(pod_waits_for_home(home, diagnosis), waits, "{what}");
        }
    }
}
