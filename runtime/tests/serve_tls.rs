//! The TLS server over real sockets and real TLS: connections that do nothing useful are closed
//! by their guard (idle, a request head or body trickled in past the request deadline, a body
//! that stops coming, a request that moves nothing), busy ones are not (nor a handler that thinks
//! before it reads the body), tricklers filling every slot do not keep others out, shutdown
//! drains (the request in flight finishes, idle keep-alive connections close, the server
//! returns), and connections beyond the limit wait for a free slot.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use myownshell_runtime::guard::GuardConfig;
use myownshell_runtime::server::{RequestBody, ServeOptions, serve_tls_with};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

const GUARD: GuardConfig = GuardConfig {
    idle: Duration::from_millis(1500),
    request: Duration::from_millis(800),
    tick: Duration::from_millis(100),
};

const DRAIN: Duration = Duration::from_millis(1200);

/// How late past the request deadline a trickler may be cut: the guard looks every tick and
/// starts a request's clock at the first look that sees it, plus room for a busy machine.
const DEADLINE_SLACK: Duration = Duration::from_millis(2000);

struct Server {
    addr: SocketAddr,
    client_tls: Arc<rustls::ClientConfig>,
    shutdown: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
    /// How many requests have reached the handler.
    arrived: watch::Receiver<usize>,
}

impl Server {
    /// Wait until `n` requests have reached the handler (they are in flight from then on).
    async fn until_arrived(&self, n: usize) {
        let mut arrived = self.arrived.clone();
        let reached = tokio::time::timeout(Duration::from_secs(5), arrived.wait_for(|count| *count >= n)).await;
        assert!(reached.is_ok_and(|r| r.is_ok()), "{} of {n} requests arrived", *self.arrived.borrow());
    }
}

/// A body that sends a chunk every `every`, `chunks` times.
fn trickling_body(every: Duration, chunks: usize) -> BoxBody<Bytes, Infallible> {
    let frames = futures::stream::unfold(0, move |sent| async move {
        if sent == chunks {
            return None;
        }
        tokio::time::sleep(every).await;
        Some((Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"."))), sent + 1))
    });
    BodyExt::boxed(StreamBody::new(frames))
}

/// How long `/think` waits before it reads the request body: past the request deadline, short of
/// the idle timeout.
const THINK: Duration = Duration::from_millis(1150);

/// A server whose handler answers `GET /slow` after `slow`, `GET /silent` after three idle
/// timeouts, streams `GET /stream` for two idle timeouts, reads the body of `/think` only after
/// [`THINK`], and answers anything else at once. All but `/think` read the whole body first.
async fn start(slow: Duration) -> Server {
    start_with(slow, ServeOptions { guard: GUARD, drain_timeout: DRAIN, ..ServeOptions::default() }).await
}

async fn start_with(slow: Duration, options: ServeOptions) -> Server {
    let myownshell_envtest::tls::LoopbackTls { server: tls, client: client_tls, .. } =
        myownshell_envtest::tls::loopback("guard-test-ca").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let (arrivals, arrived) = watch::channel(0usize);
    let arrivals = Arc::new(arrivals);
    let make_service = move |_| {
        let arrivals = arrivals.clone();
        hyper::service::service_fn(move |request: http::Request<RequestBody>| {
            arrivals.send_modify(|count| *count += 1);
            async move {
                let path = request.uri().path().to_owned();
                if path == "/think" {
                    tokio::time::sleep(THINK).await;
                }
                // Read the whole body, as a real handler does.
                let _ = request.into_body().collect().await;
                let body = match path.as_str() {
                    "/slow" => {
                        tokio::time::sleep(slow).await;
                        Full::new(Bytes::from_static(b"ok")).boxed()
                    }
                    "/silent" => {
                        tokio::time::sleep(GUARD.idle * 3).await;
                        Full::new(Bytes::from_static(b"late")).boxed()
                    }
                    "/stream" => trickling_body(GUARD.idle / 4, 8),
                    _ => Full::new(Bytes::from_static(b"ok")).boxed(),
                };
                Ok::<_, Infallible>(http::Response::new(body))
            }
        })
    };
    let task = tokio::spawn(serve_tls_with(listener, tls, make_service, options, shutdown.clone()));
    Server { addr, client_tls, shutdown, task, arrived }
}

