//! Which namespaces are opened to shells ([`OpenNamespaces`]: labelled
//! `myownshell.io/shells: enabled` by a cluster administrator), from the same watch of the
//! namespaces' metadata as [`crate::cache::namespaces`].
//!
//! The connect webhook, the gate that keeps strangers out of a shell's pods, is called only in
//! these namespaces (its namespaceSelector), so a shell anywhere else would run with no gate at
//! all: one made before the rule, or in a namespace whose label an administrator took off.
//! Reconcile holds such a shell at no pods until its namespace is opened, and says why in its
//! status. Reconciles wait for the first list ([`OpenNamespaces::wait_synced`]): before it, a
//! closed namespace would look open, and a restarting controller would scale its shells up into
//! a namespace with no gate.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use myownshell_api::names::{SHELLS_NAMESPACE_LABEL, SHELLS_NAMESPACE_LABEL_VALUE};
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::cache::synced::Synced;

/// The namespaces known not to be opened to shells.
pub struct OpenNamespaces {
    inner: RwLock<Inner>,
    /// Marks [`OpenNamespaces::synced`] at the first list.
    mark_synced: watch::Sender<bool>,
    /// Whether the first list is in (the caches' own signal).
    synced: Synced,
}

impl Default for OpenNamespaces {
    fn default() -> Self {
        let (mark_synced, synced) = Synced::new();
        Self { inner: RwLock::default(), mark_synced, synced }
    }
}

#[derive(Default)]
struct Inner {
    closed: HashSet<String>,
    /// A relist being gathered.
    relist: Option<HashSet<String>>,
}

/// Whether `ns` carries the opt-in label.
fn is_opened(ns: &PartialObjectMeta<Namespace>) -> bool {
    ns.metadata.labels.as_ref().and_then(|l| l.get(SHELLS_NAMESPACE_LABEL)).map(String::as_str)
        == Some(SHELLS_NAMESPACE_LABEL_VALUE)
}

impl OpenNamespaces {
    /// Take in one event of the namespaces' metadata watch; the namespaces whose openness it
    /// changed (their shells are to be reconciled).
    pub fn apply(&self, event: &watcher::Event<PartialObjectMeta<Namespace>>) -> Vec<String> {
        let mut inner = self.inner.write();
        match event {
            watcher::Event::Init => {
                inner.relist = Some(HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(ns) => {
                if let (Some(name), Some(relist)) = (&ns.metadata.name, inner.relist.as_mut())
                    && !is_opened(ns)
                {
                    relist.insert(name.clone());
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                self.mark_synced.send_replace(true);
                match inner.relist.take() {
                    Some(relist) => {
                        let changed = relist.symmetric_difference(&inner.closed).cloned().collect();
                        inner.closed = relist;
                        changed
                    }
                    None => Vec::new(),
                }
            }
            watcher::Event::Apply(ns) => {
                let Some(name) = &ns.metadata.name else { return Vec::new() };
                let changed = if is_opened(ns) { inner.closed.remove(name) } else { inner.closed.insert(name.clone()) };
                if changed { vec![name.clone()] } else { Vec::new() }
            }
            watcher::Event::Delete(ns) => {
                if let Some(name) = &ns.metadata.name {
                    inner.closed.remove(name);
                }
                Vec::new()
            }
        }
    }

    /// Whether shells may run in `namespace`: not known to lack the opt-in label (ask once
    /// [`OpenNamespaces::wait_synced`] said so).
    pub fn is_open(&self, namespace: &str) -> bool {
        !self.inner.read().closed.contains(namespace)
    }

    /// Resolves once the first list is in.
    pub async fn wait_synced(&self) {
        // The sender lives as long as `self`: this never returns unsynced.
        self.synced.wait().await;
    }

    /// Whether the first list is in, without waiting.
    pub fn is_synced(&self) -> bool {
        self.synced.is_synced()
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;
    use kube::core::PartialObjectMetaExt;

    use super::*;

    fn namespace(name: &str, label: Option<&str>) -> PartialObjectMeta<Namespace> {
        let labels = label.map(|v| [(SHELLS_NAMESPACE_LABEL.to_owned(), v.to_owned())].into());
        ObjectMeta { name: Some(name.to_owned()), labels, ..ObjectMeta::default() }.into_request_partial::<Namespace>()
    }

    #[test]
    fn follows_the_label() {
        let open = OpenNamespaces::default();
        assert!(!open.is_synced());
        // (event, namespaces to reconcile, then: team open, other open)
        type Case = (watcher::Event<PartialObjectMeta<Namespace>>, Vec<&'static str>, bool, bool);
        let cases: Vec<Case> = vec![
            (watcher::Event::Init, vec![], true, true),
            (watcher::Event::InitApply(namespace("team", Some("enabled"))), vec![], true, true),
            (watcher::Event::InitApply(namespace("other", None)), vec![], true, true),
            (watcher::Event::InitDone, vec!["other"], true, false),
            (watcher::Event::Apply(namespace("team", Some("enabled"))), vec![], true, false),
            (watcher::Event::Apply(namespace("team", Some("disabled"))), vec!["team"], false, false),
            (watcher::Event::Apply(namespace("other", Some("enabled"))), vec!["other"], false, true),
            (watcher::Event::Init, vec![], false, true),
            (watcher::Event::InitApply(namespace("team", Some("enabled"))), vec![], false, true),
            (watcher::Event::InitDone, vec!["team"], true, true),
            (watcher::Event::Apply(namespace("other", None)), vec!["other"], true, false),
            (watcher::Event::Delete(namespace("other", None)), vec![], true, true),
        ];
        for (i, (event, changed, team, other)) in cases.into_iter().enumerate() {
            assert_eq!(open.apply(&event), changed, "event {i}: {event:?}");
            assert_eq!((open.is_open("team"), open.is_open("other")), (team, other), "after event {i}");
            assert_eq!(open.is_synced(), i >= 3, "synced from the first InitDone on (event {i})");
        }
    }
}
