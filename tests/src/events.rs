//! A server-sent events stream as a test reads it: the text that came so far, read on until
//! what the test waits for is there (or a deadline passes, reporting what came).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;

/// An open `text/event-stream` answer.
pub struct EventStream {
    body: Incoming,
    seen: String,
    // Holds the connection open as long as the stream is read.
    _sender: SendRequest<Full<Bytes>>,
}

impl EventStream {
    /// The stream of an answer whose head has been read.
    pub fn new(body: Incoming, sender: SendRequest<Full<Bytes>>) -> Self {
        Self { body, seen: String::new(), _sender: sender }
    }

    /// Everything that came so far.
    pub fn seen(&self) -> &str {
        &self.seen
    }

    /// Read on until `accept` takes the text that came after byte `from`; that text, or on
    /// timeout (or the stream's end) what came.
    pub async fn until(
        &mut self,
        what: &str,
        from: usize,
        timeout: Duration,
        accept: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let after = self.seen.get(from..).unwrap_or_default();
            if accept(after) {
                return Ok(after.to_owned());
            }
            let said = |why: &str| format!("{what}: {why}; after byte {from} the stream said:\n{after}");
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return Err(said(&format!("not seen in {timeout:?}"))),
                Ok(None) => return Err(said("the stream ended")),
                Ok(Some(Err(e))) => return Err(said(&e.to_string())),
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.seen.push_str(&String::from_utf8_lossy(data));
                    }
                }
            }
        }
    }
}
