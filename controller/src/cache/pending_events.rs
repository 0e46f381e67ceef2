//! How long an event waits before the reconcile it triggers starts: the queue latency of
//! controller-runtime's scalability SLO (p99 ≤ 1 s). kube-runtime's scheduler does not expose
//! its queue, so the controller notes when the first not-yet-reconciled event for an object
//! passed its watch filter, and the reconcile that starts next for that object takes the note.
//! Several events folded into one reconcile count once, from the oldest; a requeue (no event)
//! counts nothing. At most one note per object that exists (a note whose object vanished before
//! its reconcile is dropped), so memory is bounded by the objects watched, and shrinks back as
//! the notes are taken (a relist notes every object at once).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;
use myownshell_api::MyOwnShell;

use crate::cache::object_map::ObjectMap;

/// When each object's oldest unreconciled event arrived.
#[derive(Clone, Default)]
pub struct PendingEvents {
    waiting: Arc<ObjectMap<MyOwnShell, Instant>>,
}

impl PendingEvents {
    /// An event for `object` arrived at `now` (kept only if none is waiting already).
    pub fn arrived(&self, object: ObjectRef<MyOwnShell>, now: Instant) {
        self.waiting.insert_if_absent(object, now);
    }

    /// A reconcile of `object` starts at `now`: how long its oldest event waited, if one did.
    pub fn started(&self, object: &ObjectRef<MyOwnShell>, now: Instant) -> Option<Duration> {
        self.waiting.remove(object).map(|since| now.saturating_duration_since(since))
    }

    /// Objects with an event waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_event_is_measured_once_and_requeues_not_at_all() {
        let queue = PendingEvents::default();
        let (web, db) = (ObjectRef::new("web").within("ns"), ObjectRef::new("db").within("ns"));
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        queue.arrived(web.clone(), at(0));
        queue.arrived(web.clone(), at(30));
        queue.arrived(db.clone(), at(10));
        assert_eq!(queue.len(), 2, "one note per object");
        assert_eq!(queue.started(&web, at(50)), Some(Duration::from_millis(50)), "from the oldest event");
        assert_eq!(queue.started(&web, at(60)), None, "a requeue waited for no event");
        assert_eq!(queue.started(&db, at(15)), Some(Duration::from_millis(5)));
        assert!(queue.is_empty());
    }
}
