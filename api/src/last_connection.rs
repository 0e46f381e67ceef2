//! `status.lastConnection`, the one record of a shell being used, which its idle stop and the
//! quiet moment of a template rollout count from. Two writers keep it: the connect webhook (each
//! connection it lets in) and the gateway (a terminal someone types in or reads, kind
//! `gateway`). Both write through [`write`], which never moves the time back.

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::{Connection, MyOwnShell};

/// How often a status write that lost a race to another writer is tried again.
const ATTEMPTS: usize = 3;

/// Write `connection` as shell `name`'s `status.lastConnection` unless the shell already has a
/// later one: with several writers (webhook replicas, gateways, a write that waited in a queue)
/// the last writer is not always the latest connection, and a time moved back brings the idle
/// stop early. Read, compare, then patch at the read's resourceVersion, so that a write in
/// between makes the patch fail (409) and the comparison is made again. With `uid`, the patch
/// is refused if the shell was deleted and made again under the same name.
pub async fn write(api: &Api<MyOwnShell>, name: &str, uid: Option<&str>, connection: &Connection) -> kube::Result<()> {
    for _ in 0..ATTEMPTS {
        // `get` of the shell (writers' roles have it; `myownshells/status` only takes patches).
        let current = api.get(name).await?;
        let recorded = current.status.as_ref().and_then(|s| s.last_connection.as_ref());
        if !moves_forward(recorded.map(|c| c.time.0), connection.time.0) {
            return Ok(());
        }
        let mut patch = patch(uid, connection);
        patch["metadata"]["resourceVersion"] = serde_json::json!(current.metadata.resource_version);
        match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            other => return other.map(drop),
        }
    }
    Ok(())
}

/// Whether a connection made `at` is later than the recorded one (to the second, as it is kept).
pub fn moves_forward(recorded: Option<Timestamp>, at: Timestamp) -> bool {
    let second = Timestamp::from_second(at.as_second()).unwrap_or(at);
    recorded.is_none_or(|recorded| second > recorded)
}

/// The merge patch of `status.lastConnection`, bound to the shell's `uid` when given; the
/// writer adds the resourceVersion it compared against.
pub fn patch(uid: Option<&str>, connection: &Connection) -> serde_json::Value {
    let mut patch = serde_json::json!({ "status": { "lastConnection": connection } });
    if let Some(uid) = uid {
        patch["metadata"] = serde_json::json!({ "uid": uid });
    }
    patch
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    #[test]
    fn last_connection_never_moves_back() {
        let t = |s: i64| Timestamp::from_second(s).unwrap_or_default();
        let cases = [
            ("none recorded", None, t(100), true),
            ("later", Some(t(100)), t(101), true),
            ("the same second", Some(t(100)), Timestamp::from_nanosecond(100_500_000_000).unwrap_or_default(), false),
            ("earlier: another writer wrote a later one", Some(t(100)), t(99), false),
        ];
        for (what, recorded, at, want) in cases {
            assert_eq!(moves_forward(recorded, at), want, "{what}");
        }
    }

    #[test]
    fn the_patch_names_the_connection_and_the_shell() {
        let connection = Connection {
            user: "bob".into(),
            time: Time(Timestamp::from_second(1_800_000_000).unwrap_or_default()),
            pod: "web-7d9f-x2x4z".into(),
            kind: "gateway".into(),
        };
        assert_eq!(
            patch(Some("u1"), &connection),
            serde_json::json!({
                "metadata": {"uid": "u1"},
                "status": {"lastConnection": {"user": "bob", "time": "2027-01-15T08:00:00Z", "pod": "web-7d9f-x2x4z", "kind": "gateway"}}
            })
        );
        assert!(patch(None, &connection).get("metadata").is_none());
    }
}
