//! [`ObjectMap`]: a small map from objects to what the controller remembers about them, shared
//! between reconciles and watches (failure counts, queue notes, read-your-writes memos).
//!
//! Each of those is touched for a moment per event or reconcile, so one lock around a
//! `HashMap` is enough; `parking_lot`'s mutex has no poisoning, so no caller carries recovery
//! code. The map gives its memory back once most of it is empty: it never shrinks by itself,
//! and one that filled during a burst (every object of a relist at once) would otherwise keep
//! that capacity for the life of the process.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use parking_lot::Mutex;

/// Values of type `V` by object reference, behind one lock.
pub struct ObjectMap<K: Resource, V> {
    map: Mutex<HashMap<ObjectRef<K>, V>>,
}

impl<K: Resource, V> Default for ObjectMap<K, V>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    fn default() -> Self {
        Self { map: Mutex::new(HashMap::new()) }
    }
}

impl<K: Resource, V> ObjectMap<K, V>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// The value of `key`, cloned out of the lock.
    pub fn get(&self, key: &ObjectRef<K>) -> Option<V>
    where
        V: Clone,
    {
        self.map.lock().get(key).cloned()
    }

    /// Set the value of `key`, replacing any.
    pub fn insert(&self, key: ObjectRef<K>, value: V) {
        self.map.lock().insert(key, value);
    }

    /// Keep the value of `key` if it has one; else set `value`.
    pub fn insert_if_absent(&self, key: ObjectRef<K>, value: V) {
        self.map.lock().entry(key).or_insert(value);
    }

    /// Change the value of `key` (`default` if it has none) with `f`, and return what `f`
    /// returns.
    pub fn update<R>(&self, key: ObjectRef<K>, default: impl FnOnce() -> V, f: impl FnOnce(&mut V) -> R) -> R {
        f(self.map.lock().entry(key).or_insert_with(default))
    }

    /// Remove `key` and return its value; gives memory back once the map is mostly empty.
    pub fn remove(&self, key: &ObjectRef<K>) -> Option<V> {
        let mut map = self.map.lock();
        let removed = map.remove(key);
        if removed.is_some() {
            shrink(&mut map);
        }
        removed
    }

    /// Look at the value of `key` and decide, under the lock, whether it goes: `decide` gets the
    /// value and returns (keep it?, what to return).
    pub fn inspect<R>(&self, key: &ObjectRef<K>, decide: impl FnOnce(Option<&V>) -> (bool, R)) -> R {
        let mut map = self.map.lock();
        let entry = match map.entry(key.clone()) {
            Entry::Occupied(entry) => entry,
            Entry::Vacant(_) => return decide(None).1,
        };
        let (keep, result) = decide(Some(entry.get()));
        if !keep {
            entry.remove();
            shrink(&mut map);
        }
        result
    }

    /// Forget everything (and the capacity with it).
    pub fn clear(&self) {
        *self.map.lock() = HashMap::new();
    }

    /// How many objects have a value.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Whether no object has a value.
    pub fn is_empty(&self) -> bool {
        self.map.lock().is_empty()
    }
}

/// Maps below this capacity are never shrunk.
const SMALL: usize = 64;

/// Halve the capacity whenever three quarters are free: O(1) per removal, amortised.
fn shrink<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > SMALL && map.len() * 4 < map.capacity() {
        map.shrink_to((map.len() * 2).max(SMALL));
    }
}

#[cfg(test)]
mod tests {
    use myownshell_api::MyOwnShell;

    use super::*;

    fn key(i: u32) -> ObjectRef<MyOwnShell> {
        ObjectRef::new(&format!("shell-{i}")).within("ns")
    }

    #[test]
    fn gives_its_memory_back_once_mostly_empty() {
        let map = ObjectMap::<MyOwnShell, u32>::default();
        for i in 0..10_000 {
            map.insert(key(i), i);
        }
        let full = map.map.lock().capacity();
        for i in 0..9_990 {
            assert_eq!(map.remove(&key(i)), Some(i));
        }
        assert_eq!(map.len(), 10);
        let capacity = map.map.lock().capacity();
        assert!(capacity < full / 8, "{capacity} of {full}");
        assert!(capacity >= SMALL, "small maps are left alone");
        assert_eq!(map.remove(&key(0)), None);
        assert!((9_990..10_000).all(|i| map.get(&key(i)) == Some(i)), "nothing else is lost");
    }

    #[test]
    fn each_operation() {
        let map = ObjectMap::<MyOwnShell, u32>::default();
        map.insert_if_absent(key(1), 10);
        map.insert_if_absent(key(1), 20);
        assert_eq!(map.get(&key(1)), Some(10), "the first value stays");
        assert_eq!(map.update(key(1), || 0, |n| std::mem::replace(n, *n + 1)), 10);
        assert_eq!(map.update(key(2), || 5, |n| *n), 5, "a missing value starts at the default");
        assert_eq!(map.inspect(&key(1), |v| (false, v.copied())), Some(11), "inspected, then removed");
        assert_eq!(map.get(&key(1)), None);
        assert_eq!(map.inspect(&key(2), |v| (true, v.copied())), Some(5));
        assert_eq!(map.inspect(&key(3), |v| (false, v.copied())), None);
        assert_eq!(map.len(), 1);
        map.clear();
        assert!(map.is_empty());
    }
}
