//! Requests to the apiserver made as the signed-in user: the gateway's own client, with the
//! user's `Impersonate-*` headers on each request. One client (one connection pool) serves every
//! user; nothing the gateway sends for a user is authorized as the gateway.

use http::HeaderMap;
use kube::Client;
use myownshell_auth::AuthenticatedUser;
use serde::de::DeserializeOwned;

use super::impersonate::{self, HeaderError, Mode};
use super::upgrade::{self, ExecSocket, UpgradeError};

/// The gateway's client, speaking as one user.
#[derive(Clone)]
pub struct AsUser {
    client: Client,
    headers: HeaderMap,
}

impl AsUser {
    /// Speak as `user`, impersonated as `mode` says.
    pub fn new(client: Client, user: &AuthenticatedUser, mode: Mode) -> Result<Self, HeaderError> {
        Ok(Self { client, headers: impersonate::headers(user, mode)? })
    }

    fn impersonating(&self, mut request: http::Request<Vec<u8>>) -> http::Request<Vec<u8>> {
        // Any header of the same name the request had is replaced, never merged.
        for name in self.headers.keys() {
            request.headers_mut().remove(name);
        }
        for (name, value) in &self.headers {
            request.headers_mut().append(name, value.clone());
        }
        request
    }

    /// A read, decoded: a refusal is kube's `Error::Api` with the apiserver's message.
    pub async fn request<T: DeserializeOwned>(&self, request: http::Request<Vec<u8>>) -> kube::Result<T> {
        self.client.request(self.impersonating(request)).await
    }

    /// A watch's events, decoded as they come (a refusal before the first is kube's
    /// `Error::Api`).
    pub async fn watch<T: Clone + DeserializeOwned>(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> kube::Result<impl futures::TryStream<Item = kube::Result<kube::core::WatchEvent<T>>> + use<T>> {
        self.client.request_events(self.impersonating(request)).await
    }

    /// An exec's WebSocket: a refusal, the connect gate's included, in its own words.
    pub async fn connect(&self, request: http::Request<Vec<u8>>) -> Result<ExecSocket, UpgradeError> {
        upgrade::open(&self.client, self.impersonating(request)).await
    }
}
