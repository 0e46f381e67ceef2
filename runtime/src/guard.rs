//! Closing connections that hold a slot without using it: a client that sends no request and
//! receives nothing for the idle timeout (a forgotten keep-alive connection, a vanished peer),
//! one whose request (head and body) is still arriving at the request deadline (slowloris, a
//! body trickled a byte at a time, a body that stops coming while the handler waits for it), and
//! a request that moves no byte either way for the idle timeout (a stalled answer).
//!
//! hyper's own `header_read_timeout` covers only the head, and does it by arming a timer for
//! every request, which was a measurable share of an admission answer. Here each connection
//! counts its bytes and requests with relaxed atomics ([`Activity`], [`CountedIo`],
//! [`CountedService`], [`GuardedBody`]) and one watcher per connection looks at the counters every
//! [`GuardConfig::tick`]; what it decides is the pure [`Watch::step`].

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::{Body, Frame, SizeHint};
use hyper::service::Service;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// When a connection is closed for doing nothing useful.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardConfig {
    /// No request and nothing written for this long (between requests), or no byte moved
    /// either way for this long (during one): closed. Longer than a Go client's idle timeout
    /// (90 s), so the apiserver closes its idle connections first.
    pub idle: Duration,
    /// A request still arriving this long after its first byte: closed. Still arriving means
    /// its head is incomplete, bytes of its body are still coming in, or the handler is waiting
    /// for body bytes the client has not sent ([`GuardedBody`] tells that apart from a handler
    /// busy before it reads the body, which is not the client's fault).
    pub request: Duration,
    /// How often the counters are looked at. A request's clock starts at the first look that
    /// sees it, so the limits are enforced never early and at most two ticks late.
    pub tick: Duration,
}

impl Default for GuardConfig {
    /// `request` is 10 s: kube-apiserver's default webhook `timeoutSeconds` and Prometheus's
    /// default scrape timeout, so a request still arriving then is one its sender has given up
    /// on, while reading a real one takes milliseconds. Under a flood of tricklers that fills
    /// every slot, a waiting client is served about this long later.
    fn default() -> Self {
        Self { idle: Duration::from_secs(120), request: Duration::from_secs(10), tick: Duration::from_secs(2) }
    }
}

/// What one connection has done so far.
#[derive(Debug, Default)]
pub struct Activity {
    read: AtomicU64,
    written: AtomicU64,
    requests: AtomicU64,
    in_flight: AtomicU64,
    awaiting_body: AtomicU64,
}

/// A reading of [`Activity`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Bytes read from the connection.
    pub read: u64,
    /// Bytes written to it.
    pub written: u64,
    /// Requests whose head has been read.
    pub requests: u64,
    /// Requests whose response body has not ended yet.
    pub in_flight: u64,
    /// Request bodies the handler is waiting on: it asked for the next bytes and the client has
    /// not sent them yet.
    pub awaiting_body: u64,
}

impl Activity {
    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            read: self.read.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            awaiting_body: self.awaiting_body.load(Ordering::Relaxed),
        }
    }
}

/// Why a connection is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Doing something useful: keep it.
    Keep,
    /// Not one byte of a first request by the request deadline (as Go's `ReadHeaderTimeout`
    /// counts from the connection's start): a socket opened and left, which would otherwise hold
    /// a connection slot for the idle timeout.
    Silent,
    /// Between requests, nothing asked or answered for the idle timeout.
    Idle,
    /// A request head still arriving at the request deadline.
    SlowHead,
    /// A request body still arriving, or awaited from the client, after the request deadline.
    SlowBody,
    /// A request being answered moved no byte either way for the idle timeout.
    Stalled,
}

/// The watcher's memory between ticks.
#[derive(Debug, Clone)]
pub struct Watch {
    /// When the connection was opened (after its TLS handshake).
    opened: Instant,
    last: Snapshot,
    /// Since when no byte has moved either way.
    quiet_since: Instant,
    /// Since when no request has come in or finished and nothing has been written. Bytes read
    /// alone do not count: a client trickling a head must not keep its connection alive so.
    active_since: Instant,
    /// Since when bytes have been read without a request head completing.
    partial_since: Option<Instant>,
    /// When the request being answered began: the first look that saw its head arriving, or
    /// else the first look that saw it in flight.
    request_since: Option<Instant>,
}

