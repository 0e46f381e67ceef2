//! The review caches, on [`moka`]: what TokenReview and SubjectAccessReview answered, so a
//! steady scrape costs no API call.
//!
//! The policy, for both caches:
//! - **Per-entry lifetime.** Each answer is kept for the TTL its caller computes from it when
//!   it arrives (authentication: the accepted TTL capped at the token's `exp`, or the rejected
//!   TTL; authorization: the allow or the deny TTL). Reads do not extend it. A zero TTL
//!   stores nothing.
//! - **Bounded.** At most `capacity` entries. When full, a newcomer may only replace the least
//!   recently used entry, and only if it has been asked for more often (moka's TinyLFU
//!   admission; it counts requests once the cache is half full). So a flood of one-off keys (a
//!   client trying token after bad token) mostly does not get in at all, and cannot push out
//!   the entries in steady use. Every operation is O(1): no scan under a lock on any request.
//! - **Coalesced misses.** Concurrent misses for one key run one fetch; the others wait for its
//!   result. So a burst of requests with a new token costs one TokenReview.
//! - **Errors are never cached.** A failed fetch is handed to the callers that were waiting on
//!   it (one apiserver outage is one error, not a herd of retries), and the next caller asks
//!   again. Callers turn an error into a refusal, never into an allow.
//!
//! Keys are whatever the caller chooses; the authentication cache keys by a SHA-256 of the
//! token ([`crate::token::TokenHash`]), so no token is kept in memory past its request.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::future::Cache;
use moka::{Equivalent, Expiry};

/// A cached answer with the lifetime it was given when it arrived.
#[derive(Debug, Clone)]
struct Timed<V> {
    value: V,
    ttl: Duration,
}

/// Expires each entry `ttl` after it was written; reads leave that alone (moka's default).
struct WrittenTtl;

impl<K, V> Expiry<K, Timed<V>> for WrittenTtl {
    fn expire_after_create(&self, _key: &K, entry: &Timed<V>, _created_at: Instant) -> Option<Duration> {
        Some(entry.ttl)
    }

    // A key already present (e.g. an expired entry not yet swept) is rewritten on the next
    // miss: the new answer gets its own lifetime, not what was left of the old one's.
    fn expire_after_update(
        &self,
        _key: &K,
        entry: &Timed<V>,
        _updated_at: Instant,
        _left: Option<Duration>,
    ) -> Option<Duration> {
        Some(entry.ttl)
    }
}

/// A bounded cache of review answers with per-entry lifetimes and coalesced misses.
pub struct ReviewCache<K, V> {
    entries: Cache<K, Timed<V>>,
}