async fn tls_connect(server: &Server) -> TlsStream<TcpStream> {
    tls_connect_to(server.addr, server.client_tls.clone()).await
}

async fn tls_connect_to(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tokio_rustls::TlsConnector::from(tls).connect(ServerName::try_from("127.0.0.1").unwrap(), tcp).await.unwrap()
}

/// Send one byte every `every` until the server closes the connection (seen by a read, so
/// at once); how long that took from `since`. Fails after `limit`.
async fn trickle_until_closed(
    stream: &mut TlsStream<TcpStream>,
    since: Instant,
    every: Duration,
    limit: Duration,
) -> Duration {
    let mut buf = [0u8; 256];
    loop {
        assert!(since.elapsed() < limit, "still open after {limit:?}: the trickle kept it alive");
        match tokio::time::timeout(every, stream.read(&mut buf)).await {
            // EOF, a reset, or a close without close_notify: closed either way.
            Ok(Ok(0) | Err(_)) => return since.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => {
                if stream.write_all(b"x").await.is_err() || stream.flush().await.is_err() {
                    return since.elapsed();
                }
            }
        }
    }
}

/// A head announcing a body far larger than will ever be sent.
const ENDLESS_POST: &[u8] = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n";

/// Read until the server closes the connection; how long that took from `since`. Fails after
/// `deadline`.
async fn closed_after(stream: &mut TlsStream<TcpStream>, since: Instant, deadline: Duration) -> Duration {
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout_at((since + deadline).into(), stream.read(&mut buf)).await {
            Err(_) => panic!("still open after {deadline:?}"),
            // EOF, a reset, or a close without close_notify: closed either way.
            Ok(Ok(0) | Err(_)) => return since.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn http_client(server: &Server) -> (Sender, JoinHandle<()>) {
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls_connect(server).await)).await.unwrap();
    (
        sender,
        tokio::spawn(async move {
            let _ = conn.await;
        }),
    )
}

async fn get(sender: &mut Sender, path: &str) -> Result<String, hyper::Error> {
    sender.ready().await?;
    let request = http::Request::get(path).header("host", "127.0.0.1").body(Empty::new()).unwrap();
    let response = sender.send_request(request).await?;
    let body = response.into_body().collect().await?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_silent_connection_is_closed_at_the_request_deadline() {
    // Opened and left without a request: it would hold a slot for the idle timeout.
    let server = start(Duration::ZERO).await;
    let mut stream = tls_connect(&server).await;
    let started = Instant::now();
    let took = closed_after(&mut stream, started, Duration::from_secs(5)).await;
    assert!(took >= GUARD.request, "closed after {took:?}, before the request deadline");
    assert!(took < GUARD.idle, "closed after {took:?}: waited for the idle timeout");
}

#[tokio::test]
async fn a_keep_alive_connection_left_after_a_request_is_closed_after_the_idle_timeout() {
    let server = start(Duration::ZERO).await;
    let mut stream = tls_connect(&server).await;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut answer = [0u8; 512];
    let read = stream.read(&mut answer).await.unwrap();
    assert!(answer[..read].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..read]));
    let started = Instant::now();
    let took = closed_after(&mut stream, started, Duration::from_secs(5)).await;
    assert!(took >= GUARD.idle, "closed after {took:?}, before the idle timeout");
}

#[tokio::test]
async fn a_trickled_request_head_is_closed_at_the_request_deadline() {
    let server = start(Duration::ZERO).await;
    let mut stream = tls_connect(&server).await;
    let started = Instant::now();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    // One header byte every 50 ms keeps bytes flowing; the head never completes.
    let trickle = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if stream.write_all(b"X").await.is_err() || stream.flush().await.is_err() {
                return started.elapsed();
            }
        }
    };
    let took = tokio::time::timeout(Duration::from_secs(5), trickle).await.expect("the server kept the trickle open");
    assert!(took >= GUARD.request, "closed after {took:?}");
    assert!(took < GUARD.idle + Duration::from_secs(1), "closed only after {took:?}: the trickle kept it alive");
}

