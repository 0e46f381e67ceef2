//! Every `MyOwnShellClass`, by name, kept current by a watch ([`watch`]); which one is the
//! default. Admission reads it under a read lock, without an API call; the webhook is ready only
//! once its first list is in (a shell admitted before would miss its class's rules).

use std::collections::HashMap;
use std::sync::Arc;

use kube::runtime::watcher;
use kube::{Api, Client};
use myownshell_api::MyOwnShellClass;
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

type ByName = HashMap<String, Arc<MyOwnShellClass>>;

/// The classes, as the watch last said.
#[derive(Default)]
pub struct ClassIndex {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    classes: ByName,
    relist: Option<ByName>,
    synced: bool,
}

/// The default class, and any other class that also says it is the default.
#[derive(Debug, Clone)]
pub struct DefaultClass {
    /// The one new shells get: of several, the newest (as Kubernetes picks among default
    /// StorageClasses), then the first by name.
    pub class: Arc<MyOwnShellClass>,
    /// The others marked default, by name: an administrator's slip the webhook warns about.
    pub also: Vec<String>,
}

fn insert(map: &mut ByName, class: &MyOwnShellClass) {
    if let Some(name) = &class.metadata.name {
        map.insert(name.clone(), Arc::new(class.clone()));
    }
}

impl ClassIndex {
    /// Take in one watch event.
    pub fn apply(&self, event: &watcher::Event<MyOwnShellClass>) {
        let mut inner = self.inner.write();
        match event {
            watcher::Event::Init => inner.relist = Some(ByName::new()),
            watcher::Event::InitApply(class) => match inner.relist.as_mut() {
                Some(relist) => insert(relist, class),
                None => insert(&mut inner.classes, class),
            },
            watcher::Event::InitDone => {
                if let Some(relist) = inner.relist.take() {
                    inner.classes = relist;
                }
                inner.synced = true;
            }
            watcher::Event::Apply(class) => insert(&mut inner.classes, class),
            watcher::Event::Delete(class) => {
                if let Some(name) = &class.metadata.name {
                    inner.classes.remove(name);
                }
            }
        }
    }

    /// The class `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<Arc<MyOwnShellClass>> {
        self.inner.read().classes.get(name).cloned()
    }

    /// The default class, if one is marked.
    pub fn default_class(&self) -> Option<DefaultClass> {
        let inner = self.inner.read();
        let mut marked: Vec<&Arc<MyOwnShellClass>> = inner.classes.values().filter(|c| c.is_default()).collect();
        let created = |c: &MyOwnShellClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
        // Newest first, then by name.
        marked.sort_by(|a, b| created(b).cmp(&created(a)).then_with(|| a.metadata.name.cmp(&b.metadata.name)));
        let (first, rest) = marked.split_first()?;
        let also = rest.iter().filter_map(|c| c.metadata.name.clone()).collect();
        Some(DefaultClass { class: Arc::clone(first), also })
    }

    /// Whether any class exists (when none does, admission need not look for one).
    pub fn is_populated(&self) -> bool {
        !self.inner.read().classes.is_empty()
    }

    /// Whether the first list is in.
    pub fn is_synced(&self) -> bool {
        self.inner.read().synced
    }

    /// An index of no class, for the entry points that take none (`dispatch::review` and the
    /// like, which tests and benchmarks call).
    pub fn none() -> &'static ClassIndex {
        static NONE: std::sync::LazyLock<ClassIndex> = std::sync::LazyLock::new(ClassIndex::default);
        &NONE
    }

    /// Whether `name` is the default class.
    pub fn is_default(&self, name: &str) -> bool {
        // Only a class marked default can be the default, and most are not: asked at every
        // review of a shell of a class, this then costs one lookup, not a sort of the marked.
        let marked = self.inner.read().classes.get(name).is_some_and(|c| c.is_default());
        marked && self.default_class().is_some_and(|d| d.class.metadata.name.as_deref() == Some(name))
    }

    /// An index holding exactly `classes` (for tests and benchmarks).
    pub fn of(classes: impl IntoIterator<Item = MyOwnShellClass>) -> Self {
        let mut map = ByName::new();
        for class in classes {
            insert(&mut map, &class);
        }
        Self { inner: RwLock::new(Inner { classes: map, relist: None, synced: true }) }
    }
}

/// Keep `index` current until `shutdown`: a watch of every `MyOwnShellClass`, retried with
/// backoff.
pub async fn watch(client: Client, index: Arc<ClassIndex>, shutdown: CancellationToken) {
    crate::follow::follow(Api::all(client), "MyOwnShellClasses", |event| index.apply(event), shutdown).await;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use myownshell_api::{MyOwnShellClassSpec, names};

    use super::*;

    fn class(name: &str, default: bool, created_secs: i64) -> MyOwnShellClass {
        let mut c = MyOwnShellClass::new(name, MyOwnShellClassSpec::default());
        if default {
            c.metadata.annotations = Some(BTreeMap::from([(names::DEFAULT_CLASS_ANNOTATION.into(), "true".into())]));
        }
        let at = k8s_openapi::jiff::Timestamp::from_second(created_secs).unwrap_or_default();
        c.metadata.creation_timestamp = Some(Time(at));
        c
    }

    #[test]
    fn the_default_is_the_newest_marked_class() {
        // (classes, the default, the others marked)
        type Case = (Vec<MyOwnShellClass>, Option<&'static str>, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (vec![], None, vec![]),
            (vec![class("big", false, 1)], None, vec![]),
            (vec![class("small", true, 1), class("big", false, 2)], Some("small"), vec![]),
            (vec![class("old", true, 1), class("new", true, 2)], Some("new"), vec!["old"]),
            (vec![class("b", true, 1), class("a", true, 1)], Some("a"), vec!["b"]),
        ];
        for (classes, want, also) in cases {
            let names: Vec<String> = classes.iter().filter_map(|c| c.metadata.name.clone()).collect();
            let index = ClassIndex::of(classes);
            let got = index.default_class();
            assert_eq!(got.as_ref().and_then(|d| d.class.metadata.name.as_deref()), want);
            assert_eq!(got.map(|d| d.also).unwrap_or_default(), also);
            for name in names.iter().map(String::as_str).chain(["missing"]) {
                assert_eq!(index.is_default(name), want == Some(name), "is_default({name:?}) of {names:?}");
            }
        }
        let mut marked_false = class("x", false, 1);
        marked_false.metadata.annotations =
            Some(BTreeMap::from([(names::DEFAULT_CLASS_ANNOTATION.into(), "false".into())]));
        assert!(ClassIndex::of([marked_false]).default_class().is_none(), "only \"true\" marks the default");
    }

    #[test]
    fn follows_the_watch() {
        let index = ClassIndex::default();
        assert!(!index.is_synced());
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(class("small", true, 1)));
        index.apply(&watcher::Event::InitDone);
        assert!(index.is_synced() && index.get("small").is_some());
        index.apply(&watcher::Event::Delete(class("small", true, 1)));
        assert!(index.get("small").is_none() && index.default_class().is_none());
    }
}
