//! The `Impersonate-*` headers that make an exec the user's own: the apiserver then
//! authorizes it, the connect gate decides it and the audit log records it as the person who
//! signed in, never as the gateway.
//!
//! Every part TokenReview returned is passed on: user, uid, groups and extra (an extra's key is
//! percent-encoded in the header name, as the apiserver decodes it). A value that cannot be a
//! header value is an error, never silently dropped: dropping a group could widen nothing, but
//! dropping a user's uid or extra would make the apiserver see someone slightly different.
//!
//! With [`Mode::Constrained`] (Kubernetes' constrained impersonation, KEP-5284, alpha in 1.35
//! behind the `ConstrainedImpersonation` gate) a ServiceAccount is named by its user name only:
//! the apiserver's `serviceaccount` mode takes nothing else and fills in the groups a
//! ServiceAccount always has (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`).
//! Its uid and the pod-binding extras of its token are not passed on then; sending them would
//! make the apiserver fall back to the legacy `impersonate` verb, which a constrained gateway
//! is not granted. Other users are sent whole, through the `user-info` mode.

use http::{HeaderMap, HeaderName, HeaderValue};
use myownshell_auth::AuthenticatedUser;

/// A part of the user that cannot be sent as a header.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot impersonate {what}: {value:?} is not a valid header value")]
pub struct HeaderError {
    /// Which part: `user`, `group`, `uid` or `extra KEY`.
    pub what: String,
    /// The value (user names and groups are not secrets).
    pub value: String,
}

/// Which impersonation the gateway's ServiceAccount is granted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// The `impersonate` verb on users, groups, ServiceAccounts, uids and extras: any cluster.
    #[default]
    Legacy,
    /// `impersonate:user-info` and `impersonate:serviceaccount`, with `impersonate-on:<mode>:<verb>`
    /// for exactly the requests a terminal makes: clusters with the `ConstrainedImpersonation`
    /// feature gate (alpha in Kubernetes 1.35).
    Constrained,
}

/// Whether `name` is a ServiceAccount's user name (`system:serviceaccount:<namespace>:<name>`).
fn is_service_account(name: &str) -> bool {
    name.strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(namespace, sa)| !namespace.is_empty() && !sa.is_empty() && !sa.contains(':'))
}

/// The headers for `user`, as `mode` impersonates.
pub fn headers(user: &AuthenticatedUser, mode: Mode) -> Result<HeaderMap, HeaderError> {
    let mut headers = HeaderMap::new();
    let value = |what: &str, v: &str| {
        HeaderValue::from_str(v).map_err(|_| HeaderError { what: what.to_owned(), value: v.to_owned() })
    };
    headers.insert("impersonate-user", value("user", &user.name)?);
    if mode == Mode::Constrained && is_service_account(&user.name) {
        return Ok(headers);
    }
    for group in &user.groups {
        headers.append("impersonate-group", value("group", group)?);
    }
    if let Some(uid) = user.uid.as_deref().filter(|u| !u.is_empty()) {
        headers.insert("impersonate-uid", value("uid", uid)?);
    }
    for (key, values) in &user.extra {
        let what = format!("extra {key}");
        let name = HeaderName::from_bytes(format!("impersonate-extra-{}", encode_key(key)).as_bytes())
            .map_err(|_| HeaderError { what: what.clone(), value: key.clone() })?;
        for v in values {
            headers.append(name.clone(), value(&what, v)?);
        }
    }
    Ok(headers)
}

