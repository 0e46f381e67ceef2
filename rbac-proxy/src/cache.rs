//! Review caches: a bounded map whose entries expire ([`TtlCache`], pure, clock passed in), and
//! a wrapper that makes concurrent misses for the same key share one fetch ([`CoalescingCache`]),
//! so a burst of scrapes with a new token costs one TokenReview, not one per request.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

#[derive(Debug, Clone)]
struct Entry<V> {
    value: V,
    expires: Instant,
}

/// A map with a time-to-live per entry and a maximum size.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    entries: HashMap<K, Entry<V>>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// A cache holding at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        Self { entries: HashMap::new(), capacity: capacity.max(1) }
    }

    /// The value for `key` if it has not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries.get(key).filter(|e| now < e.expires).map(|e| e.value.clone())
    }

    /// Remember `value` for `ttl` from `now`. A zero TTL stores nothing. When full, expired
    /// entries go first, then the one closest to expiry (it had the least life left anyway).
    pub fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            self.entries.remove(&key);
            return;
        }
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, e| now < e.expires);
            if self.entries.len() >= self.capacity
                && let Some(victim) = self.entries.iter().min_by_key(|(_, e)| e.expires).map(|(k, _)| k.clone())
            {
                self.entries.remove(&victim);
            }
        }
        let expires = now.checked_add(ttl).unwrap_or(now);
        self.entries.insert(key, Entry { value, expires });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded maps stay consistent even if a holder panicked; keep serving.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A [`TtlCache`] behind a lock, where concurrent misses for one key wait for a single fetch.
#[derive(Debug)]
pub struct CoalescingCache<K, V> {
    cache: Mutex<TtlCache<K, V>>,
    in_flight: Mutex<HashMap<K, Arc<OnceCell<V>>>>,
}

impl<K: Eq + Hash + Clone, V: Clone> CoalescingCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self { cache: Mutex::new(TtlCache::new(capacity)), in_flight: Mutex::new(HashMap::new()) }
    }

    /// The cached value for `key`, or the result of `fetch`, cached for `ttl_of(&value)`.
    /// Callers that miss while a fetch for the same key is running get its result. A failed
    /// fetch is not cached; a waiting caller then runs its own.
    pub async fn get_or_fetch<E, F, Fut>(&self, key: &K, ttl_of: impl Fn(&V) -> Duration, fetch: F) -> Result<V, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        if let Some(hit) = lock(&self.cache).get(key, Instant::now()) {
            return Ok(hit);
        }
        let cell = lock(&self.in_flight).entry(key.clone()).or_default().clone();
        let result = cell
            .get_or_try_init(|| async {
                let value = fetch().await?;
                lock(&self.cache).insert(key.clone(), value.clone(), ttl_of(&value), Instant::now());
                Ok(value)
            })
            .await
            .cloned();
        // Done either way: on success the value is in the cache already; on failure the next
        // caller should try afresh rather than wait on this cell.
        let mut in_flight = lock(&self.in_flight);
        if in_flight.get(key).is_some_and(|current| Arc::ptr_eq(current, &cell)) {
            in_flight.remove(key);
        }
        result
    }

    /// Entries currently cached (expired ones included until evicted).
    pub fn len(&self) -> usize {
        lock(&self.cache).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn entries_expire_exactly_at_their_ttl() {
        let t0 = Instant::now();
        let mut cache = TtlCache::new(10);
        cache.insert("k", 1, 5 * SEC, t0);
        let cases = [(Duration::ZERO, Some(1)), (4 * SEC, Some(1)), (5 * SEC - Duration::from_nanos(1), Some(1))];
        for (after, want) in cases {
            assert_eq!(cache.get(&"k", t0 + after), want, "{after:?}");
        }
        for after in [5 * SEC, 6 * SEC, 3600 * SEC] {
            assert_eq!(cache.get(&"k", t0 + after), None, "{after:?}");
        }
        assert_eq!(cache.get(&"other", t0), None);
    }

    #[test]
    fn a_zero_ttl_stores_nothing_and_forgets_the_old_value() {
        let t0 = Instant::now();
        let mut cache = TtlCache::new(10);
        cache.insert("k", 1, 5 * SEC, t0);
        cache.insert("k", 2, Duration::ZERO, t0);
        assert_eq!(cache.get(&"k", t0), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn the_cache_is_bounded_and_evicts_expired_then_soonest() {
        let t0 = Instant::now();
        let mut cache = TtlCache::new(3);
        cache.insert(1, "short", SEC, t0);
        cache.insert(2, "long", 100 * SEC, t0);
        cache.insert(3, "medium", 10 * SEC, t0);
        // Full: the newcomer pushes out the entry with the least life left.
        cache.insert(4, "new", 50 * SEC, t0);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&1, t0), None);
        assert_eq!(cache.get(&2, t0), Some("long"));
        // Later, the expired "medium" goes before anything live.
        cache.insert(5, "newer", 50 * SEC, t0 + 20 * SEC);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&3, t0), None);
        for k in [2, 4, 5] {
            assert!(cache.get(&k, t0 + 20 * SEC).is_some(), "{k}");
        }
        // Replacing an existing key never evicts another.
        cache.insert(2, "replaced", SEC, t0 + 20 * SEC);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&2, t0 + 20 * SEC), Some("replaced"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_share_one_fetch() {
        let cache = Arc::new(CoalescingCache::<&'static str, u32>::new(10));
        let fetches = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(tokio::sync::Notify::new());
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (cache, fetches, release) = (cache.clone(), fetches.clone(), release.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get_or_fetch(
                        &"k",
                        |_| 60 * SEC,
                        || async move {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            release.notified().await;
                            Ok::<_, String>(7)
                        },
                    )
                    .await
            }));
        }
        // Let every task reach the cell, then finish the one fetch.
        while fetches.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        release.notify_one();
        for task in tasks {
            assert_eq!(task.await.unwrap(), Ok(7));
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        // And the result is now cached.
        let again = cache.get_or_fetch(&"k", |_| SEC, || async { Err::<u32, _>("must not fetch".to_owned()) }).await;
        assert_eq!(again, Ok(7));
    }

    #[tokio::test]
    async fn failures_are_not_cached() {
        let cache = CoalescingCache::<&'static str, u32>::new(10);
        let first = cache.get_or_fetch(&"k", |_| 60 * SEC, || async { Err::<u32, _>("down") }).await;
        assert_eq!(first, Err("down"));
        let second = cache.get_or_fetch(&"k", |_| 60 * SEC, || async { Ok::<_, &str>(3) }).await;
        assert_eq!(second, Ok(3));
    }
}
