//! Who the caller is, as the apiserver sees them (a SelfSubjectReview,
//! `authentication.k8s.io/v1`, as `kubectl auth whoami` asks): the user named in a session's
//! hello, and whose sessions `sessions` shows. With `--as`, the user acted as.

use anyhow::Context;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::Api;
use kube::api::PostParams;

/// The caller's user name.
pub async fn user_name(client: &kube::Client) -> anyhow::Result<String> {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .context("asking the apiserver who you are (SelfSubjectReview)")?;
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|name| !name.is_empty())
        .context("the apiserver's SelfSubjectReview named no user")
}
