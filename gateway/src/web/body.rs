//! A request body announced beyond [`MAX_BODY_BYTES`]: refused before anything reads it
//! for a handler, and drained rather than left unread.
//!
//! Left unread, the refusal races the client: the gateway answers 413 and closes while the
//! client is still writing, the kernel answers the unread bytes with a reset, and the client
//! sees "error writing a body to connection", never the 413 (seen in the tests, now and then).
//! So the body is read and dropped, chunk by chunk, keeping nothing, up to [`DRAIN_BYTES`] or
//! [`DRAIN_FOR`], whichever comes first, and the answer closes the connection. Memory stays
//! what one read buffer holds: 150 such sign-ins once took the gateway from 37 to 311 MB when
//! they were held.

use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{StatusCode, header};

/// The largest request body the gateway reads: its only bodies are a sign-in's token (a
/// ServiceAccount token is about 1 KiB, an ID token with many groups a few) and small JSON. A
/// body is refused at this size before authentication: 150 unauthenticated sign-ins announcing
/// 2 MiB (axum's default) once took the gateway from 37 to 311 MB.
pub const MAX_BODY_BYTES: usize = 32 * 1024;

/// The most of an oversized body read (and dropped) before the answer: a little more than
/// the largest body a client plausibly sends by mistake (axum's default limit is 2 MiB).
pub const DRAIN_BYTES: usize = 4 * 1024 * 1024;
/// The longest an oversized body is read for.
pub const DRAIN_FOR: Duration = Duration::from_secs(5);

/// The middleware: an announced length beyond the bound gets 413, its body drained.
pub async fn bounded(request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_none_or(|n| n <= MAX_BODY_BYTES) {
        return next.run(request).await;
    }
    let mut body = request.into_body().into_data_stream();
    let mut read = 0usize;
    let _ = tokio::time::timeout(DRAIN_FOR, async {
        while let Some(Ok(chunk)) = body.next().await {
            read += chunk.len();
            if read > DRAIN_BYTES {
                break;
            }
        }
    })
    .await;
    let message = format!("the request body is larger than {MAX_BODY_BYTES} bytes");
    (StatusCode::PAYLOAD_TOO_LARGE, [(header::CONNECTION, "close")], message).into_response()
}
