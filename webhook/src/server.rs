//! The thin HTTP layer: route the three webhook paths, read the body (bounded), hand it to
//! [`crate::dispatch::review`], write the answer, count it, and hand connections into shells
//! to the record ([`crate::connect::record`]).
//!
//! The admission port serves exactly three POST paths, so it is a plain hyper service rather
//! than a router: the apiserver calls it for every write of a `MyOwnShell` and every connection
//! to a pod that might be a shell's, and a router's per-request work was a measurable share of
//! the answer time (see `cargo xtask bench webhook`).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Body;
use myownshell_api::names;
use myownshell_runtime::server::RequestBody;

use crate::admission::Policy;
use crate::classes::ClassIndex;
use crate::classes::usage::{self, ClassUsage};
use crate::connect::gate::Connection;
use crate::connect::record::Recorder;
use crate::connect::shell_index::ShellIndex;
use crate::dispatch::{self, Answer, Outcome, Webhook};
use crate::earlier_pods::EarlierPods;
use crate::metrics::{Metrics, RequestResult};

/// Largest AdmissionReview body read. The apiserver caps objects at 3 MiB and a review holds
/// the object and the old object; anything bigger is not from the apiserver.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// An oversized body is read and thrown away up to this size, so the client gets its 400 on a
/// connection that stays usable; beyond it the connection is closed after the answer.
const DRAIN_BYTES: usize = 64 * 1024 * 1024;
/// The most review bytes held at once, across every connection, in two pools. An answer needs
/// its whole body in memory: the apiserver's reviews are a few KiB (a shell's spec, a
/// connection), at most a few MiB (two objects of etcd's 1.5 MiB). Bodies up to [`SMALL_BODY`]
/// share [`SMALL_BUDGET_BYTES`], bigger ones [`LARGE_BUDGET_BYTES`], so that bodies no apiserver
/// sends wait their turn (or their deadline) instead of filling the pod (20 announced 8 MiB
/// bodies once took the webhook from 30 to 197 MB, over its pod's 128 Mi limit), and never hold
/// up the small reviews every exec and every shell waits on.
pub const SMALL_BODY: usize = 64 * 1024;
/// The small bodies' pool.
pub const SMALL_BUDGET_BYTES: usize = 16 * 1024 * 1024;
/// The large bodies' pool.
pub const LARGE_BUDGET_BYTES: usize = 32 * 1024 * 1024;
/// The budget's unit: a permit is a KiB.
const BUDGET_UNIT: usize = 1024;

/// What is left of the two pools of body bytes, shared by every connection.
#[derive(Debug)]
pub struct BodyBudget {
    small: tokio::sync::Semaphore,
    large: tokio::sync::Semaphore,
}

impl BodyBudget {
    /// Both pools full.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            small: tokio::sync::Semaphore::new(SMALL_BUDGET_BYTES / BUDGET_UNIT),
            large: tokio::sync::Semaphore::new(LARGE_BUDGET_BYTES / BUDGET_UNIT),
        })
    }

    /// Hold room for a body that announces `content_length` (none: the most a body may be)
    /// until the permit is dropped; `None` once the webhook is stopping.
    pub async fn hold(&self, content_length: Option<usize>) -> Option<tokio::sync::SemaphorePermit<'_>> {
        let bytes = content_length.unwrap_or(MAX_BODY_BYTES).min(MAX_BODY_BYTES);
        let units = u32::try_from(bytes.div_ceil(BUDGET_UNIT).max(1)).unwrap_or(u32::MAX);
        let pool = if bytes <= SMALL_BODY { &self.small } else { &self.large };
        pool.acquire_many(units).await.ok()
    }
}

