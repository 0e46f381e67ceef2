//! Which namespaces are being deleted ([`TerminatingNamespaces`]), from a watch of the namespaces'
//! metadata.
//!
//! While a namespace is deleted, the namespace controller removes its Deployments before its
//! `MyOwnShell`s are marked for deletion, and each removal used to send the shell's reconcile to
//! re-create its Deployment: the apiserver refused (no new content in a terminating namespace),
//! and with 200 shells that was 800 failed reconciles and 1,000 failed Event writes. A shell in a
//! terminating namespace is left alone (its deletion follows), and no Event is written there.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use parking_lot::RwLock;

/// The namespaces that carry a deletion timestamp.
#[derive(Default)]
pub struct TerminatingNamespaces {
    names: RwLock<HashSet<String>>,
    /// A relist being gathered.
    relist: RwLock<Option<HashSet<String>>>,
}

impl TerminatingNamespaces {
    /// Take in one event of the namespaces' metadata watch.
    pub fn apply(&self, event: &watcher::Event<PartialObjectMeta<Namespace>>) {
        let terminating = |ns: &PartialObjectMeta<Namespace>| {
            ns.metadata.deletion_timestamp.is_some().then(|| ns.metadata.name.clone()).flatten()
        };
        match event {
            watcher::Event::Init => *self.relist.write() = Some(HashSet::new()),
            watcher::Event::InitApply(ns) => {
                if let (Some(name), Some(relist)) = (terminating(ns), self.relist.write().as_mut()) {
                    relist.insert(name);
                }
            }
            watcher::Event::InitDone => {
                if let Some(relist) = self.relist.write().take() {
                    *self.names.write() = relist;
                }
            }
            watcher::Event::Apply(ns) => {
                if let Some(name) = terminating(ns) {
                    self.names.write().insert(name);
                }
            }
            watcher::Event::Delete(ns) => {
                if let Some(name) = &ns.metadata.name {
                    self.names.write().remove(name);
                }
            }
        }
    }

    /// Whether `namespace` is being deleted.
    pub fn contains(&self, namespace: &str) -> bool {
        self.names.read().contains(namespace)
    }

    /// Note that the apiserver refused a write into `namespace` because it is being deleted
    /// (the watch may not have told yet).
    pub fn insert(&self, namespace: &str) {
        self.names.write().insert(namespace.to_owned());
    }
}

/// Whether `error` is the apiserver's refusal to create anything in a namespace being deleted
/// (HTTP 403 with the cause `NamespaceTerminating`).
pub fn is_terminating_refusal(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.code == 403
                && status.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;
    use kube::core::{PartialObjectMetaExt, Status};
    use serde_json::json;

    use super::*;

    fn namespace(name: &str, deleting: bool) -> PartialObjectMeta<Namespace> {
        let mut meta = ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() };
        if deleting {
            meta.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        meta.into_request_partial::<Namespace>()
    }

    #[test]
    fn follows_the_watch() {
        let set = TerminatingNamespaces::default();
        set.apply(&watcher::Event::Init);
        set.apply(&watcher::Event::InitApply(namespace("a", false)));
        set.apply(&watcher::Event::InitApply(namespace("b", true)));
        set.apply(&watcher::Event::InitDone);
        assert!(!set.contains("a") && set.contains("b"));
        set.apply(&watcher::Event::Apply(namespace("a", true)));
        assert!(set.contains("a"));
        set.apply(&watcher::Event::Delete(namespace("a", true)));
        assert!(!set.contains("a"), "gone: a namespace of that name may come back");
        set.insert("c");
        assert!(set.contains("c"));
    }

    #[test]
    fn tells_the_refusal_from_other_forbiddens() {
        let refusal = |code: u16, cause: &str| {
            let status: Status = serde_json::from_value(json!({
                "code": code,
                "reason": "Forbidden",
                "details": {"causes": [{"reason": cause, "message": "namespace team is being terminated"}]}
            }))
            .unwrap();
            kube::Error::Api(Box::new(status))
        };
        assert!(is_terminating_refusal(&refusal(403, "NamespaceTerminating")));
        assert!(!is_terminating_refusal(&refusal(403, "")), "RBAC says no");
        assert!(!is_terminating_refusal(&refusal(409, "NamespaceTerminating")));
    }
}
