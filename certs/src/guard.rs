//! Closing connections that hold a slot without using it: a client that moves no bytes for the
//! idle timeout (a forgotten keep-alive connection, a vanished peer), or one that trickles bytes
//! without ever completing a request head (slowloris).
//!
//! hyper's own `header_read_timeout` does the second by arming a timer for every request, which
//! was a measurable share of an admission answer. Here each connection counts its bytes and
//! requests with relaxed atomics ([`Activity`], [`CountedIo`], [`CountedService`]) and one
//! watcher per connection looks at the counters every [`GuardConfig::tick`]; what it decides is
//! the pure [`Watch::step`].

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::service::Service;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// When a connection is closed for doing nothing useful.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardConfig {
    /// No bytes in or out and no request being answered for this long: closed. Longer than a
    /// Go client's idle timeout (90 s), so the apiserver closes its idle connections first.
    pub idle: Duration,
    /// Bytes arriving without a request head completing for this long: closed.
    pub head: Duration,
    /// How often the counters are looked at; both limits are enforced to within one tick.
    pub tick: Duration,
}

impl Default for GuardConfig {
    fn default() -> Self {
        Self { idle: Duration::from_secs(120), head: Duration::from_secs(30), tick: Duration::from_secs(5) }
    }
}

/// What one connection has done so far.
#[derive(Debug, Default)]
pub struct Activity {
    read: AtomicU64,
    written: AtomicU64,
    requests: AtomicU64,
    in_flight: AtomicU64,
}

/// A reading of [`Activity`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub read: u64,
    pub written: u64,
    pub requests: u64,
    pub in_flight: u64,
}

impl Activity {
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            read: self.read.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }
}

/// Why a connection is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    Idle,
    SlowHead,
}

/// The watcher's memory between ticks.
#[derive(Debug, Clone)]
pub struct Watch {
    last: Snapshot,
    /// Since when no request has come in and nothing has been written. Bytes read alone do not
    /// count: a client trickling a head must not keep its connection alive that way.
    active_since: Instant,
    /// Since when bytes have been read without a request head completing.
    partial_since: Option<Instant>,
}

impl Watch {
    pub fn new(now: Instant) -> Self {
        Self { last: Snapshot::default(), active_since: now, partial_since: None }
    }

    /// Look at `seen` at time `now`.
    pub fn step(&mut self, seen: Snapshot, now: Instant, config: &GuardConfig) -> Verdict {
        let last = std::mem::replace(&mut self.last, seen);
        if seen.in_flight > 0 {
            // A request is being answered (maybe slowly, maybe streaming): never cut it off.
            self.active_since = now;
            self.partial_since = None;
            return Verdict::Keep;
        }
        let new_request = seen.requests != last.requests;
        if new_request || seen.written != last.written {
            self.active_since = now;
        }
        if new_request {
            self.partial_since = None;
        } else if seen.read != last.read {
            self.partial_since.get_or_insert(now);
        }
        if self.partial_since.is_some_and(|since| now.duration_since(since) >= config.head) {
            Verdict::SlowHead
        } else if now.duration_since(self.active_since) >= config.idle {
            Verdict::Idle
        } else {
            Verdict::Keep
        }
    }
}

/// Watch `activity` until the connection ends (`done` resolves), and say why it must be closed
/// if it must.
pub async fn watch<F: Future>(activity: Arc<Activity>, config: GuardConfig, done: F) -> Option<Verdict> {
    let mut done = std::pin::pin!(done);
    let mut state = Watch::new(Instant::now());
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + config.tick, config.tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut done => return None,
            _ = ticks.tick() => match state.step(activity.snapshot(), Instant::now(), &config) {
                Verdict::Keep => {}
                verdict => return Some(verdict),
            },
        }
    }
}

/// A connection's IO, counting the bytes read and written.
#[derive(Debug)]
pub struct CountedIo<T> {
    inner: T,
    activity: Arc<Activity>,
}