/// What the admission handlers share.
#[derive(Clone)]
pub struct AppState {
    /// `--max-size`, `--allowed-registries` and `--admin-groups`.
    pub policy: Policy,
    /// Where each answer is counted.
    pub metrics: Arc<Metrics>,
    /// What the webhook knows of every shell (who may connect, whose it is).
    pub shells: Arc<ShellIndex>,
    /// The shell classes.
    pub classes: Arc<ClassIndex>,
    /// Who may use a class (SubjectAccessReview); `None`: nobody may use a class that needs a
    /// grant (tests and benchmarks of the pure path).
    pub class_usage: Option<Arc<ClassUsage>>,
    /// Where connections into shells go to be recorded; `None`: counted only.
    pub recorder: Option<Recorder>,
    /// Where a new shell's inherited pods are looked for ([`crate::earlier_pods`]); `None`: not
    /// looked for (tests and benchmarks of the pure path).
    pub earlier_pods: Option<EarlierPods>,
    /// Cancelled when the webhook starts to stop (SIGTERM): from then on every answer carries
    /// `Connection: close`, so that the apiserver closes each keep-alive connection it used
    /// instead of reusing it after this pod stops. (It pools connections by the Service's name,
    /// not by the pod, so leaving the endpoints does not stop it from reusing one; and a POST
    /// written onto a connection the server is closing is not retried: "server closed idle
    /// connection".) `None`: never (tests and benchmarks).
    pub draining: Option<tokio_util::sync::CancellationToken>,
    /// Whether this connection's caller is answered at all: the apiserver, proven by its client
    /// certificate when `--apiserver-client-ca-file` is set (anyone else gets 403 before a byte
    /// of their body is read, on every path: the connect webhook's answers leave a record, and
    /// every path's body takes memory); anyone when it is not.
    pub from_apiserver: bool,
    /// What is left of the bytes bodies may hold ([`BodyBudget`]), shared by every connection.
    pub body_budget: Arc<BodyBudget>,
}

impl AppState {
    /// The state of a webhook that knows no shell and records nothing (tests, benchmarks).
    pub fn new(policy: Policy, metrics: Arc<Metrics>) -> Self {
        Self {
            policy,
            metrics,
            shells: Arc::new(ShellIndex::of([])),
            classes: Arc::new(ClassIndex::of([])),
            class_usage: None,
            recorder: None,
            earlier_pods: None,
            draining: None,
            from_apiserver: true,
            body_budget: BodyBudget::new(),
        }
    }

    /// This state for one connection, whose caller is the apiserver or not (see
    /// [`AppState::from_apiserver`]).
    pub fn for_caller(&self, from_apiserver: bool) -> Self {
        Self { from_apiserver, ..self.clone() }
    }
}

/// An HTTP response of the admission port.
pub type Response = http::Response<Full<Bytes>>;