/// An extra's key as a header name's tail: RFC 3986 unreserved characters as they are, the
/// rest percent-encoded (the apiserver unescapes `Impersonate-Extra-` keys). Lower case, since
/// header names are.
fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(b)),
            b'A'..=b'Z' => out.push(char::from(b.to_ascii_lowercase())),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use myownshell_auth::AuthMethod;

    use super::*;

    fn user(name: &str, groups: &[&str], uid: Option<&str>, extra: &[(&str, &[&str])]) -> AuthenticatedUser {
        AuthenticatedUser {
            name: name.into(),
            uid: uid.map(Into::into),
            groups: groups.iter().map(|g| (*g).into()).collect(),
            extra: extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
                .collect::<BTreeMap<_, _>>(),
            method: AuthMethod::BearerToken,
        }
    }

    fn all(headers: &HeaderMap, name: &str) -> Vec<String> {
        headers.get_all(name).iter().map(|v| v.to_str().unwrap_or("?").to_owned()).collect()
    }

    #[test]
    fn every_part_of_the_user_is_passed_on() {
        let sa = user(
            "system:serviceaccount:team:alice",
            &["system:serviceaccounts", "system:authenticated"],
            Some("6b1c"),
            &[("authentication.kubernetes.io/pod-name", &["p"]), ("scopes", &["a", "b"])],
        );
        let h = headers(&sa, Mode::Legacy).expect("valid");
        assert_eq!(all(&h, "impersonate-user"), ["system:serviceaccount:team:alice"]);
        assert_eq!(all(&h, "impersonate-group"), ["system:serviceaccounts", "system:authenticated"]);
        assert_eq!(all(&h, "impersonate-uid"), ["6b1c"]);
        assert_eq!(all(&h, "impersonate-extra-authentication.kubernetes.io%2Fpod-name"), ["p"]);
        assert_eq!(all(&h, "impersonate-extra-scopes"), ["a", "b"]);
    }

    #[test]
    fn what_is_absent_is_not_sent() {
        let h = headers(&user("bob", &[], None, &[]), Mode::Legacy).expect("valid");
        assert_eq!(h.len(), 1);
        let h = headers(&user("bob", &[], Some(""), &[]), Mode::Legacy).expect("valid");
        assert!(h.get("impersonate-uid").is_none());
    }

    #[test]
    fn values_that_cannot_be_headers_are_errors() {
        let cases: &[(&str, AuthenticatedUser, &str)] = &[
            ("user", user("a\nb", &[], None, &[]), "user"),
            ("group", user("a", &["g\r\n"], None, &[]), "group"),
            ("uid", user("a", &[], Some("u\0"), &[]), "uid"),
            ("extra", user("a", &[], None, &[("k", &["v\n"])]), "extra k"),
        ];
        for (name, u, what) in cases {
            assert_eq!(
                headers(u, Mode::Constrained).map(|_| ()).map_err(|e| e.what),
                Err((*what).to_owned()),
                "{name}"
            );
        }
    }

    #[test]
    fn constrained_names_a_service_account_by_its_user_name_only() {
        let groups: &[&str] = &["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"];
        let extra: &[(&str, &[&str])] = &[("authentication.kubernetes.io/pod-name", &["p"])];
        type Case = (&'static str, &'static str, usize);
        // (user, why, headers sent)
        let cases: &[Case] = &[
            ("system:serviceaccount:team:alice", "a ServiceAccount: the apiserver fills in the rest", 1),
            ("alice@example.com", "a person: sent whole, for the user-info mode", 6),
            ("system:serviceaccount:team", "not a ServiceAccount's name (no name part)", 6),
            ("system:serviceaccount::alice", "not a ServiceAccount's name (no namespace)", 6),
            ("system:serviceaccount:team:a:b", "not a ServiceAccount's name (a colon in the name)", 6),
        ];
        for (name, why, count) in cases {
            let h = headers(&user(name, groups, Some("u1"), extra), Mode::Constrained).expect("valid");
            assert_eq!(h.len(), *count, "{name}: {why}: {h:?}");
            assert_eq!(all(&h, "impersonate-user"), [*name], "{name}");
        }
        let legacy = headers(&user("system:serviceaccount:team:alice", groups, Some("u1"), extra), Mode::Legacy);
        assert_eq!(legacy.expect("valid").len(), 6, "legacy sends every part");
    }

    #[test]
    fn extra_keys_are_escaped() {
        assert_eq!(encode_key("Example.com/Key with space"), "example.com%2Fkey%20with%20space");
    }
}
