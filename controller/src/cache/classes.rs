//! The shell classes ([`ClassIndex`]: their caps on running shells and what they put in a shell's
//! pod), from a watch of `MyOwnShellClass`. A class that changes is told back, so its shells are
//! reconciled: a raised cap lets a waiting shell start, a new default image rolls out at a quiet
//! moment. Reconciles wait for the first list: before it, every class would look empty.

use std::collections::HashMap;
use std::sync::Arc;

use kube::runtime::watcher;
use myownshell_api::MyOwnShellClass;
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::cache::synced::Synced;
use crate::life::slots::Caps;

/// Every class, by name.
pub struct ClassIndex {
    inner: RwLock<Inner>,
    mark_synced: watch::Sender<bool>,
    synced: Synced,
}

type ByName = HashMap<String, Arc<MyOwnShellClass>>;

#[derive(Default)]
struct Inner {
    classes: ByName,
    relist: Option<ByName>,
}

impl Default for ClassIndex {
    fn default() -> Self {
        let (mark_synced, synced) = Synced::new();
        Self { inner: RwLock::default(), mark_synced, synced }
    }
}

fn caps_of(class: &MyOwnShellClass) -> Caps {
    let cap = |n: Option<i32>| n.map(|n| u32::try_from(n).unwrap_or(0));
    Caps { per_user: cap(class.spec.max_running_per_user), per_namespace: cap(class.spec.max_running_per_namespace) }
}

impl ClassIndex {
    /// Take in one event of the watch; the classes it changed.
    pub fn apply(&self, event: &watcher::Event<MyOwnShellClass>) -> Vec<String> {
        let mut inner = self.inner.write();
        let set = |map: &mut ByName, class: &MyOwnShellClass| -> Option<String> {
            let name = class.metadata.name.clone()?;
            let changed = map.get(&name).is_none_or(|old| old.spec != class.spec);
            map.insert(name.clone(), Arc::new(class.clone()));
            changed.then_some(name)
        };
        match event {
            watcher::Event::Init => {
                inner.relist = Some(ByName::new());
                Vec::new()
            }
            watcher::Event::InitApply(class) => {
                if let Some(relist) = inner.relist.as_mut() {
                    set(relist, class);
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                self.mark_synced.send_replace(true);
                let Some(relist) = inner.relist.take() else { return Vec::new() };
                let differs = |name: &String, class: &Arc<MyOwnShellClass>| {
                    inner.classes.get(name).is_none_or(|old| old.spec != class.spec)
                };
                let mut changed: Vec<String> =
                    relist.iter().filter(|(name, class)| differs(name, class)).map(|(n, _)| n.clone()).collect();
                changed.extend(inner.classes.keys().filter(|name| !relist.contains_key(*name)).cloned());
                inner.classes = relist;
                changed
            }
            watcher::Event::Apply(class) => set(&mut inner.classes, class).into_iter().collect(),
            watcher::Event::Delete(class) => {
                class.metadata.name.iter().filter_map(|name| inner.classes.remove(name).map(|_| name.clone())).collect()
            }
        }
    }

    /// The caps of `class` (none for a class that does not exist: its shells keep running, and
    /// the webhook refuses their next start).
    pub fn get(&self, class: &str) -> Caps {
        self.inner.read().classes.get(class).map(|c| caps_of(c)).unwrap_or_default()
    }

    /// The class `name`, if it exists.
    pub fn class(&self, name: &str) -> Option<Arc<MyOwnShellClass>> {
        self.inner.read().classes.get(name).cloned()
    }

    /// Resolves once the first list is in.
    pub async fn wait_synced(&self) {
        self.synced.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use myownshell_api::MyOwnShellClassSpec;

    use super::*;

    fn class(name: &str, per_user: Option<i32>) -> MyOwnShellClass {
        MyOwnShellClass::new(
            name,
            MyOwnShellClassSpec { max_running_per_user: per_user, ..MyOwnShellClassSpec::default() },
        )
    }

    #[test]
    fn tells_which_classes_changed() {
        let caps = ClassIndex::default();
        // (event, classes changed)
        let cases: Vec<(watcher::Event<MyOwnShellClass>, Vec<&str>)> = vec![
            (watcher::Event::Init, vec![]),
            (watcher::Event::InitApply(class("small", Some(2))), vec![]),
            (watcher::Event::InitDone, vec!["small"]),
            (watcher::Event::Apply(class("small", Some(2))), vec![]),
            (watcher::Event::Apply(class("small", Some(3))), vec!["small"]),
            (watcher::Event::Apply(class("team", None)), vec!["team"]),
            (watcher::Event::Delete(class("small", Some(3))), vec!["small"]),
        ];
        for (i, (event, want)) in cases.into_iter().enumerate() {
            assert_eq!(caps.apply(&event), want, "event {i}");
        }
        assert_eq!(caps.get("small"), Caps::default(), "a deleted class caps nothing");
        assert_eq!(caps.get("team"), Caps::default());
        assert_eq!(class("x", Some(-1)).spec.max_running_per_user.map(|n| u32::try_from(n).unwrap_or(0)), Some(0));
    }
}
