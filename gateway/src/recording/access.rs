//! Who may read a shell's recordings: the cluster decides, by a SubjectAccessReview for the
//! caller (exactly as TokenReview or the proxy named them): `get` on `myownshells/recordings`
//! (group `myownshell.io`) in the shell's namespace, for the shell's name. Administrators grant it
//! with ordinary RBAC (the `myownshell-recordings-reader` ClusterRole of `config/rbac`).

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use myownshell_api::names;
use myownshell_auth::AuthenticatedUser;

/// The subresource a recording is read through.
pub const SUBRESOURCE: &str = "recordings";

/// The review that asks whether `user` may read shell `shell`'s recordings in `namespace`.
pub fn review(user: &AuthenticatedUser, namespace: &str, shell: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            groups: Some(user.groups.clone()),
            uid: user.uid.clone(),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some("get".into()),
                group: Some(names::GROUP.into()),
                resource: Some(names::PLURAL.into()),
                subresource: Some(SUBRESOURCE.into()),
                name: Some(shell.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// Whether the cluster lets `user` read the recordings; an error is no answer (refuse).
pub async fn may_read(client: &Client, user: &AuthenticatedUser, namespace: &str, shell: &str) -> kube::Result<bool> {
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review(user, namespace, shell))
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed && s.denied != Some(true)))
}

#[cfg(test)]
mod tests {
    use myownshell_auth::AuthMethod;

    use super::*;

    #[test]
    fn the_review_names_the_caller_and_the_shell() {
        let mut user = AuthenticatedUser::new("auditor", vec!["auditors".into()], AuthMethod::BearerToken);
        user.uid = Some("u1".into());
        let review = review(&user, "team", "web");
        let spec = review.spec;
        assert_eq!((spec.user.as_deref(), spec.uid.as_deref()), (Some("auditor"), Some("u1")));
        assert_eq!(spec.groups, Some(vec!["auditors".to_owned()]));
        let attributes = spec.resource_attributes.expect("resource attributes");
        assert_eq!(attributes.group.as_deref(), Some("myownshell.io"));
        assert_eq!(attributes.resource.as_deref(), Some("myownshells"));
        assert_eq!(attributes.subresource.as_deref(), Some("recordings"));
        assert_eq!((attributes.namespace.as_deref(), attributes.name.as_deref()), (Some("team"), Some("web")));
        assert_eq!(attributes.verb.as_deref(), Some("get"));
    }
}