#[tokio::test]
async fn busy_and_regularly_used_connections_stay_open() {
    // Slower than the request deadline: the deadline is for receiving a request, not for
    // answering it.
    let server = start(GUARD.request + GUARD.request / 2).await;
    let (mut sender, _conn) = http_client(&server).await;
    assert_eq!(get(&mut sender, "/slow").await.unwrap(), "ok");
    // A response that keeps coming for longer than the idle timeout is not cut off.
    assert_eq!(get(&mut sender, "/stream").await.unwrap(), "........");
    // A keep-alive connection used every fifth of the idle timeout stays the same connection.
    for _ in 0..4 {
        tokio::time::sleep(GUARD.idle / 5).await;
        assert_eq!(get(&mut sender, "/").await.unwrap(), "ok");
    }
    // Left alone, it is closed.
    let started = Instant::now();
    loop {
        if sender.is_closed() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the idle keep-alive connection was never closed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_request_that_moves_nothing_is_closed_after_the_idle_timeout() {
    let server = start(Duration::ZERO).await;
    // A handler that answers nothing for three idle timeouts.
    let (mut sender, _conn) = http_client(&server).await;
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(8), get(&mut sender, "/silent")).await.expect("never closed");
    assert!(answer.is_err(), "answered {answer:?}");
    let took = started.elapsed();
    assert!(took >= GUARD.idle && took < GUARD.idle * 2, "closed after {took:?}");
}

#[tokio::test]
async fn a_request_body_that_stops_coming_is_closed_at_the_request_deadline() {
    assert!(GUARD.request + DEADLINE_SLACK > GUARD.idle, "the idle timeout must not be what closes it");
    let guard = GuardConfig { idle: Duration::from_secs(60), ..GUARD };
    let server =
        start_with(Duration::ZERO, ServeOptions { guard, drain_timeout: DRAIN, ..ServeOptions::default() }).await;
    // A head announcing a body that never comes, and a body that stops half-way.
    for sent in [&b""[..], b"{\"half\": "] {
        let mut stream = tls_connect(&server).await;
        let started = Instant::now();
        stream.write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n").await.unwrap();
        stream.write_all(sent).await.unwrap();
        let took = closed_after(&mut stream, started, GUARD.request + DEADLINE_SLACK).await;
        eprintln!("a body that stopped after {} bytes was closed after {took:?}", sent.len());
        assert!(took >= GUARD.request, "closed after {took:?}, before the deadline");
    }
}

#[tokio::test]
async fn a_handler_that_thinks_before_reading_a_whole_body_is_not_cut() {
    assert!(THINK > GUARD.request + GUARD.tick * 2 && THINK < GUARD.idle, "THINK must fall between the limits");
    let server = start(Duration::ZERO).await;
    let mut stream = tls_connect(&server).await;
    let started = Instant::now();
    stream.write_all(b"POST /think HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}").await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 256];
    while !answer.ends_with(b"ok") {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
            other => {
                panic!("no answer after {:?}: {other:?}, got {:?}", started.elapsed(), String::from_utf8_lossy(&answer))
            }
        }
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    assert!(started.elapsed() >= THINK, "answered after {:?}", started.elapsed());
}

#[tokio::test]
async fn shutdown_finishes_the_request_in_flight_and_closes_idle_connections() {
    let server = start(Duration::from_millis(500)).await;
    let (mut idle, _idle_conn) = http_client(&server).await;
    assert_eq!(get(&mut idle, "/").await.unwrap(), "ok");
    let (mut busy, _busy_conn) = http_client(&server).await;
    let in_flight = tokio::spawn(async move { get(&mut busy, "/slow").await });
    server.until_arrived(2).await;

    let started = Instant::now();
    server.shutdown.cancel();
    assert_eq!(in_flight.await.unwrap().unwrap(), "ok", "the request in flight was answered");
    tokio::time::timeout(Duration::from_secs(5), server.task)
        .await
        .expect("the server did not return")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "draining took {:?}", started.elapsed());
    assert!(idle.is_closed() || get(&mut idle, "/").await.is_err(), "the idle connection is closed");
    assert!(TcpStream::connect(server.addr).await.is_err(), "the listener is closed");
}

