//! A kube client for the harness's real apiserver whose TokenReviews are counted as they leave
//! and held until the test opens the gate: so a test can have many requests waiting on one
//! review at once, and see how many reviews they made.

// As in the test files that use it: a panic here is a test's failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http::{Method, Request};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::watch;
use tower::{Layer, Service};

/// Counts TokenReviews and holds them until [`ReviewGate::open`]. Clones share the gate.
#[derive(Clone)]
pub struct ReviewGate {
    token_reviews: Arc<AtomicUsize>,
    open: Arc<watch::Sender<bool>>,
}

impl Default for ReviewGate {
    fn default() -> Self {
        Self::new()
    }
}

impl ReviewGate {
    /// A closed gate that has counted nothing.
    pub fn new() -> Self {
        Self { token_reviews: Arc::default(), open: Arc::new(watch::Sender::new(false)) }
    }

    /// An admin client for the control plane behind `kubeconfig`, through this gate.
    pub async fn client(&self, kubeconfig: Kubeconfig) -> kube::Client {
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
        ClientBuilder::try_from(config).unwrap().with_layer(self).build()
    }

    /// TokenReviews sent so far (held or not).
    pub fn token_reviews(&self) -> usize {
        self.token_reviews.load(Ordering::SeqCst)
    }

    /// Let held and future TokenReviews through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

impl<S> Layer<S> for ReviewGate {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Gated<S> {
        Gated { inner, gate: self.clone() }
    }
}

/// A service behind a [`ReviewGate`].
pub struct Gated<S> {
    inner: S,
    gate: ReviewGate,
}

impl<S, B> Service<Request<B>> for Gated<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let held = req.method() == Method::POST && req.uri().path().ends_with("/tokenreviews");
        // The request goes out when its future is first polled, which waits for the gate.
        let response = self.inner.call(req);
        if !held {
            return Box::pin(response);
        }
        self.gate.token_reviews.fetch_add(1, Ordering::SeqCst);
        let mut open = self.gate.open.subscribe();
        Box::pin(async move {
            // Only fails if the gate was dropped, which ends the test anyway.
            let _ = open.wait_for(|open| *open).await;
            response.await
        })
    }
}
