//! The classes the user may create a shell from in a namespace, each with what it offers (its
//! description, defaults and limits become the page's form), or why they may use none. A class
//! is usable when it is the default (no grant needed) or RBAC grants the user `use` on
//! `myownshellclasses/<name>` there: the webhook's own rule, asked as the user.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use futures::{StreamExt, TryStreamExt};
use http::HeaderMap;
use kube::Resource;
use kube::api::{ListParams, ObjectList};
use kube::core::Request;
use myownshell_api::names::{CLASS_PLURAL, USE_VERB};
use myownshell_api::{MyOwnShellClass, MyOwnShellClassSpec};
use serde::{Deserialize, Serialize};

use super::{api_refusal, bad_request, may};
use crate::exec::as_user::AsUser;
use crate::gateway::Gateway;
use crate::signin::{Purpose, Refusal};
use crate::web::reply::{Peer, refused};

/// How many `use` reviews run at once.
const CONCURRENT_REVIEWS: usize = 8;

/// A class the user may use, as the form shows it.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Offer {
    /// The class.
    pub name: String,
    /// Whether it is the cluster's default class (no grant needed).
    pub default: bool,
    /// What it offers and its limits, as the platform team wrote them.
    pub spec: MyOwnShellClassSpec,
}

/// The classes of `namespace` for the user, or why none.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Offers {
    /// The classes they may use, the default first.
    pub classes: Vec<Offer>,
    /// Why the user may create no shell here, when the cluster has classes and none is theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_none: Option<String>,
}

/// Why nobody-granted sees no class: the sentence the page shows instead of the form.
pub fn why_none(namespace: &str, classes: usize) -> String {
    format!(
        "No shell class is yours to use in namespace {namespace}: the cluster has {classes} class(es), none of them \
         the default, and RBAC grants you the verb \"use\" on none of them (myownshellclasses/<name>). Ask your \
         platform team for one."
    )
}

/// The offers of `namespace` to the user `as_user` speaks for.
pub async fn offers(as_user: &AsUser, namespace: &str) -> Result<Offers, Refusal> {
    let list = Request::new(MyOwnShellClass::url_path(&(), None)).list(&ListParams::default()).map_err(bad_request)?;
    let mut classes = as_user.request::<ObjectList<MyOwnShellClass>>(list).await.map_err(api_refusal)?.items;
    classes.sort_by(|a, b| (!a.is_default(), &a.metadata.name).cmp(&(!b.is_default(), &b.metadata.name)));
    let total = classes.len();
    let usable: Vec<Option<Offer>> = futures::stream::iter(classes)
        .map(|class| async move {
            let name = class.metadata.name.clone().unwrap_or_default();
            let default = class.is_default();
            let usable = default || may(as_user, namespace, USE_VERB, CLASS_PLURAL, Some(&name)).await?;
            Ok::<_, Refusal>(usable.then_some(Offer { name, default, spec: class.spec }))
        })
        .buffered(CONCURRENT_REVIEWS)
        .try_collect()
        .await?;
    let classes: Vec<Offer> = usable.into_iter().flatten().collect();
    let why_none = (classes.is_empty() && total > 0).then(|| why_none(namespace, total));
    Ok(Offers { classes, why_none })
}

/// The query of `GET /api/classes`.
#[derive(Deserialize)]
pub struct ClassesQuery {
    namespace: String,
}

/// `GET /api/classes?namespace=NS`: the classes the signed-in user may create a shell from there.
pub async fn list(
    State(gw): State<Arc<Gateway>>,
    info: Peer,
    headers: HeaderMap,
    Query(q): Query<ClassesQuery>,
) -> Response {
    let as_user = match super::acting(&gw, &headers, &info, Purpose::Read).await {
        Ok(as_user) => as_user,
        Err(refusal) => return refused(refusal),
    };
    let offered = match super::namespace(&q.namespace) {
        Ok(namespace) => offers(&as_user, namespace).await,
        Err(refusal) => Err(refusal),
    };
    match offered {
        Ok(offers) => Json(offers).into_response(),
        Err(refusal) => refused(refusal),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn why_none_names_the_namespace_the_verb_and_what_to_do() {
        let why = super::why_none("team-a", 2);
        for words in ["team-a", "2 class(es)", "\"use\"", "myownshellclasses/<name>", "platform team"] {
            assert!(why.contains(words), "{why:?} lacks {words:?}");
        }
    }
}
