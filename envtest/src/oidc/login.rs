//! The login and consent page of the test bed. Hydra is headless: it sends the browser here with
//! a challenge, this page checks the password against [`super::users`], tells Hydra who signed in
//! through its admin API, and sends the browser back where Hydra says. Consent is given at once
//! (the test bed's clients are the organisation's own applications, as a first-party client's
//! consent is skipped in production), with the user's groups, e-mail and name put into the ID
//! token: the claims the apiserver maps to a Kubernetes user.
//!
//! Served over TLS on 127.0.0.1 from a thread of its own with its own runtime, so that it lives
//! as long as the [`super::Provider`] that started it, not as long as the test runtime that
//! happened to start it. Passwords, challenges and cookies are never logged.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Form, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use myownshell_runtime::server::{ServeOptions, serve_tls};
use rustls::ServerConfig;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::admin::{Admin, MAX_CHALLENGE};
use super::users::{self, REFUSED};

/// The largest request body: a login form is a challenge, a name and a password.
const MAX_FORM: usize = 16 * 1024;
/// The longest name or password looked at.
const MAX_FIELD: usize = 256;

/// The running page; stopped (its connections drained) when dropped.
#[derive(Debug)]
pub struct LoginPage {
    addr: SocketAddr,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LoginPage {
    /// Serve the page on a port of 127.0.0.1 the kernel picks (bound here, so no other process
    /// can take it in between), with `tls`, accepting challenges through `admin`.
    pub fn start(tls: Arc<ServerConfig>, admin: Admin) -> Result<Self, String> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| format!("login page: bind: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| format!("login page: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("login page: {e}"))?;
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("login page: runtime: {e}"))?;
        let thread = std::thread::Builder::new()
            .name("oidc-login-page".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let served = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => serve_tls(listener, tls, router(admin), options(), stop).await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = served {
                        tracing::warn!("the test bed's login page stopped: {e}");
                    }
                });
            })
            .map_err(|e| format!("login page: thread: {e}"))?;
        Ok(Self { addr, shutdown, thread: Some(thread) })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }
}

impl Drop for LoginPage {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn options() -> ServeOptions {
    // A browser's keep-alive connections need not hold a stopping test bed up.
    ServeOptions { drain_timeout: Duration::from_secs(1), ..ServeOptions::default() }
}

fn router(admin: Admin) -> Router {
    Router::new()
        .route("/login", get(login_form).post(login))
        .route("/consent", get(consent))
        .layer(DefaultBodyLimit::max(MAX_FORM))
        .with_state(Arc::new(admin))
}

#[derive(Deserialize)]
struct LoginQuery {
    login_challenge: String,
}

#[derive(Deserialize)]
struct LoginForm {
    login_challenge: String,
    username: String,
    password: String,
}

#[derive(Deserialize)]
struct ConsentQuery {
    consent_challenge: String,
}

/// `GET /login?login_challenge=…`: the form, or straight back to Hydra if it already knows who
/// this is.
async fn login_form(State(admin): State<Arc<Admin>>, Query(query): Query<LoginQuery>) -> Response {
    let challenge = query.login_challenge;
    if challenge.len() > MAX_CHALLENGE {
        return page(StatusCode::BAD_REQUEST, "This sign-in link is not one the identity provider gave.");
    }
    match admin.login_request(&challenge).await {
        Ok(request) if request.skip => match admin.accept_login(&challenge, &request.subject).await {
            Ok(next) => Redirect::to(&next).into_response(),
            Err(e) => hydra_failed(&e),
        },
        Ok(_) => (StatusCode::OK, Html(form_html(&challenge, None))).into_response(),
        Err(e) => hydra_failed(&e),
    }
}

/// `POST /login`: check the password; the same sentence for any wrong name or password.
async fn login(State(admin): State<Arc<Admin>>, Form(form): Form<LoginForm>) -> Response {
    if form.login_challenge.len() > MAX_CHALLENGE || form.username.len() > MAX_FIELD || form.password.len() > MAX_FIELD
    {
        return page(StatusCode::BAD_REQUEST, "This sign-in form is not one this page gave.");
    }
    let Some(user) = users::check(&form.username, &form.password) else {
        return (StatusCode::UNAUTHORIZED, Html(form_html(&form.login_challenge, Some(REFUSED)))).into_response();
    };
    match admin.accept_login(&form.login_challenge, user.name).await {
        // See Other: the browser follows with a GET, as Hydra's authorization endpoint expects.
        Ok(next) => Redirect::to(&next).into_response(),
        Err(e) => hydra_failed(&e),
    }
}

/// `GET /consent?consent_challenge=…`: granted at once, with the user's claims in the ID token.
async fn consent(State(admin): State<Arc<Admin>>, Query(query): Query<ConsentQuery>) -> Response {
    let challenge = query.consent_challenge;
    if challenge.len() > MAX_CHALLENGE {
        return page(StatusCode::BAD_REQUEST, "This consent link is not one the identity provider gave.");
    }
    let request = match admin.consent_request(&challenge).await {
        Ok(request) => request,
        Err(e) => return hydra_failed(&e),
    };
    let Some(user) = users::find(&request.subject) else {
        return page(StatusCode::FORBIDDEN, "The identity provider asked consent for a user this page does not know.");
    };
    let claims = json!({
        "groups": user.groups,
        "email": user.email,
        "email_verified": true,
        "preferred_username": user.name,
    });
    match admin.accept_consent(&challenge, &request, claims).await {
        Ok(next) => Redirect::to(&next).into_response(),
        Err(e) => hydra_failed(&e),
    }
}

fn hydra_failed(error: &str) -> Response {
    tracing::warn!("test bed login page: {error}");
    page(StatusCode::BAD_GATEWAY, "The identity provider could not be asked who you are; try signing in again.")
}

fn page(status: StatusCode, sentence: &str) -> Response {
    (status, Html(format!("<!doctype html><title>Sign in</title><p role=\"alert\">{}</p>", escape(sentence))))
        .into_response()
}

/// The sign-in form, with `refusal` above it after a wrong password.
fn form_html(challenge: &str, refusal: Option<&str>) -> String {
    let alert = refusal.map(|r| format!("<p role=\"alert\">{}</p>", escape(r))).unwrap_or_default();
    format!(
        "<!doctype html><html lang=\"en\"><title>Sign in</title><h1>Sign in</h1>{alert}\
         <form method=\"post\" action=\"/login\">\
         <input type=\"hidden\" name=\"login_challenge\" value=\"{}\">\
         <label>User name <input name=\"username\" autocomplete=\"username\" required></label>\
         <label>Password <input name=\"password\" type=\"password\" autocomplete=\"current-password\" required></label>\
         <button type=\"submit\">Sign in</button></form></html>",
        escape(challenge)
    )
}

/// `s` safe in HTML text and attribute values.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_cannot_break_out_of_its_attribute() {
        let html = form_html("\"><script>x</script>", Some(REFUSED));
        assert!(html.contains("value=\"&quot;&gt;&lt;script&gt;x&lt;/script&gt;\""), "{html}");
        assert!(html.contains(REFUSED));
    }
}
