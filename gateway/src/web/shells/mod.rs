//! The page's shells, so that nobody needs kubectl to get in: where the user may have shells
//! (`places`), the classes they may create one from (`classes`), the list and one shell as the
//! page shows it (`row`), creating, starting, stopping and deleting (`manage`), the list kept
//! live by a watch (`live`), and how many live lists each person has open (`limit`). Every read
//! and write is made **as the user** (the gateway's client with their `Impersonate-*` headers),
//! so the apiserver, RBAC and the webhooks decide and say no in their own words; the gateway
//! itself only lists which namespaces are opened to shells.
//!
//! Must not: read or write a shell as the gateway, or answer with anything the user could not
//! read themselves.

pub mod classes;
pub mod limit;
pub mod live;
pub mod manage;
pub mod places;
pub mod row;

use http::StatusCode;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::PostParams;
use kube::core::Request;
use myownshell_api::names;

use crate::exec::as_user::AsUser;
use crate::signin::Refusal;

/// A request that could not be built (a name no URL holds): the caller's mistake.
pub fn bad_request(e: impl std::fmt::Display) -> Refusal {
    Refusal { status: StatusCode::BAD_REQUEST, message: e.to_string() }
}

/// The apiserver's (or an admission webhook's) refusal, with its status and words.
pub fn api_refusal(e: kube::Error) -> Refusal {
    match e {
        kube::Error::Api(status) => Refusal {
            status: StatusCode::from_u16(status.code).unwrap_or(StatusCode::BAD_GATEWAY),
            message: status.message,
        },
        other => Refusal { status: StatusCode::BAD_GATEWAY, message: other.to_string() },
    }
}

/// Whether the user may `verb` `resource` (of myownshell.io) in `namespace`, asked as them
/// (SelfSubjectAccessReview, which needs no grant of the gateway's).
pub async fn may(
    as_user: &AsUser,
    namespace: &str,
    verb: &str,
    resource: &str,
    name: Option<&str>,
) -> Result<bool, Refusal> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some(verb.to_owned()),
                group: Some(names::GROUP.to_owned()),
                resource: Some(resource.to_owned()),
                name: name.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let body = serde_json::to_vec(&review).map_err(bad_request)?;
    let request = Request::new("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .create(&PostParams::default(), body)
        .map_err(bad_request)?;
    let reviewed: SelfSubjectAccessReview = as_user.request(request).await.map_err(api_refusal)?;
    Ok(reviewed.status.is_some_and(|s| s.allowed))
}

/// The signed-in caller of a request, as a client that speaks as them.
pub async fn acting(
    gw: &crate::gateway::Gateway,
    headers: &http::HeaderMap,
    info: &crate::web::reply::Peer,
    purpose: crate::signin::Purpose,
) -> Result<AsUser, Refusal> {
    let caller = crate::signin::caller(&gw.gate(), headers, crate::web::reply::peer(info), purpose).await?;
    gw.as_user(&caller.user).map_err(|e| Refusal { status: StatusCode::FORBIDDEN, message: e.to_string() })
}

/// `value` if it can be a Kubernetes name of at most `max` characters (lowercase letters,
/// digits, `-`, and `.` where `dots`); else the refusal naming `field`. Checked before any
/// request is built, so no path, query or other resource can be spelt through it.
fn checked<'a>(field: &str, value: &'a str, max: usize, dots: bool) -> Result<&'a str, Refusal> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (dots && c == '.');
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if value.len() <= max && value.chars().all(allowed) && ends(value.chars().next()) && ends(value.chars().last()) {
        Ok(value)
    } else {
        Err(bad_request(format!(
            "{field}: {:?} is not a Kubernetes name (at most {max} lowercase letters, digits and '-'{})",
            value.chars().take(64).collect::<String>(),
            if dots { " or '.'" } else { "" }
        )))
    }
}

/// A namespace from the request (a DNS label).
pub fn namespace(value: &str) -> Result<&str, Refusal> {
    checked("namespace", value, 63, false)
}

/// A shell named in a request's path: its namespace and name, checked.
pub fn target<'a>(namespace_: &'a str, name: &'a str) -> Result<(&'a str, &'a str), Refusal> {
    Ok((namespace(namespace_)?, shell_name(name)?))
}

/// A shell's name from the request (a DNS subdomain).
pub fn shell_name(value: &str) -> Result<&str, Refusal> {
    checked("name", value, 253, true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_kubernetes_names_reach_a_request() {
        let long = "a".repeat(64);
        let cases = [
            ("team-a", true, true),
            ("a", true, true),
            ("web.dev", false, true),
            ("", false, false),
            ("-a", false, false),
            ("a-", false, false),
            ("A", false, false),
            ("a/../secrets", false, false),
            ("a%2Fb", false, false),
            ("a b", false, false),
            (long.as_str(), false, true),
        ];
        for (value, as_namespace, as_name) in cases {
            assert_eq!(super::namespace(value).is_ok(), as_namespace, "namespace {value:?}");
            assert_eq!(super::shell_name(value).is_ok(), as_name, "name {value:?}");
        }
        let refusal = super::namespace("a/b").err().map(|r| r.message).unwrap_or_default();
        assert!(refusal.starts_with("namespace: \"a/b\" is not a Kubernetes name"), "{refusal}");
    }
}
