//! Hydra's admin API, the part the test bed uses: reading and accepting the login and consent
//! requests Hydra hands the login page (Hydra is headless: it never sees a password), and
//! registering OAuth 2.0 clients. Paths as Hydra v2 serves them under `/admin`
//! (`consent/handler.go`, `client/handler.go` of the module).

use std::sync::Arc;

use rustls::ClientConfig;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::https::{self, percent_encode};

/// The longest login or consent challenge passed on: Hydra v2's are encrypted flows of about a
/// kilobyte; anything far longer is not Hydra's.
pub const MAX_CHALLENGE: usize = 8 * 1024;

/// Hydra's admin endpoint, `https://127.0.0.1:PORT`.
#[derive(Debug, Clone)]
pub struct Admin {
    base: String,
    tls: Arc<ClientConfig>,
}

/// What Hydra says of a login request.
#[derive(Debug, Deserialize)]
pub struct LoginRequest {
    /// Hydra already knows who this is (a remembered session): accept without a form.
    #[serde(default)]
    pub skip: bool,
    /// Who, when `skip`.
    #[serde(default)]
    pub subject: String,
}

/// What Hydra says of a consent request.
#[derive(Debug, Deserialize)]
pub struct ConsentRequest {
    /// The signed-in user (the login's `subject`).
    pub subject: String,
    /// The scopes the client asked for.
    #[serde(default)]
    pub requested_scope: Vec<String>,
    /// The audiences the client asked access tokens for.
    #[serde(default)]
    pub requested_access_token_audience: Vec<String>,
}

/// An OAuth 2.0 client to register. Its `Debug` leaves the secret out.
#[derive(Clone, Serialize)]
pub struct Client {
    /// Its id: the ID tokens' `aud`.
    pub client_id: String,
    /// Its secret (`client_secret_basic` at the token endpoint).
    pub client_secret: String,
    /// Where Hydra may send the browser back with a code.
    pub redirect_uris: Vec<String>,
    /// How long its ID tokens live (Go duration, e.g. `1h`, `3s`); Hydra's default if `None`.
    #[serde(rename = "authorization_code_grant_id_token_lifespan", skip_serializing_if = "Option::is_none")]
    pub id_token_lifespan: Option<String>,
    /// How long the ID tokens a refresh gives live; Hydra's default if `None`.
    #[serde(rename = "refresh_token_grant_id_token_lifespan", skip_serializing_if = "Option::is_none")]
    pub refresh_id_token_lifespan: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("client_id", &self.client_id)
            .field("redirect_uris", &self.redirect_uris)
            .field("id_token_lifespan", &self.id_token_lifespan)
            .finish_non_exhaustive()
    }
}

/// Hydra's answer to an accepted request: where the browser goes next.
#[derive(Deserialize)]
struct Redirect {
    redirect_to: String,
}

impl Admin {
    /// The admin API at `base` (`https://127.0.0.1:PORT`), verified with `tls`.
    pub fn new(base: String, tls: Arc<ClientConfig>) -> Self {
        Self { base, tls }
    }

    /// `GET /admin/oauth2/auth/requests/login`.
    pub async fn login_request(&self, challenge: &str) -> Result<LoginRequest, String> {
        let path = format!("/admin/oauth2/auth/requests/login?login_challenge={}", percent_encode(challenge));
        serde_json::from_value(self.call(http::Method::GET, &path, None).await?).map_err(|e| e.to_string())
    }

    /// `PUT /admin/oauth2/auth/requests/login/accept` for `subject`, not remembered (each sign-in
    /// of a test shows the form); where the browser goes next.
    pub async fn accept_login(&self, challenge: &str, subject: &str) -> Result<String, String> {
        let path = format!("/admin/oauth2/auth/requests/login/accept?login_challenge={}", percent_encode(challenge));
        let body = json!({ "subject": subject, "remember": false });
        redirect(self.call(http::Method::PUT, &path, Some(body)).await?)
    }

    /// `GET /admin/oauth2/auth/requests/consent`.
    pub async fn consent_request(&self, challenge: &str) -> Result<ConsentRequest, String> {
        let path = format!("/admin/oauth2/auth/requests/consent?consent_challenge={}", percent_encode(challenge));
        serde_json::from_value(self.call(http::Method::GET, &path, None).await?).map_err(|e| e.to_string())
    }

    /// `PUT /admin/oauth2/auth/requests/consent/accept`: grant what was asked, and put
    /// `id_token_claims` into the ID token; where the browser goes next.
    pub async fn accept_consent(
        &self,
        challenge: &str,
        request: &ConsentRequest,
        id_token_claims: Value,
    ) -> Result<String, String> {
        let path =
            format!("/admin/oauth2/auth/requests/consent/accept?consent_challenge={}", percent_encode(challenge));
        let body = json!({
            "grant_scope": request.requested_scope,
            "grant_access_token_audience": request.requested_access_token_audience,
            "remember": false,
            "session": { "id_token": id_token_claims },
        });
        redirect(self.call(http::Method::PUT, &path, Some(body)).await?)
    }

    /// `POST /admin/clients`: an authorization-code client with refresh tokens (`offline_access`)
    /// and PKCE allowed (Hydra accepts PKCE from any client).
    pub async fn create_client(&self, client: &Client) -> Result<(), String> {
        let mut body = serde_json::to_value(client).map_err(|e| e.to_string())?;
        if let Value::Object(fields) = &mut body {
            fields.insert("grant_types".into(), json!(["authorization_code", "refresh_token"]));
            fields.insert("response_types".into(), json!(["code"]));
            fields.insert("scope".into(), json!("openid offline_access profile email"));
            fields.insert("token_endpoint_auth_method".into(), json!("client_secret_basic"));
        }
        self.call(http::Method::POST, "/admin/clients", Some(body)).await.map(drop)
    }

    /// `METHOD path` with an optional JSON body; the JSON answer of a 2xx, else an error with
    /// Hydra's own words.
    async fn call(&self, method: http::Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut request = http::Request::builder().method(method).uri(format!("{}{path}", self.base));
        let body = match body {
            Some(body) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                serde_json::to_vec(&body).map_err(|e| e.to_string())?
            }
            None => Vec::new(),
        };
        let request = request.body(body).map_err(|e| e.to_string())?;
        let what = format!("{} {}", request.method(), https::redact(request.uri()));
        let response = https::send(&self.tls, request).await?;
        if !(200..300).contains(&response.status) {
            return Err(format!("Hydra's admin API answered {what} with {}: {}", response.status, response.text()));
        }
        serde_json::from_slice(&response.body).map_err(|e| format!("{what}: not JSON: {e}"))
    }
}

fn redirect(answer: Value) -> Result<String, String> {
    serde_json::from_value::<Redirect>(answer).map(|r| r.redirect_to).map_err(|e| format!("no redirect_to: {e}"))
}
