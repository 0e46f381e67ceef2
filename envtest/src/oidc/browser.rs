//! What a browser does during a sign-in, and no more: follows redirects, keeps the cookies each
//! host sets (Hydra ties a flow to its browser with CSRF cookies, and refuses a flow whose
//! cookies do not come back), and posts a form. It stops at the client's redirect URI instead
//! of visiting it, as the client's own page would receive the code there.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustls::ClientConfig;

use super::https::{self, Response};

/// At most this many redirects in a row: a sign-in takes six.
const MAX_REDIRECTS: usize = 20;
/// At most this many cookies kept, each at most [`MAX_COOKIE`] bytes: Hydra sets a few.
const MAX_COOKIES: usize = 64;
const MAX_COOKIE: usize = 8 * 1024;

/// Where a navigation ended.
#[derive(Debug)]
pub enum Landed {
    /// A page that is no redirect: its URL, and the response.
    Page(String, Response),
    /// A redirect to the stop URL (the client's redirect URI): the whole `Location`.
    Stopped(String),
}

/// A browser with its cookie jar.
pub struct Browser {
    tls: Arc<ClientConfig>,
    /// `(host, name) -> value`. Cookies belong to a host, whatever its port (RFC 6265).
    cookies: BTreeMap<(String, String), String>,
    stop_at: String,
}

impl Browser {
    /// A browser trusting `tls`'s CAs, that stops at any redirect to a URL starting with
    /// `stop_at`.
    pub fn new(tls: Arc<ClientConfig>, stop_at: &str) -> Self {
        Self { tls, cookies: BTreeMap::new(), stop_at: stop_at.to_owned() }
    }

    /// The value of the cookie `name` it keeps for `host`.
    pub fn cookie(&self, host: &str, name: &str) -> Option<&str> {
        self.cookies.get(&(host.to_owned(), name.to_owned())).map(String::as_str)
    }

    /// Keep `value` as the cookie `name` of `host`, as if the host had set it: how a test hands
    /// one browser's cookie to another (a stolen or copied cookie).
    pub fn set_cookie(&mut self, host: &str, name: &str, value: &str) {
        self.cookies.insert((host.to_owned(), name.to_owned()), value.to_owned());
    }

    /// `GET url`, following redirects.
    pub async fn get(&mut self, url: &str) -> Result<Landed, String> {
        self.navigate(http::Method::GET, url.to_owned(), None).await
    }

    /// `POST url` of a form, following the redirects it answers with (as GETs).
    pub async fn post_form(&mut self, url: &str, fields: &[(&str, &str)]) -> Result<Landed, String> {
        self.navigate(http::Method::POST, url.to_owned(), Some(https::form(fields))).await
    }

    async fn navigate(&mut self, method: http::Method, url: String, form: Option<String>) -> Result<Landed, String> {
        let (mut method, mut url, mut form) = (method, url, form);
        for _ in 0..=MAX_REDIRECTS {
            let response = self.send(method, &url, form.take()).await?;
            let Some(location) = response.location().filter(|_| (300..400).contains(&response.status)) else {
                return Ok(Landed::Page(url, response));
            };
            let next = resolve(&url, location)?;
            if next.starts_with(&self.stop_at) {
                return Ok(Landed::Stopped(next));
            }
            (method, url) = (http::Method::GET, next);
        }
        Err(format!("more than {MAX_REDIRECTS} redirects in a row"))
    }

    async fn send(&mut self, method: http::Method, url: &str, form: Option<String>) -> Result<Response, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        let host = uri.host().unwrap_or_default().to_owned();
        let mut request = http::Request::builder().method(method).uri(uri);
        let cookies: Vec<String> =
            self.cookies.iter().filter(|((h, _), _)| *h == host).map(|((_, n), v)| format!("{n}={v}")).collect();
        if !cookies.is_empty() {
            request = request.header(http::header::COOKIE, cookies.join("; "));
        }
        let body = match form {
            Some(form) => {
                request = request.header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded");
                form.into_bytes()
            }
            None => Vec::new(),
        };
        let response = https::send(&self.tls, request.body(body).map_err(|e| e.to_string())?).await?;
        for set in response.headers.get_all(http::header::SET_COOKIE) {
            if let Ok(set) = set.to_str() {
                self.keep(&host, set);
            }
        }
        Ok(response)
    }

    /// Keep (or, for an expiring one, drop) the cookie a `Set-Cookie` of `host` sets.
    fn keep(&mut self, host: &str, set_cookie: &str) {
        let mut parts = set_cookie.split(';');
        let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else { return };
        let key = (host.to_owned(), name.trim().to_owned());
        let expired = parts.any(|attr| {
            let attr = attr.trim().to_ascii_lowercase();
            attr.strip_prefix("max-age=").is_some_and(|age| age.parse::<i64>().is_ok_and(|age| age <= 0))
        });
        if expired || value.is_empty() {
            self.cookies.remove(&key);
        } else if set_cookie.len() <= MAX_COOKIE
            && (self.cookies.len() < MAX_COOKIES || self.cookies.contains_key(&key))
        {
            self.cookies.insert(key, value.trim().to_owned());
        }
    }
}

/// `location` (absolute, or a path) as seen from the page at `base`.
pub fn resolve(base: &str, location: &str) -> Result<String, String> {
    if location.starts_with("https://") || location.starts_with("http://") {
        return Ok(location.to_owned());
    }
    let uri: http::Uri = base.parse().map_err(|e| format!("{base}: {e}"))?;
    let origin = format!("{}://{}", uri.scheme_str().unwrap_or("https"), uri.authority().map_or("", |a| a.as_str()));
    if location.starts_with('/') {
        Ok(format!("{origin}{location}"))
    } else {
        Err(format!("a redirect to {location:?}, which is neither a URL nor a path"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn browser() -> Browser {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tls = ClientConfig::builder().with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth();
        Browser::new(Arc::new(tls), "https://app/cb")
    }

    #[test]
    fn cookies_are_kept_per_host_and_dropped_when_expired() {
        let mut b = browser();
        b.keep("127.0.0.1", "csrf=abc; Path=/; HttpOnly; Secure; SameSite=Lax");
        b.keep("127.0.0.1", "other=1");
        b.keep("localhost", "csrf=zzz");
        assert_eq!(b.cookies.get(&("127.0.0.1".into(), "csrf".into())).map(String::as_str), Some("abc"));
        b.keep("127.0.0.1", "csrf=; Max-Age=0");
        assert!(!b.cookies.contains_key(&("127.0.0.1".into(), "csrf".into())));
        assert_eq!(b.cookies.len(), 2);
    }

    #[test]
    fn redirects_resolve_against_the_page() {
        assert_eq!(resolve("https://h:1/a/b?x", "/login?c=1").unwrap(), "https://h:1/login?c=1");
        assert_eq!(resolve("https://h:1/a", "https://o:2/z").unwrap(), "https://o:2/z");
        assert!(resolve("https://h:1/a", "relative").is_err());
    }
}
