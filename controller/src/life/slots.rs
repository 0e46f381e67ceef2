//! How many shells of a class run at once: `maxRunningPerUser` (per owner) and
//! `maxRunningPerNamespace` of the shell's `MyOwnShellClass`. A start beyond a cap waits,
//! stopped, and says which shells count and how to free one; a shell already running is never
//! stopped for a cap (a cap lowered, a class changed), it only counts.
//!
//! The count is right under concurrent creates and starts because only the controller starts
//! shells, and it decides one start at a time: [`Slots::admit`] counts and takes a slot under
//! one lock, across the controller's concurrent reconciles (and only the leader reconciles).
//! The webhook does not count: its replicas answer concurrently and could each let one more
//! through.
//!
//! What counts as running: a shell this controller admitted (the ledger), or one whose
//! Deployment runs pods (so a restarted controller counts what runs before reconciling it).

use std::collections::{BTreeSet, HashMap};

use parking_lot::Mutex;

/// A shell, by namespace and name.
pub type ShellKey = (String, String);

/// What a class caps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    /// `spec.maxRunningPerUser`.
    pub per_user: Option<u32>,
    /// `spec.maxRunningPerNamespace`.
    pub per_namespace: Option<u32>,
}

/// A shell wanting to start: who, where, of which class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start<'a> {
    /// The shell.
    pub shell: ShellKey,
    /// Its class.
    pub class: &'a str,
    /// Its owner (`spec.owner`; a shell without one counts only towards its namespace).
    pub owner: Option<&'a str>,
}

/// Another shell of the same class, and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The shell.
    pub shell: ShellKey,
    /// Its owner.
    pub owner: Option<String>,
    /// Whether its Deployment runs pods.
    pub runs: bool,
}

/// Why a start waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    /// `per-user` or `per-namespace`.
    pub cap: &'static str,
    /// The cap.
    pub max: u32,
    /// The shells that count towards it (`namespace/name`), in order.
    pub running: Vec<String>,
}

impl Full {
    /// The status message of a shell waiting for a slot of `class`.
    pub fn message(&self, class: &str, owner: Option<&str>) -> String {
        let whose = match (self.cap, owner) {
            ("per-user", Some(owner)) => format!("{owner} runs"),
            _ => "its namespace runs".to_owned(),
        };
        let running = if self.running.is_empty() { "none".to_owned() } else { self.running.join(", ") };
        format!(
            "waiting to start: {whose} {} of at most {} shells of MyOwnShellClass {class:?} ({} cap: {running}); \
             it starts when one of them stops (kubectl myownshell stop NAME)",
            self.running.len(),
            self.max,
            self.cap
        )
    }
}

/// The shells admitted to run, by class.
#[derive(Default)]
pub struct Slots {
    admitted: Mutex<HashMap<ShellKey, String>>,
}

impl Slots {
    /// Let `start` run if its class's `caps` leave room among `peers` (the other shells of its
    /// class), taking its slot; else why it waits.
    pub fn admit(&self, start: &Start<'_>, caps: Caps, peers: &[Peer]) -> Result<(), Full> {
        let mut admitted = self.admitted.lock();
        let counts = |peer: &&Peer| {
            peer.shell != start.shell && (peer.runs || admitted.get(&peer.shell).is_some_and(|c| c == start.class))
        };
        let running: Vec<&Peer> = peers.iter().filter(counts).collect();
        let names = |keep: &dyn Fn(&Peer) -> bool| -> Vec<String> {
            let set: BTreeSet<String> =
                running.iter().filter(|p| keep(p)).map(|p| format!("{}/{}", p.shell.0, p.shell.1)).collect();
            set.into_iter().collect()
        };
        if let (Some(max), Some(owner)) = (caps.per_user, start.owner) {
            let mine = names(&|p| p.owner.as_deref() == Some(owner));
            if mine.len() >= max as usize {
                return Err(Full { cap: "per-user", max, running: mine });
            }
        }
        if let Some(max) = caps.per_namespace {
            let here = names(&|p| p.shell.0 == start.shell.0);
            if here.len() >= max as usize {
                return Err(Full { cap: "per-namespace", max, running: here });
            }
        }
        admitted.insert(start.shell.clone(), start.class.to_owned());
        Ok(())
    }