fn plain(status: StatusCode, text: impl Into<Bytes>) -> Response {
    let mut response = http::Response::new(Full::new(text.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn json(body: Vec<u8>) -> Response {
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Answer one review body; the pure part is [`dispatch::review`]. A shell's creation is not
/// checked for inherited pods here (see [`answer_checked`]).
pub fn answer(webhook: Webhook, body: &[u8], state: &AppState, started: Instant) -> Response {
    finish(webhook, review(webhook, body, state), state, started)
}

fn review<'a>(webhook: Webhook, body: &'a [u8], state: &AppState) -> Answer<'a> {
    dispatch::review_with_classes(webhook, body, &state.policy, &state.shells, &state.classes)
}

/// [`answer`], a shell's creation refused while pods named as its own run
/// ([`crate::earlier_pods`]), and a class used by someone RBAC does not let ([`usage`]).
///
/// The two questions to the apiserver are boxed: a future holds room for its largest await, and
/// theirs (the cached SubjectAccessReview's 904 bytes, 7.5 KB before the review cache boxed its
/// misses and its lookup; the pod list's 1.9 KB) made every review's future 8.6 KB, which hyper
/// moves into its connection at every request, where most reviews ask neither. Boxed, only the
/// reviews that ask pay, with one allocation (`tests/allocations.rs` holds the size).
pub async fn answer_checked(webhook: Webhook, body: &[u8], state: &AppState, started: Instant) -> Response {
    let mut answer = review(webhook, body, state);
    if let Answer::Review { response, outcome, class_use: Some(check), .. } = &mut answer {
        let refusal = match &state.class_usage {
            None => Some(usage::refusal(check)),
            Some(usage_of) => match Box::pin(usage_of.allows(check)).await {
                Ok(true) => None,
                Ok(false) => Some(usage::refusal(check)),
                // No answer is no: never admit a class's use unasked.
                Err(e) => Some(format!(
                    "cannot tell whether {} may {} {:?}: {e}",
                    check.user.username,
                    if check.approve { "approve MyOwnShell" } else { "use MyOwnShellClass" },
                    check.class
                )),
            },
        };
        if let Some(refusal) = refusal {
            *response = crate::review::Response::deny(response.uid.clone(), 403, "Forbidden", refusal);
            *outcome = Outcome::of(response);
        }
    }
    if let (Some(pods), Answer::Review { response, outcome, new_shell: Some(shell), .. }) =
        (&state.earlier_pods, &mut answer)
        && let Some(refusal) = Box::pin(pods.refusal(&shell.namespace, &shell.name)).await
    {
        *response = crate::review::Response::deny(response.uid.clone(), 403, "Forbidden", refusal);
        *outcome = Outcome::of(response);
    }
    finish(webhook, answer, state, started)
}

/// Write `answer`, count it, and hand its connections to the record.
fn finish(webhook: Webhook, answer: Answer<'_>, state: &AppState, started: Instant) -> Response {
    let (response, operation, outcome, connections) = match answer {
        Answer::BadRequest(reason) => return bad_request(webhook, reason, state, started),
        Answer::Review { response, operation, outcome, connections, .. } => (response, operation, outcome, connections),
    };
    if outcome == Outcome::Invalid {
        tracing::warn!(
            webhook = webhook.as_str(),
            reason = response.message(),
            "denied an undecodable admission request"
        );
    }
    let answered = json(response.to_review_json());
    state.metrics.observe(webhook, operation, RequestResult::from(outcome), started.elapsed());
    record(connections, response.allowed, state);
    answered
}

/// Count each connection into a shell and hand it to the record (after the answer is made: the
/// record never delays it).
fn record(connections: Vec<Connection>, allowed: bool, state: &AppState) {
    if let Some(first) = connections.first() {
        state.metrics.connection(first.kind, allowed);
    }
    for connection in connections {
        if !allowed {
            tracing::info!(user = %connection.user, pod = %connection.pod, namespace = %connection.namespace, shell = %connection.shell.name, kind = connection.kind.as_str(), "refused a connection to a shell");
        }
        if let Some(recorder) = &state.recorder
            && !recorder.record(connection)
        {
            state.metrics.connections_unrecorded.inc();
        }
    }
}

/// HTTP 400: the body is not an AdmissionReview the apiserver sends. Logged and counted once.
fn bad_request(webhook: Webhook, reason: String, state: &AppState, started: Instant) -> Response {
    tracing::warn!(webhook = webhook.as_str(), %reason, "rejected a malformed admission request");
    state.metrics.observe(webhook, None, RequestResult::BadRequest, started.elapsed());
    plain(StatusCode::BAD_REQUEST, reason)
}

/// The body, at most [`MAX_BODY_BYTES`] of it.
async fn read_body<B>(body: B, content_length: Option<usize>) -> Result<Bytes, String>
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let too_large = || format!("the request body is larger than {MAX_BODY_BYTES} bytes");
    if let Some(length) = content_length.filter(|n| *n <= MAX_BODY_BYTES) {
        // The common case: the length is announced and small enough, and hyper never reads
        // past an announced length. A body that came in one frame (an apiserver's review of a
        // few KiB, read with its head) is that frame, a slice of hyper's read buffer, taken as
        // it is; a longer one is read into one buffer of its size (collecting the frames and
        // joining them would hold the body twice).
        let mut body = std::pin::pin!(body);
        let mut first: Option<Bytes> = None;
        let mut buf = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("cannot read the request body: {e}"))?;
            let Ok(data) = frame.into_data() else { continue };
            if first.is_none() && buf.is_empty() && data.len() == length {
                first = Some(data);
                continue;
            }
            if buf.capacity() == 0 {
                buf.reserve(length);
            }
            if let Some(earlier) = first.take() {
                buf.extend_from_slice(&earlier);
            }
            buf.extend_from_slice(&data);
        }
        return Ok(first.unwrap_or_else(|| buf.freeze()));
    }
    // No length, or one beyond the bound: read what comes, keeping nothing once it is beyond
    // the bound (an oversized body is drained, not held, so the client gets its 400 on a
    // connection that stays usable).
    let mut body = std::pin::pin!(body);
    let mut buf = BytesMut::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("cannot read the request body: {e}"))?;
        if let Ok(data) = frame.into_data() {
            total = total.saturating_add(data.len());
            if total <= MAX_BODY_BYTES {
                buf.extend_from_slice(&data);
            } else if total > DRAIN_BYTES {
                break;
            } else if !buf.is_empty() {
                buf = BytesMut::new();
            }
        }
    }
    if total > MAX_BODY_BYTES {
        return Err(too_large());
    }
    Ok(buf.freeze())
}