impl Watch {
    /// A watch over a connection opened at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            opened: now,
            last: Snapshot::default(),
            quiet_since: now,
            active_since: now,
            partial_since: None,
            request_since: None,
        }
    }

    /// Look at `seen` at time `now`.
    pub fn step(&mut self, seen: Snapshot, now: Instant, config: &GuardConfig) -> Verdict {
        let last = std::mem::replace(&mut self.last, seen);
        let elapsed = |since: Instant| now.duration_since(since);
        if seen.read != last.read || seen.written != last.written {
            self.quiet_since = now;
        }
        if seen.in_flight > 0 {
            // A request that came in since the last look (the first, or the next one on a
            // keep-alive connection) starts its clock; its head may have begun earlier.
            if seen.requests != last.requests || self.request_since.is_none() {
                self.request_since = Some(self.partial_since.unwrap_or(now));
            }
            self.active_since = now;
            self.partial_since = None;
            // Bytes still coming in past the deadline are its body, trickled (or a pipelined
            // next request, which Go clients such as the apiserver and Prometheus never send);
            // a handler still waiting for body bytes then waits on a client that stopped.
            let overdue = self.request_since.is_some_and(|since| elapsed(since) >= config.request);
            if overdue && (seen.read != last.read || seen.awaiting_body > 0) {
                return Verdict::SlowBody;
            }
            // Otherwise it is being answered, maybe slowly, maybe streaming: cut off only if it
            // has moved nothing for the idle timeout.
            return if elapsed(self.quiet_since) >= config.idle { Verdict::Stalled } else { Verdict::Keep };
        }
        self.request_since = None;
        // A request that ended since the last look is a boundary: what it read was its body,
        // not the start of another head.
        let boundary = seen.requests != last.requests || last.in_flight > 0;
        if boundary || seen.written != last.written {
            self.active_since = now;
        }
        if boundary {
            self.partial_since = None;
        } else if seen.read != last.read {
            self.partial_since.get_or_insert(now);
        }
        if seen.requests == 0 && seen.read == 0 && elapsed(self.opened) >= config.request {
            Verdict::Silent
        } else if self.partial_since.is_some_and(|since| elapsed(since) >= config.request) {
            Verdict::SlowHead
        } else if elapsed(self.active_since) >= config.idle {
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
    /// Count the bytes `inner` moves into `activity`.
    pub fn new(inner: T, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }

    /// Count what a write reports written.
    fn wrote(&self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = polled {
            count(&self.activity.written, n);
        }
        polled
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
        self.wrote(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(polled)
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

/// A connection's service, counting requests and those still being answered: from the call
/// until the response body has been sent (or dropped), so a long or paused response counts as
/// in flight. The request's body reaches the inner service as a [`GuardedBody`].
#[derive(Debug, Clone)]
pub struct CountedService<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> CountedService<S> {
    /// Count the requests `inner` answers into `activity`.
    pub fn new(inner: S, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<S, R, B> Service<http::Request<R>> for CountedService<S>
where
    S: Service<http::Request<GuardedBody<R>>, Response = http::Response<B>>,
    R: Body,
{
    type Response = http::Response<CountedBody<B>>;
    type Error = S::Error;
    type Future = InFlight<S::Future>;

    fn call(&self, request: http::Request<R>) -> Self::Future {
        self.activity.requests.fetch_add(1, Ordering::Relaxed);
        let answering = Held::start(&self.activity, |a| &a.in_flight);
        // A body already complete (a GET's) can never be awaited: it needs no handle on the counters.
        let request = request.map(|inner| {
            let activity = (!inner.is_end_stream()).then(|| self.activity.clone());
            GuardedBody { inner, awaiting: None, activity }
        });
        InFlight { inner: self.inner.call(request), answering: Some(answering) }
    }
}

/// One count held in one of a connection's counters (a request in flight, a body awaited):
/// added when made, taken away when dropped, however the holder ends.
struct Held {
    activity: Arc<Activity>,
    counter: fn(&Activity) -> &AtomicU64,
}

impl Held {
    fn start(activity: &Arc<Activity>, counter: fn(&Activity) -> &AtomicU64) -> Self {
        counter(activity).fetch_add(1, Ordering::Relaxed);
        Self { activity: activity.clone(), counter }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        (self.counter)(&self.activity).fetch_sub(1, Ordering::Relaxed);
    }
}

pin_project! {
    /// A request being answered; its count moves into the response body.
    pub struct InFlight<F> {
        #[pin]
        inner: F,
        answering: Option<Held>,
    }
}

impl<F, B, E> Future for InFlight<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
{
    type Output = Result<http::Response<CountedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.inner.poll(cx) {
            Poll::Pending => Poll::Pending,
            // An error drops the count here; a response carries it until its body ends.
            Poll::Ready(result) => {
                let answering = this.answering.take();
                Poll::Ready(result.map(|response| response.map(|inner| CountedBody { inner, answering })))
            }
        }
    }
}

pin_project! {
    /// A response body that keeps its request counted in flight until it ends or is dropped.
    pub struct CountedBody<B> {
        #[pin]
        inner: B,
        answering: Option<Held>,
    }
}

impl<B: Body> Body for CountedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = polled {
            this.answering.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pin_project! {
    /// A request body that tells its connection's guard while the handler waits for bytes the
    /// client has not sent: from a read that found nothing until the next frame (or the end, or
    /// the body being dropped). A body the handler has not asked for yet (it is busy, say
    /// authenticating before it forwards an upload) is not awaited, so only a client that stops
    /// mid-body is cut at the request deadline.
    pub struct GuardedBody<B> {
        #[pin]
        inner: B,
        awaiting: Option<Held>,
        activity: Option<Arc<Activity>>,
    }
}

impl<B: Body> Body for GuardedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        if let (true, Some(activity)) = (polled.is_pending(), this.activity.as_ref()) {
            this.awaiting.get_or_insert_with(|| Held::start(activity, |a| &a.awaiting_body));
        } else {
            this.awaiting.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: GuardConfig =
        GuardConfig { idle: Duration::from_secs(60), request: Duration::from_secs(20), tick: Duration::from_secs(5) };

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    /// (seconds, read, written, requests, in flight) per tick, and the verdict expected at the
    /// last one (all earlier ticks must say Keep).
    type Tick = (u64, u64, u64, u64, u64);

    #[test]
    fn verdicts() {
        let cases: &[(&str, &[Tick], Verdict)] = &[
            ("opened, nothing sent yet", &[(5, 0, 0, 0, 0), (15, 0, 0, 0, 0)], Verdict::Keep),
            ("opened, nothing sent by the request deadline", &[(5, 0, 0, 0, 0), (20, 0, 0, 0, 0)], Verdict::Silent),
            ("quiet after a request, not yet idle", &[(5, 500, 300, 1, 0), (55, 500, 300, 1, 0)], Verdict::Keep),
            (
                "keep-alive traffic now and then",
                &[(30, 500, 300, 1, 0), (60, 500, 300, 1, 0), (85, 1000, 600, 2, 0), (140, 1000, 600, 2, 0)],
                Verdict::Keep,
            ),
            ("idle after the last request", &[(5, 500, 300, 1, 0), (65, 500, 300, 1, 0)], Verdict::Idle),
            (
                "a slow handler that keeps writing",
                &[(5, 500, 10, 1, 1), (50, 500, 20, 1, 1), (100, 500, 30, 1, 1), (150, 500, 40, 1, 1)],
                Verdict::Keep,
            ),
            (
                "a request moving nothing either way",
                &[(5, 500, 0, 1, 1), (40, 500, 0, 1, 1), (65, 500, 0, 1, 1)],
                Verdict::Stalled,
            ),
            (
                "an upload that ends before the deadline, then a long answer",
                &[
                    (5, 500, 0, 1, 1),
                    (10, 9000, 0, 1, 1),
                    (20, 90000, 0, 1, 1),
                    (45, 90000, 0, 1, 1),
                    (100, 90000, 9, 1, 1),
                ],
                Verdict::Keep,
            ),
            (
                "an upload still arriving after the deadline",
                &[(5, 500, 0, 1, 1), (10, 9000, 0, 1, 1), (25, 90000, 0, 1, 1)],
                Verdict::SlowBody,
            ),
            (
                "a body trickled a byte per tick",
                &[(5, 500, 0, 1, 1), (10, 501, 0, 1, 1), (15, 502, 0, 1, 1), (20, 503, 0, 1, 1), (25, 504, 0, 1, 1)],
                Verdict::SlowBody,
            ),
            (
                "a trickled body that pauses past the deadline is cut at its next byte",
                &[(5, 500, 0, 1, 1), (10, 501, 0, 1, 1), (30, 501, 0, 1, 1), (45, 501, 0, 1, 1), (50, 502, 0, 1, 1)],
                Verdict::SlowBody,
            ),
            (
                "the deadline counts from the head's first byte",
                &[(5, 10, 0, 0, 0), (15, 500, 0, 1, 1), (20, 510, 0, 1, 1), (25, 520, 0, 1, 1)],
                Verdict::SlowBody,
            ),
            (
                "the next request on a keep-alive connection has a deadline of its own",
                &[(5, 500, 0, 1, 1), (30, 500, 300, 1, 1), (35, 1000, 600, 2, 1), (40, 1100, 600, 2, 1)],
                Verdict::Keep,
            ),
            (
                "a long download still counted in flight",
                &[(5, 500, 9000, 1, 1), (30, 500, 90000, 1, 1), (90, 500, 900000, 1, 1), (150, 500, 9000000, 1, 1)],
                Verdict::Keep,
            ),
            (
                "a body read after the last look, then idle keep-alive",
                &[(5, 500, 0, 1, 1), (10, 9000, 300, 1, 0), (30, 9000, 300, 1, 0), (55, 9000, 300, 1, 0)],
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
                let seen = Snapshot { read, written, requests, in_flight, awaiting_body: 0 };
                verdict = watch.step(seen, at(start, secs), &CONFIG);
                if i + 1 < ticks.len() {
                    assert_eq!(verdict, Verdict::Keep, "{what}: tick {i}");
                }
            }
            assert_eq!(verdict, *want, "{what}");
        }
    }

    #[test]
    fn the_request_deadline_is_the_apiservers_webhook_timeout() {
        // kube-apiserver gives a webhook 10 s by default (timeoutSeconds); a request still
        // arriving then has been given up on by its sender.
        assert_eq!(GuardConfig::default().request, Duration::from_secs(10));
        assert!(GuardConfig::default().request < GuardConfig::default().idle);
    }

    #[test]
    fn verdicts_on_a_body_the_handler_waits_for() {
        /// (seconds, bytes read, bodies awaited) per tick of one request in flight.
        type Seen = (u64, u64, u64);
        // The verdict expected at the last tick (all earlier ticks must say Keep).
        let cases: &[(&str, &[Seen], Verdict)] = &[
            (
                "a body that stops coming while the handler waits",
                &[(5, 500, 1), (15, 500, 1), (25, 500, 1)],
                Verdict::SlowBody,
            ),
            ("a handler busy before it reads the body", &[(5, 500, 0), (25, 500, 0), (60, 500, 0)], Verdict::Keep),
            (
                "... until it moves nothing for the idle timeout",
                &[(5, 500, 0), (25, 500, 0), (65, 500, 0)],
                Verdict::Stalled,
            ),
            ("a body that came whole, then a long think", &[(5, 500, 1), (10, 900, 0), (40, 900, 0)], Verdict::Keep),
        ];
        for (what, ticks, want) in cases {
            let start = Instant::now();
            let mut watch = Watch::new(start);
            let mut verdict = Verdict::Keep;
            for (i, &(secs, read, awaiting_body)) in ticks.iter().enumerate() {
                let seen = Snapshot { read, written: 0, requests: 1, in_flight: 1, awaiting_body };
                verdict = watch.step(seen, at(start, secs), &CONFIG);
                if i + 1 < ticks.len() {
                    assert_eq!(verdict, Verdict::Keep, "{what}: tick {i}");
                }
            }
            assert_eq!(verdict, *want, "{what}");
        }
    }

    #[tokio::test]
    async fn a_body_counts_as_awaited_while_a_read_finds_nothing() {
        use http_body_util::{BodyExt, StreamBody};
        let activity = Arc::new(Activity::default());
        let (send, frames) =
            futures::channel::mpsc::unbounded::<Result<Frame<bytes::Bytes>, std::convert::Infallible>>();
        let mut body = GuardedBody { inner: StreamBody::new(frames), awaiting: None, activity: Some(activity.clone()) };
        let awaited = || activity.snapshot().awaiting_body;
        assert_eq!(awaited(), 0, "not asked for yet");
        assert!(futures::poll!(body.frame()).is_pending());
        assert_eq!(awaited(), 1, "asked for, nothing sent");
        send.unbounded_send(Ok(Frame::data("a".into()))).unwrap();
        assert!(body.frame().await.is_some());
        assert_eq!(awaited(), 0, "a frame came");
        assert!(futures::poll!(body.frame()).is_pending());
        assert_eq!(awaited(), 1);
        drop(body);
        assert_eq!(awaited(), 0, "dropped while awaited");
    }

    #[tokio::test]
    async fn a_request_counts_in_flight_until_its_response_body_ends() {
        use http_body_util::BodyExt;
        /// Answers with a two-frame body after one yield.
        struct Answer;
        impl Service<http::Request<GuardedBody<Empty>>> for Answer {
            type Response = http::Response<http_body_util::StreamBody<Frames>>;
            type Error = std::convert::Infallible;
            type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;
            fn call(&self, _: http::Request<GuardedBody<Empty>>) -> Self::Future {
                Box::pin(async move {
                    tokio::task::yield_now().await;
                    let frames: Vec<Result<Frame<bytes::Bytes>, std::convert::Infallible>> =
                        vec![Ok(Frame::data("a".into())), Ok(Frame::data("b".into()))];
                    Ok(http::Response::new(http_body_util::StreamBody::new(futures::stream::iter(frames))))
                })
            }
        }
        type Frames = futures::stream::Iter<std::vec::IntoIter<Result<Frame<bytes::Bytes>, std::convert::Infallible>>>;
        type Empty = http_body_util::Empty<bytes::Bytes>;

        let activity = Arc::new(Activity::default());
        let service = CountedService::new(Answer, activity.clone());
        let in_flight = || activity.snapshot().in_flight;
        let response = service.call(http::Request::new(Empty::new())).await.unwrap();
        assert_eq!((activity.snapshot().requests, in_flight()), (1, 1), "answered, body not sent");
        let mut body = response.into_body();
        assert!(body.frame().await.is_some());
        assert_eq!(in_flight(), 1, "half the body sent");
        assert!(body.frame().await.is_some());
        assert!(body.frame().await.is_none());
        assert_eq!(in_flight(), 0, "the body ended");

        // Dropped before it answered, or with its body unsent: counted out too.
        drop(service.call(http::Request::new(Empty::new())));
        assert_eq!(in_flight(), 0);
        drop(service.call(http::Request::new(Empty::new())).await.unwrap());
        assert_eq!((activity.snapshot().requests, in_flight()), (3, 0));
    }

    #[tokio::test]
    async fn counts_bytes_both_ways() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let activity = Arc::new(Activity::default());
        let (mut client, server) = tokio::io::duplex(64);
        let mut counted = CountedIo::new(server, activity.clone());
        client.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        counted.read_exact(&mut buf).await.unwrap();
        counted.write_all(b"hi").await.unwrap();
        assert_eq!((activity.snapshot().read, activity.snapshot().written), (5, 2));
    }
}