impl<K, V> ReviewCache<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache holding at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = u64::try_from(capacity.max(1)).unwrap_or(u64::MAX);
        Self { entries: Cache::builder().max_capacity(capacity).expire_after(WrittenTtl).build() }
    }

    /// The cached value for `key`, or the result of `fetch`, cached for `ttl_of(&value)`.
    /// Callers that miss while a fetch for the same key is running get its result, error
    /// included. An error is never cached.
    pub async fn get_or_fetch<E, F, Fut>(&self, key: &K, ttl_of: impl FnOnce(&V) -> Duration, fetch: F) -> Result<V, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        E: Clone + Send + Sync + 'static,
    {
        self.get_or_fetch_by(key, K::clone, ttl_of, fetch).await
    }

    /// [`ReviewCache::get_or_fetch`] looked up by `key`, a borrowed form of the cache's key
    /// (hashing and comparing as the owned one does), which `to_key` turns into an owned key
    /// only on a miss.
    ///
    /// Why two steps: a hit, nearly every call, is a plain lookup that copies nothing, in a
    /// future of about 1 KB. moka's coalescing lookup (`try_get_with`) takes an owned key and
    /// holds room for the fetch in its future (7.5 KB with a SubjectAccessReview's), so asking
    /// it first made every cached answer copy the key (a user and a request: 10 allocations)
    /// and allocate the 7.5 KB for a future that was never polled. A class's cached `use` in
    /// the webhook took 1.4 µs that way on one thread, 2.1 µs each on two, and 0.7 and 1.3 µs
    /// looked up by reference (the webhook's `tests/allocations.rs` holds what it allocates).
    /// Only a miss, which asks the apiserver anyway, pays for the copy and the room.
    ///
    /// The lookup itself is boxed too: moka's `get` future is 800 bytes (room for the
    /// housekeeping a read may run), and held inline it made a caller's future just over 1 KB
    /// (the webhook's class check: 1,152 bytes, boxed at every review of a shell of a class).
    /// glibc serves an allocation over 1 KB outside its per-thread cache, and first
    /// consolidates its fast bins: under the class row of `cargo xtask bench webhook`,
    /// `malloc_consolidate` and `_int_malloc` took 1.9% of the process (`perf record`, load
    /// generator included) against 1.1% for a review without a class. Boxed apart, both
    /// allocations are under 1 KB and come from the thread's cache.
    pub async fn get_or_fetch_by<Q, E, F, Fut>(
        &self,
        key: &Q,
        to_key: impl FnOnce(&Q) -> K,
        ttl_of: impl FnOnce(&V) -> Duration,
        fetch: F,
    ) -> Result<V, E>
    where
        Q: Equivalent<K> + Hash + ?Sized,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        E: Clone + Send + Sync + 'static,
    {
        // moka returns no entry past its lifetime, so a hit here is as live as one below.
        if let Some(hit) = Box::pin(self.entries.get(key)).await {
            return Ok(hit.value);
        }
        Box::pin(self.fetch(to_key(key), ttl_of, fetch)).await
    }

    /// The miss of [`ReviewCache::get_or_fetch_by`]: one fetch for all who miss `key` at once.
    async fn fetch<E, F, Fut>(&self, key: K, ttl_of: impl FnOnce(&V) -> Duration, fetch: F) -> Result<V, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        E: Clone + Send + Sync + 'static,
    {
        // The init future is only polled on a miss, so a hit never calls `fetch` or `ttl_of`.
        let init = async move {
            let value = fetch().await?;
            let ttl = ttl_of(&value);
            Ok(Timed { value, ttl })
        };
        let answer = self.entries.try_get_with_by_ref(&key, init).await.map_err(|shared: Arc<E>| E::clone(&shared))?;
        if answer.ttl.is_zero() {
            // moka stored it already expired (no reader can see it); drop it now rather than
            // let it take the place of a live entry until the next sweep.
            self.entries.invalidate(&key).await;
        }
        Ok(answer.value)
    }

    /// How many entries the cache holds, after applying the writes, expiries and evictions
    /// still pending (moka applies them in batches, so an unsettled count can lag).
    pub async fn settled_len(&self) -> u64 {
        self.entries.run_pending_tasks().await;
        self.entries.entry_count()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    /// The cached value for `key`, or `None` (asks nothing: the fetch fails).
    async fn cached(cache: &ReviewCache<u32, u32>, key: u32) -> Option<u32> {
        cache.get_or_fetch(&key, |_| SEC, || async { Err::<u32, ()>(()) }).await.ok()
    }

    async fn fill(cache: &ReviewCache<u32, u32>, key: u32, value: u32, ttl: Duration) {
        let got = cache.get_or_fetch(&key, |_| ttl, || async move { Ok::<_, ()>(value) }).await;
        assert_eq!(got, Ok(value));
    }

    #[tokio::test]
    async fn each_entry_lives_for_its_own_ttl() {
        let cache = ReviewCache::new(10);
        let short = Duration::from_millis(200);
        let written = Instant::now();
        fill(&cache, 1, 10, short).await;
        fill(&cache, 2, 20, 3600 * SEC).await;
        assert_eq!(cached(&cache, 1).await, Some(10));
        // Poll until the short entry is gone; it must not go before its TTL.
        let deadline = written + 10 * SEC;
        while cached(&cache, 1).await.is_some() {
            assert!(Instant::now() < deadline, "the 200 ms entry is still cached after 10 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(written.elapsed() >= short, "expired after {:?}", written.elapsed());
        assert_eq!(cached(&cache, 2).await, Some(20), "the long entry expired with the short one");
        // A hit does not extend the lifetime, and a fresh fetch gets a fresh one.
        fill(&cache, 1, 11, 3600 * SEC).await;
        assert_eq!(cached(&cache, 1).await, Some(11));
    }

    #[tokio::test]
    async fn a_zero_ttl_stores_nothing() {
        let cache = ReviewCache::new(10);
        fill(&cache, 1, 10, Duration::ZERO).await;
        assert_eq!(cached(&cache, 1).await, None);
        assert_eq!(cache.settled_len().await, 0);
    }

    #[tokio::test]
    async fn the_cache_is_bounded_and_one_off_keys_do_not_push_out_hot_ones() {
        let capacity = 100;
        let cache = ReviewCache::new(capacity);
        fill(&cache, 0, 0, 3600 * SEC).await;
        // Key 0 is asked for again every ten one-off keys, as a scraper keeps scraping.
        for key in 1..=(20 * capacity as u32) {
            fill(&cache, key, key, 3600 * SEC).await;
            if key % 10 == 0 {
                assert_eq!(cached(&cache, 0).await, Some(0), "the hot entry was evicted after {key} one-off keys");
            }
        }
        let len = cache.settled_len().await;
        assert!(len <= capacity as u64, "{len} entries in a cache of {capacity}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_share_one_fetch() {
        let cache = Arc::new(ReviewCache::<&'static str, u32>::new(10));
        let fetches = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(tokio::sync::Notify::new());
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (cache, fetches, release) = (cache.clone(), fetches.clone(), release.clone());
            tasks.push(tokio::spawn(async move {
                let fetch = || async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    release.notified().await;
                    Ok::<_, String>(7)
                };
                cache.get_or_fetch(&"k", |_| 60 * SEC, fetch).await
            }));
        }
        // Let every task reach the cache, then finish the one fetch.
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
    async fn a_borrowed_key_finds_what_its_owned_key_stored() {
        let cache = ReviewCache::<String, u32>::new(10);
        let fetches = AtomicUsize::new(0);
        for _ in 0..3 {
            let fetch = || async {
                fetches.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(5)
            };
            assert_eq!(cache.get_or_fetch_by("k", str::to_owned, |_| 60 * SEC, fetch).await, Ok(5));
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1, "the borrowed lookups missed what was stored");
        // And the owned key finds it too.
        let owned = cache.get_or_fetch(&"k".to_owned(), |_| SEC, || async { Err::<u32, ()>(()) }).await;
        assert_eq!(owned, Ok(5));
    }

    #[tokio::test]
    async fn failures_are_not_cached() {
        let cache = ReviewCache::<&'static str, u32>::new(10);
        let first = cache.get_or_fetch(&"k", |_| 60 * SEC, || async { Err::<u32, _>("down") }).await;
        assert_eq!(first, Err("down"));
        let second = cache.get_or_fetch(&"k", |_| 60 * SEC, || async { Ok::<_, &str>(3) }).await;
        assert_eq!(second, Ok(3));
    }
}
