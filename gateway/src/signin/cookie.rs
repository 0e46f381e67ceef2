//! The browser's session cookie, as pure functions.
//!
//! Named with the `__Host-` prefix, which browsers accept only with `Secure`, `Path=/` and no
//! `Domain`: no other site, subdomain or plain-HTTP page can set or overwrite it. `HttpOnly`
//! keeps it from the page's JavaScript; `SameSite=Strict` keeps it off every request another
//! site starts (links included), so a cross-site form or WebSocket carries no session.

use http::{HeaderMap, HeaderValue, header};

/// The cookie's name.
pub const NAME: &str = "__Host-myownshell-session";

/// `Set-Cookie` for a new session (its sealed value) that lasts `max_age_seconds`.
pub fn set(sealed: &str, max_age_seconds: u64) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!(
        "{NAME}={sealed}; Path=/; Max-Age={max_age_seconds}; HttpOnly; Secure; SameSite=Strict"
    ))
    .ok()
}

/// `Set-Cookie` that removes the session cookie.
pub fn clear() -> HeaderValue {
    HeaderValue::from_static("__Host-myownshell-session=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict")
}

/// The sealed session the request's `Cookie` headers carry, if any.
pub fn read(headers: &HeaderMap) -> Option<&str> {
    read_named(headers, NAME)
}

/// The value of the cookie `wanted` the request's `Cookie` headers carry, if any and not empty.
pub fn read_named<'a>(headers: &'a HeaderMap, wanted: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == wanted)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_read_among_others() {
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("none", &[], None),
            ("alone", &["__Host-myownshell-session=abc"], Some("abc")),
            ("among others", &["a=1; __Host-myownshell-session=abc; b=2"], Some("abc")),
            ("second header", &["a=1", "__Host-myownshell-session=xyz"], Some("xyz")),
            ("a lookalike name", &["myownshell-session=abc; __Host-myownshell-session2=d"], None),
            ("empty", &["__Host-myownshell-session="], None),
        ];
        for (name, cookies, want) in cases {
            let mut h = HeaderMap::new();
            for c in *cookies {
                h.append(header::COOKIE, HeaderValue::from_str(c).expect("valid"));
            }
            assert_eq!(read(&h), *want, "{name}");
        }
    }

    #[test]
    fn the_cookie_is_locked_down() {
        let set = set("abc", 60).expect("valid");
        let set = set.to_str().expect("ascii");
        for part in ["__Host-myownshell-session=abc", "Path=/", "Max-Age=60", "HttpOnly", "Secure", "SameSite=Strict"] {
            assert!(set.contains(part), "{set} lacks {part}");
        }
        assert!(!set.contains("Domain"));
        assert!(clear().to_str().expect("ascii").contains("Max-Age=0"));
    }
}