#[tokio::test]
async fn shutdown_drops_what_is_still_open_after_the_drain_timeout() {
    let server = start(Duration::ZERO).await;
    let (mut sender, _conn) = http_client(&server).await;
    let silent = tokio::spawn(async move { get(&mut sender, "/silent").await });
    server.until_arrived(1).await;
    let started = Instant::now();
    server.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), server.task)
        .await
        .expect("the server did not return")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(took >= DRAIN && took < DRAIN * 2, "returned after {took:?}");
    let answer = tokio::time::timeout(Duration::from_secs(2), silent).await.expect("the connection is still open");
    assert!(answer.unwrap().is_err(), "the dropped request got an answer");
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_for_a_free_slot() {
    // Idle connections are not closed during the test: only the limit decides.
    let guard = GuardConfig { idle: Duration::from_secs(60), ..GUARD };
    let server = start_with(Duration::ZERO, ServeOptions { guard, drain_timeout: DRAIN, max_connections: 2 }).await;
    let (mut first, first_conn) = http_client(&server).await;
    let (mut second, _second_conn) = http_client(&server).await;
    assert_eq!(get(&mut first, "/").await.unwrap(), "ok");
    assert_eq!(get(&mut second, "/").await.unwrap(), "ok");
    // A third connection gets through TCP (the kernel's backlog) but no TLS answer while both
    // slots are taken.
    let mut third = tokio::spawn(tls_connect_to(server.addr, server.client_tls.clone()));
    let early = tokio::time::timeout(Duration::from_millis(500), &mut third).await;
    assert!(early.is_err(), "a third connection was served while two of two slots were taken");
    // Once one closes, the waiting one is served.
    drop(first);
    first_conn.await.unwrap();
    let stream = tokio::time::timeout(Duration::from_secs(5), third).await;
    assert!(stream.is_ok_and(|s| s.is_ok()), "the waiting connection was not served after a slot freed");
    assert_eq!(get(&mut second, "/").await.unwrap(), "ok");
    server.shutdown.cancel();
}

#[tokio::test]
async fn a_trickled_request_body_is_closed_at_the_request_deadline() {
    let server = start(Duration::ZERO).await;
    let mut stream = tls_connect(&server).await;
    let started = Instant::now();
    stream.write_all(ENDLESS_POST).await.unwrap();
    server.until_arrived(1).await;
    // One body byte per tick: bytes keep moving, so the idle timeout never applies.
    let took = trickle_until_closed(&mut stream, started, GUARD.tick, GUARD.idle * 3).await;
    eprintln!("a trickled body was closed after {took:?} (deadline {:?})", GUARD.request);
    assert!(took >= GUARD.request, "closed after {took:?}, before the deadline");
    assert!(took < GUARD.request + DEADLINE_SLACK, "closed only after {took:?}");
}

#[tokio::test]
async fn requests_are_answered_while_tricklers_hold_every_slot() {
    const SLOTS: usize = 3;
    // Idle connections stay open during the test: only the deadline frees a slot.
    let guard = GuardConfig { idle: Duration::from_secs(60), ..GUARD };
    let server = start_with(Duration::ZERO, ServeOptions { guard, drain_timeout: DRAIN, max_connections: SLOTS }).await;
    // Each trickler holds a slot with a request whose body comes one byte per tick, and
    // connects again as soon as it is cut.
    let tricklers: Vec<JoinHandle<()>> = (0..SLOTS)
        .map(|_| {
            let (addr, tls) = (server.addr, server.client_tls.clone());
            tokio::spawn(async move {
                loop {
                    let mut stream = tls_connect_to(addr, tls.clone()).await;
                    if stream.write_all(ENDLESS_POST).await.is_err() {
                        continue;
                    }
                    trickle_until_closed(&mut stream, Instant::now(), GUARD.tick, Duration::from_secs(3600)).await;
                }
            })
        })
        .collect();
    server.until_arrived(SLOTS).await;

    // A client queued behind them is answered once the deadline cuts them.
    let started = Instant::now();
    let answer = tokio::time::timeout(GUARD.request + Duration::from_secs(2), async {
        let (mut sender, _conn) = http_client(&server).await;
        get(&mut sender, "/").await
    })
    .await;
    let took = started.elapsed();
    for trickler in &tricklers {
        trickler.abort();
    }
    let answer = answer.unwrap_or_else(|_| panic!("no answer in {took:?} while {SLOTS} tricklers held every slot"));
    eprintln!("answered after {took:?} while {SLOTS} tricklers held every slot (deadline {:?})", GUARD.request);
    assert_eq!(answer.unwrap(), "ok");
    assert!(took < GUARD.request + DEADLINE_SLACK, "answered only after {took:?}");
    server.shutdown.cancel();
}
