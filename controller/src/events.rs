//! Kubernetes Events on `MyOwnShell` objects. Their reasons are `myownshell_api::names::reasons`:
//! users filter on them (`kubectl get events --field-selector reason=Scaled`).

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use myownshell_api::MyOwnShell;
use tracing::warn;

use crate::metrics::Metrics;

/// Actions (what the controller did), as the events.k8s.io API asks for.
pub mod actions {
    /// The Deployment was server-side applied (created, scaled or updated).
    pub const APPLY: &str = "ApplyDeployment";
    /// Cleanup of a deleted `MyOwnShell`: its Deployment was deleted, found gone, or left alone
    /// as not ours.
    pub const DELETE: &str = "DeleteDeployment";
    /// A failed reconcile: the Warning events `ReconcileFailed`, `DeploymentConflict` and
    /// `SelectorConflict`.
    pub const RECONCILE: &str = "Reconcile";
}

/// The events.k8s.io API refuses notes longer than 1 kB; an apiserver error can be longer.
const MAX_NOTE_BYTES: usize = 1024;

/// `text` cut to at most `max` bytes on a character boundary, marked with `…` when cut.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
    text
}

/// Where events go. kube's [`Recorder`] keeps every event it published for six minutes (until
/// its next publish after that), so that a repeat within them becomes a count on the first
/// event (a series) rather than a new Event. Warnings repeat (a failure persisting through the
/// backoff) and go through one shared recorder that folds them; the other events report one
/// change each, and go through a recorder of their own, so that no cache holds an entry per
/// object: at 10,000 objects those entries were 24 MiB, and each publish scanned all of them.
#[derive(Clone)]
pub struct Publisher {
    warnings: Recorder,
    client: Client,
    reporter: Reporter,
}

impl Publisher {
    /// Events sent with `client`, reported by `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self { warnings: Recorder::new(client.clone(), reporter.clone()), client, reporter }
    }

    /// The recorder for an event of `type_`.
    fn recorder(&self, type_: EventType) -> Recorder {
        match type_ {
            EventType::Warning => self.warnings.clone(),
            EventType::Normal => Recorder::new(self.client.clone(), self.reporter.clone()),
        }
    }
}

/// Publish an event about `shell` without waiting for it. Events are best effort, as in
/// client-go's broadcaster: a failure is logged, never returned (a full event quota must not
/// stop reconciliation), and the reconcile does not wait for the API call.
pub fn publish(
    publisher: &Publisher,
    metrics: &Metrics,
    shell: &MyOwnShell,
    type_: EventType,
    reason: &'static str,
    action: &'static str,
    note: String,
) {
    let reference = shell.object_ref(&());
    let note = truncate(note, MAX_NOTE_BYTES);
    let event =
        Event { type_, reason: reason.to_owned(), note: Some(note), action: action.to_owned(), secondary: None };
    metrics.wrote("event");
    let recorder = publisher.recorder(type_);
    tokio::spawn(async move {
        if let Err(e) = recorder.publish(&event, &reference).await {
            warn!(error = %e, reason, object = ?reference.name, "could not publish an event");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_fit_the_api_limit() {
        let cases = [("short", 10, "short"), ("exactly10!", 10, "exactly10!"), ("0123456789abc", 10, "0123456…")];
        for (text, max, want) in cases {
            assert_eq!(truncate(text.to_owned(), max), want);
        }
        let long = "é".repeat(2000);
        let cut = truncate(long, MAX_NOTE_BYTES);
        assert!(cut.len() <= MAX_NOTE_BYTES && cut.ends_with('…'), "{}", cut.len());
    }
}