/// Route, read and answer one request of the admission port.
pub async fn handle<B>(state: &AppState, request: http::Request<B>) -> Response
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let started = Instant::now();
    let webhook = match (request.uri().path(), request.method()) {
        (names::MUTATE_PATH | names::VALIDATE_PATH | names::CONNECT_PATH, &Method::POST) if !state.from_apiserver => {
            // Someone other than the apiserver: no answer (so nothing recorded), and not a byte
            // of the body read.
            tracing::debug!("a review without the apiserver's client certificate");
            return plain(
                StatusCode::FORBIDDEN,
                "the webhook answers only the apiserver: present the client certificate that \
                 --apiserver-client-ca-file signs\n",
            );
        }
        (names::MUTATE_PATH, &Method::POST) => Webhook::Mutate,
        (names::VALIDATE_PATH, &Method::POST) => Webhook::Validate,
        (names::CONNECT_PATH, &Method::POST) => Webhook::Connect,
        (names::MUTATE_PATH | names::VALIDATE_PATH | names::CONNECT_PATH, _) => {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "use POST\n");
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        _ => return plain(StatusCode::NOT_FOUND, "not found\n"),
    };
    let content_length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if content_length.is_some_and(|n| n > MAX_BODY_BYTES) {
        // An announced length beyond the bound: drained, never held, so it takes no budget.
        return match read_body(request.into_body(), content_length).await {
            Ok(_) => bad_request(webhook, "the request body is longer than announced".into(), state, started),
            Err(reason) => bad_request(webhook, reason, state, started),
        };
    }
    // Held until the answer is written: the body and the review borrowed from it live until then.
    let Some(_held) = state.body_budget.hold(content_length).await else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "the webhook is stopping\n");
    };
    match read_body(request.into_body(), content_length).await {
        Ok(bytes) => answer_checked(webhook, &bytes, state, started).await,
        Err(reason) => bad_request(webhook, reason, state, started),
    }
}

/// The service of one connection of the admission port: `POST` on the three webhook paths.
///
/// Give each connection its own copy of the state (`state.clone()`): the reference count every
/// request takes then lives in a cache line no other core writes to.
pub fn admission_service(
    state: AppState,
) -> impl hyper::service::Service<
    http::Request<RequestBody>,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send + 'static,
> + Send
+ 'static {
    let state = Arc::new(state);
    hyper::service::service_fn(move |request: http::Request<RequestBody>| {
        let state = state.clone();
        async move {
            let mut response = handle(&state, request).await;
            if state.draining.as_ref().is_some_and(|d| d.is_cancelled()) {
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(response)
        }
    })
}