    /// `shell` runs (of `class`), whatever the caps: it keeps its slot.
    pub fn keep(&self, shell: &ShellKey, class: &str) {
        let mut admitted = self.admitted.lock();
        // Every reconcile of a running shell comes here: no allocation when nothing changes.
        if admitted.get(shell).is_none_or(|c| c != class) {
            admitted.insert(shell.clone(), class.to_owned());
        }
    }

    /// `shell` runs no more (stopped, held, deleted): its slot is free.
    pub fn release(&self, shell: &ShellKey) {
        self.admitted.lock().remove(shell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> ShellKey {
        (ns.to_owned(), name.to_owned())
    }

    fn peer(ns: &str, name: &str, owner: &str, runs: bool) -> Peer {
        Peer { shell: key(ns, name), owner: Some(owner.to_owned()), runs }
    }

    #[test]
    fn caps_count_what_runs_and_what_was_admitted() {
        let user = Caps { per_user: Some(2), per_namespace: None };
        // (caps, peers, the start's owner, the outcome: Ok or the shells counted)
        type Case = (&'static str, Caps, Vec<Peer>, Result<(), Vec<&'static str>>);
        let cases: Vec<Case> = vec![
            ("no caps", Caps::default(), vec![peer("a", "x", "alice", true), peer("a", "y", "alice", true)], Ok(())),
            ("room", user, vec![peer("a", "x", "alice", true), peer("a", "y", "alice", false)], Ok(())),
            (
                "full",
                user,
                vec![peer("a", "x", "alice", true), peer("b", "y", "alice", true), peer("a", "z", "bob", true)],
                Err(vec!["a/x", "b/y"]),
            ),
            (
                "itself does not count",
                user,
                vec![peer("a", "new", "alice", true), peer("a", "x", "alice", true)],
                Ok(()),
            ),
            (
                "per namespace, whoever owns them",
                Caps { per_user: None, per_namespace: Some(1) },
                vec![peer("a", "x", "bob", true), peer("b", "y", "alice", true)],
                Err(vec!["a/x"]),
            ),
            ("a cap of 0", Caps { per_user: Some(0), per_namespace: None }, vec![], Err(vec![])),
        ];
        for (what, caps, peers, want) in cases {
            let slots = Slots::default();
            let start = Start { shell: key("a", "new"), class: "small", owner: Some("alice") };
            let got = slots.admit(&start, caps, &peers).map_err(|f| f.running);
            let want = want.map_err(|names| names.into_iter().map(str::to_owned).collect::<Vec<_>>());
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn one_start_at_a_time_takes_the_last_slot() {
        // Three shells of alice start together, none running yet: the ledger lets two through.
        let slots = Slots::default();
        let caps = Caps { per_user: Some(2), per_namespace: None };
        let peers: Vec<Peer> = ["x", "y", "z"].iter().map(|n| peer("a", n, "alice", false)).collect();
        let outcomes: Vec<bool> = ["x", "y", "z"]
            .iter()
            .map(|n| {
                slots.admit(&Start { shell: key("a", n), class: "small", owner: Some("alice") }, caps, &peers).is_ok()
            })
            .collect();
        assert_eq!(outcomes, [true, true, false]);
        // One stops: its slot goes to the one waiting.
        slots.release(&key("a", "x"));
        assert!(
            slots.admit(&Start { shell: key("a", "z"), class: "small", owner: Some("alice") }, caps, &peers).is_ok()
        );
        let full = slots.admit(&Start { shell: key("a", "w"), class: "small", owner: Some("alice") }, caps, &peers);
        let message = full.map_err(|f| f.message("small", Some("alice"))).unwrap_err();
        assert_eq!(
            message,
            "waiting to start: alice runs 2 of at most 2 shells of MyOwnShellClass \"small\" (per-user cap: a/y, a/z); \
             it starts when one of them stops (kubectl myownshell stop NAME)"
        );
    }
}
