//! Sign-out everywhere. A session's cookie is sealed, and any replica takes a session up from
//! its cookie (so a page outlives its replica); so a copy of a signed-out cookie would open on
//! another replica until it expires. Every sign-out is therefore written to one ConfigMap
//! (`--signed-out-config-map`, in the gateway's namespace, beside the session key's Secret) that
//! every replica watches, and a cookie whose session is in it opens nothing anywhere.
//!
//! An entry is the first 128 bits of SHA-256 of the session's id (never the id: the record is
//! readable by whoever may read the gateway's namespace) and, as its value, when the session
//! would have ended (Unix seconds). Entries whose sessions would have ended are pruned on every
//! write; the record holds at most [`MAX_RECORDED`] (a ConfigMap holds 1 MiB; these take about
//! 250 KiB), the soonest to end leaving first when it is full.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use ring::digest::{SHA256, digest};
use tokio_util::sync::CancellationToken;

/// The most signed-out sessions the record holds.
pub const MAX_RECORDED: usize = 5000;

/// How many times a write that lost a race with another replica's is tried again.
const ATTEMPTS: usize = 5;

/// What the record names a session by: 32 hex digits of SHA-256 of its id.
pub fn fingerprint(id: &str) -> String {
    digest(&SHA256, id.as_bytes()).as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The record with `entry` (a fingerprint and its end) added at `now` (pure): ended entries
/// out, and at most [`MAX_RECORDED`], the soonest to end leaving first.
pub fn merged(current: &BTreeMap<String, String>, entry: (String, u64), now: u64) -> BTreeMap<String, String> {
    let mut entries: Vec<(String, u64)> = current
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.parse::<u64>().ok()?)))
        .filter(|(k, until)| *until > now && *k != entry.0)
        .collect();
    entries.push(entry);
    entries.sort_by_key(|e| std::cmp::Reverse(e.1));
    entries.truncate(MAX_RECORDED);
    entries.into_iter().map(|(k, until)| (k, until.to_string())).collect()
}

/// The fingerprints of `data` whose sessions have not ended at `now` (pure).
pub fn in_force(data: Option<&BTreeMap<String, String>>, now: u64) -> HashSet<String> {
    data.into_iter()
        .flatten()
        .filter(|(_, until)| until.parse::<u64>().is_ok_and(|until| until > now))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The shared record of signed-out sessions.
#[derive(Clone)]
pub struct SignedOut {
    maps: Api<ConfigMap>,
    name: String,
}

impl SignedOut {
    /// The record `name` in `namespace`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self { maps: Api::namespaced(client, namespace), name: name.to_owned() }
    }

    /// Record that session `id`, which would have lasted until `until`, is signed out: written
    /// before the sign-out is answered, so that every replica refuses it from then on.
    pub async fn record(&self, id: &str, until: SystemTime) -> Result<(), String> {
        let entry = (fingerprint(id), seconds(until));
        for _ in 0..ATTEMPTS {
            let now = seconds(SystemTime::now());
            let found = self.maps.get_opt(&self.name).await.map_err(|e| self.failed(&e))?;
            let written = match found {
                Some(mut map) => {
                    map.data = Some(merged(&map.data.unwrap_or_default(), entry.clone(), now));
                    // Replaced at the version read: a write another replica made meanwhile is a
                    // conflict, read again, never lost.
                    self.maps.replace(&self.name, &PostParams::default(), &map).await.map(drop)
                }
                None => {
                    let map = ConfigMap {
                        metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                        data: Some(merged(&BTreeMap::new(), entry.clone(), now)),
                        ..ConfigMap::default()
                    };
                    self.maps.create(&PostParams::default(), &map).await.map(drop)
                }
            };
            match written {
                Ok(()) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => return Err(self.failed(&e)),
            }
        }
        Err(format!("ConfigMap {}: changed by other replicas {ATTEMPTS} times in a row", self.name))
    }

    fn failed(&self, e: &kube::Error) -> String {
        format!("ConfigMap {}: {e}", self.name)
    }

    /// Tell `learn` the record's sessions (their fingerprints) as it changes, until `stop`: a
    /// watch of the one ConfigMap, started again after a failure with kube's backoff.
    pub async fn follow(self, learn: impl Fn(HashSet<String>), stop: CancellationToken) {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let events = watcher(self.maps.clone(), config).default_backoff().applied_objects();
        let mut events = std::pin::pin!(events);
        loop {
            let next = tokio::select! {
                next = events.next() => next,
                () = stop.cancelled() => return,
            };
            match next {
                Some(Ok(map)) => learn(in_force(map.data.as_ref(), seconds(SystemTime::now()))),
                Some(Err(e)) => tracing::warn!(error = %e, config_map = %self.name, "the record of sign-outs"),
                None => return,
            }
        }
    }
}

/// How long a sign-out's write may take before the sign-out is answered anyway.
pub const RECORD_WITHIN: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{MAX_RECORDED, fingerprint, in_force, merged};

    fn record(entries: &[(&str, u64)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| ((*k).to_owned(), v.to_string())).collect()
    }

    #[test]
    fn a_fingerprint_is_32_hex_digits_and_not_the_id() {
        let f = fingerprint("0123456789abcdef");
        assert_eq!(f.len(), 32);
        assert!(f.chars().all(|c| c.is_ascii_hexdigit()) && !f.contains("0123456789abcdef"), "{f}");
        assert_ne!(f, fingerprint("0123456789abcdeg"));
    }

    #[test]
    fn a_write_adds_its_entry_and_prunes_what_has_ended() {
        let cases = [
            ("into nothing", record(&[]), ("new", 200), record(&[("new", 200)])),
            (
                "ended ones go",
                record(&[("old", 99), ("live", 150)]),
                ("new", 200),
                record(&[("live", 150), ("new", 200)]),
            ),
            ("the same again", record(&[("new", 150)]), ("new", 200), record(&[("new", 200)])),
            ("garbage goes", BTreeMap::from([("bad".into(), "soon".into())]), ("new", 200), record(&[("new", 200)])),
        ];
        for (name, current, (k, until), want) in cases {
            assert_eq!(merged(&current, (k.into(), until), 100), want, "{name}");
        }
    }

    #[test]
    fn a_full_record_lets_the_soonest_to_end_go() {
        let full: BTreeMap<String, String> =
            (0..MAX_RECORDED).map(|i| (format!("k{i}"), (1000 + i).to_string())).collect();
        let after = merged(&full, ("new".into(), 9999), 100);
        assert_eq!(after.len(), MAX_RECORDED);
        assert!(
            after.contains_key("new") && !after.contains_key("k0") && after.contains_key("k1"),
            "{:?}",
            after.len()
        );
    }

    #[test]
    fn only_sessions_not_yet_ended_are_in_force() {
        let data = BTreeMap::from([("a".into(), "150".into()), ("b".into(), "50".into()), ("c".into(), "x".into())]);
        assert_eq!(in_force(Some(&data), 100), ["a".to_owned()].into());
        assert!(in_force(None, 100).is_empty());
    }
}