impl<T> CountedIo<T> {
    pub fn new(inner: T, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

fn count(counter: &AtomicU64, n: usize) {
    counter.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
}

impl<T: AsyncRead + Unpin> AsyncRead for CountedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            count(&self.activity.read, buf.filled().len().saturating_sub(before));
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CountedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            count(&self.activity.written, n);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled {
            count(&self.activity.written, n);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A connection's service, counting requests and those still being answered.
#[derive(Debug, Clone)]
pub struct CountedService<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> CountedService<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<S, R> Service<R> for CountedService<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = InFlight<S::Future>;

    fn call(&self, request: R) -> Self::Future {
        self.activity.requests.fetch_add(1, Ordering::Relaxed);
        self.activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { inner: self.inner.call(request), activity: Some(self.activity.clone()) }
    }
}

pin_project! {
    /// A request being answered; counted out when it resolves or is dropped.
    pub struct InFlight<F> {
        #[pin]
        inner: F,
        activity: Option<Arc<Activity>>,
    }

    impl<F> PinnedDrop for InFlight<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(activity) = this.project().activity.take() {
                activity.in_flight.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl<F: Future> Future for InFlight<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let polled = this.inner.poll(cx);
        if polled.is_ready()
            && let Some(activity) = this.activity.take()
        {
            activity.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: GuardConfig =
        GuardConfig { idle: Duration::from_secs(60), head: Duration::from_secs(20), tick: Duration::from_secs(5) };

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    /// (seconds, read, written, requests, in flight) per tick, and the verdict expected at the
    /// last one (all earlier ticks must say Keep).
    type Tick = (u64, u64, u64, u64, u64);

    #[test]
    fn verdicts() {
        let cases: &[(&str, &[Tick], Verdict)] = &[
            ("quiet, not yet idle", &[(30, 0, 0, 0, 0), (55, 0, 0, 0, 0)], Verdict::Keep),
            ("quiet for the idle timeout", &[(30, 0, 0, 0, 0), (60, 0, 0, 0, 0)], Verdict::Idle),
            (
                "keep-alive traffic now and then",
                &[(30, 500, 300, 1, 0), (60, 500, 300, 1, 0), (85, 1000, 600, 2, 0), (140, 1000, 600, 2, 0)],
                Verdict::Keep,
            ),
            ("idle after the last request", &[(5, 500, 300, 1, 0), (65, 500, 300, 1, 0)], Verdict::Idle),
            (
                "a slow handler moves nothing but is answering",
                &[(5, 500, 0, 1, 1), (100, 500, 0, 1, 1), (200, 500, 0, 1, 1)],
                Verdict::Keep,
            ),
            (
                "a long upload while answering",
                &[(5, 500, 0, 1, 1), (10, 9000, 0, 1, 1), (40, 90000, 0, 1, 1), (80, 900000, 0, 1, 1)],
                Verdict::Keep,
            ),
            (
                "a long download after the handler returned",
                &[(5, 500, 9000, 1, 0), (30, 500, 90000, 1, 0), (90, 500, 900000, 1, 0), (150, 500, 9000000, 1, 0)],
                Verdict::Keep,
            ),
            (
                "bytes trickle, no head completes",
                &[(5, 10, 0, 0, 0), (10, 20, 0, 0, 0), (25, 30, 0, 0, 0)],
                Verdict::SlowHead,
            ),
            (
                "a head trickles in after a request",
                &[(5, 500, 300, 1, 0), (10, 510, 300, 1, 0), (20, 520, 300, 1, 0), (30, 530, 300, 1, 0)],
                Verdict::SlowHead,
            ),
            (
                "a trickled head that completes in time",
                &[(5, 10, 0, 0, 0), (15, 20, 0, 0, 0), (20, 600, 300, 1, 0), (35, 610, 300, 1, 0)],
                Verdict::Keep,
            ),
            (
                "pauses do not reset a trickle",
                &[(5, 10, 0, 0, 0), (15, 10, 0, 0, 0), (25, 20, 0, 0, 0)],
                Verdict::SlowHead,
            ),
        ];
        for (what, ticks, want) in cases {
            let start = Instant::now();
            let mut watch = Watch::new(start);
            let mut verdict = Verdict::Keep;
            for (i, &(secs, read, written, requests, in_flight)) in ticks.iter().enumerate() {
                verdict = watch.step(Snapshot { read, written, requests, in_flight }, at(start, secs), &CONFIG);
                if i + 1 < ticks.len() {
                    assert_eq!(verdict, Verdict::Keep, "{what}: tick {i}");
                }
            }
            assert_eq!(verdict, *want, "{what}");
        }
    }

    #[tokio::test]
    async fn counts_requests_in_flight_and_bytes() {
        let activity = Arc::new(Activity::default());
        /// Answers its request after one yield.
        struct Echo;
        impl Service<u64> for Echo {
            type Response = u64;
            type Error = std::convert::Infallible;
            type Future = Pin<Box<dyn Future<Output = Result<u64, Self::Error>> + Send>>;
            fn call(&self, n: u64) -> Self::Future {
                Box::pin(async move {
                    tokio::task::yield_now().await;
                    Ok(n)
                })
            }
        }
        let service = CountedService::new(Echo, activity.clone());
        let answering = service.call(1);
        assert_eq!((activity.snapshot().requests, activity.snapshot().in_flight), (1, 1));
        assert_eq!(answering.await, Ok(1));
        assert_eq!(activity.snapshot().in_flight, 0);
        // Dropped before it resolved: counted out too.
        drop(service.call(2));
        assert_eq!((activity.snapshot().requests, activity.snapshot().in_flight), (2, 0));

        let (client, server) = tokio::io::duplex(64);
        let mut counted = CountedIo::new(server, activity.clone());
        let mut client = client;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        client.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        counted.read_exact(&mut buf).await.unwrap();
        counted.write_all(b"hi").await.unwrap();
        assert_eq!((activity.snapshot().read, activity.snapshot().written), (5, 2));
    }
}
