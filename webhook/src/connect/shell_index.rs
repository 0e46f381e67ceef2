//! What the webhook knows of every shell: who may connect to it ([`ShellAccess`]), by namespace
//! and name, kept current by a watch of `MyOwnShell` objects ([`watch`]).
//!
//! The admission of a connection reads it under a read lock, without an API call, and the
//! webhook reports ready only once its first list is in: a connection into a shell it has not
//! heard of would be let through on RBAC alone (and the gate refuses every pod named as a
//! Deployment's until then, should a review reach a replica that is not ready).

use std::collections::HashMap;
use std::sync::Arc;

use kube::runtime::watcher;
use kube::{Api, Client};
use myownshell_api::MyOwnShell;
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::connect::access::{ShellAccess, Shells};

/// Shells by namespace, then name.
type ByNamespace = HashMap<String, Shells>;

/// Every shell's [`ShellAccess`], as the watch last said.
#[derive(Default)]
pub struct ShellIndex {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    shells: ByNamespace,
    /// A relist being gathered (between `Init` and `InitDone`); it replaces `shells` whole.
    relist: Option<ByNamespace>,
    synced: bool,
}

fn insert(map: &mut ByNamespace, shell: &MyOwnShell) {
    let (Some(namespace), Some(name)) = (&shell.metadata.namespace, &shell.metadata.name) else { return };
    map.entry(namespace.clone()).or_default().insert(name.clone(), Arc::new(ShellAccess::of(shell)));
}

fn remove(map: &mut ByNamespace, shell: &MyOwnShell) {
    let (Some(namespace), Some(name)) = (&shell.metadata.namespace, &shell.metadata.name) else { return };
    if let Some(shells) = map.get_mut(namespace) {
        shells.remove(name);
        if shells.is_empty() {
            map.remove(namespace);
        }
    }
}

impl ShellIndex {
    /// Take in one watch event.
    pub fn apply(&self, event: &watcher::Event<MyOwnShell>) {
        let mut inner = self.inner.write();
        match event {
            watcher::Event::Init => inner.relist = Some(ByNamespace::new()),
            watcher::Event::InitApply(shell) => match inner.relist.as_mut() {
                Some(relist) => insert(relist, shell),
                None => insert(&mut inner.shells, shell),
            },
            watcher::Event::InitDone => {
                if let Some(relist) = inner.relist.take() {
                    inner.shells = relist;
                }
                inner.synced = true;
            }
            watcher::Event::Apply(shell) => insert(&mut inner.shells, shell),
            watcher::Event::Delete(shell) => remove(&mut inner.shells, shell),
        }
    }

    /// The shell `namespace/name`, if it exists.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ShellAccess>> {
        self.inner.read().shells.get(namespace)?.get(name).cloned()
    }

    /// `f` over the shells of `namespace` (an empty map if it has none).
    pub fn in_namespace<R>(&self, namespace: &str, f: impl FnOnce(&Shells) -> R) -> R {
        static NONE: Shells = Shells::new();
        let inner = self.inner.read();
        f(inner.shells.get(namespace).unwrap_or(&NONE))
    }

    /// Whether the first list is in.
    pub fn is_synced(&self) -> bool {
        self.inner.read().synced
    }

    /// How many shells it knows.
    pub fn len(&self) -> usize {
        self.inner.read().shells.values().map(Shells::len).sum()
    }

    /// Whether it knows no shell.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An index holding exactly `shells` (for tests and benchmarks): `(namespace, shell)`.
    pub fn of(shells: impl IntoIterator<Item = (String, ShellAccess)>) -> Self {
        let mut map = ByNamespace::new();
        for (namespace, shell) in shells {
            map.entry(namespace).or_default().insert(shell.name.clone(), Arc::new(shell));
        }
        Self { inner: RwLock::new(Inner { shells: map, relist: None, synced: true }) }
    }
}

/// Keep `index` current until `shutdown`: a watch of every `MyOwnShell`, retried with backoff.
pub async fn watch(client: Client, index: Arc<ShellIndex>, shutdown: CancellationToken) {
    crate::follow::follow(Api::all(client), "MyOwnShells", |event| index.apply(event), shutdown).await;
}

#[cfg(test)]
mod tests {
    use myownshell_api::{MyOwnShellSpec, SharedWith};

    use super::*;

    fn shell(namespace: &str, name: &str, owner: &str) -> MyOwnShell {
        let spec = MyOwnShellSpec {
            owner: Some(owner.into()),
            shared_with: Some(SharedWith { users: Some(vec!["bob".into()]), groups: None }),
            ..MyOwnShellSpec::default()
        };
        let mut s = MyOwnShell::new(name, spec);
        s.metadata.namespace = Some(namespace.into());
        s
    }

    #[test]
    fn follows_the_watch_and_a_relist_replaces_it_whole() {
        let index = ShellIndex::default();
        assert!(!index.is_synced());
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(shell("a", "web", "alice")));
        index.apply(&watcher::Event::InitApply(shell("b", "db", "carol")));
        index.apply(&watcher::Event::InitDone);
        assert!(index.is_synced());
        assert_eq!(index.len(), 2);
        let web = index.get("a", "web").unwrap();
        assert_eq!((web.owner.as_deref(), web.users.clone()), (Some("alice"), vec!["bob".to_owned()]));
        assert!(index.get("b", "web").is_none(), "by namespace");

        index.apply(&watcher::Event::Apply(shell("a", "web", "alice2")));
        assert_eq!(index.get("a", "web").unwrap().owner.as_deref(), Some("alice2"));
        index.apply(&watcher::Event::Delete(shell("b", "db", "carol")));
        assert!(index.get("b", "db").is_none());
        assert_eq!(index.in_namespace("b", |shells| shells.len()), 0);

        // A relist: what it does not bring back is gone once it is done, not before.
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(shell("c", "new", "dave")));
        assert!(index.get("a", "web").is_some(), "kept while the relist runs");
        index.apply(&watcher::Event::InitDone);
        assert!(index.get("a", "web").is_none());
        assert!(index.get("c", "new").is_some());
    }
}
