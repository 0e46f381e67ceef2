//! Where the user may have shells: the namespaces opened to shells (labelled
//! `myownshell.io/shells=enabled`) in which RBAC lets them list shells, and whether they may
//! create one there. The gateway lists the namespaces as itself (their names are all it reads:
//! most users may not list namespaces); what the user may do in each is asked as the user.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures::{StreamExt, TryStreamExt};
use http::{HeaderMap, StatusCode};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::ListParams;
use myownshell_api::names::{PLURAL, SHELLS_NAMESPACE_LABEL, SHELLS_NAMESPACE_LABEL_VALUE};
use serde::Serialize;
use serde_json::json;

use super::may;
use crate::exec::as_user::AsUser;
use crate::gateway::Gateway;
use crate::signin::{Purpose, Refusal};
use crate::web::reply::{Peer, refused};

/// The most namespaces the page offers: each costs two access reviews per look, so a cluster
/// with more shell namespaces than this names the namespace in the page's filter instead.
pub const MAX_PLACES: u32 = 64;

/// How many access reviews run at once for one page.
const CONCURRENT_REVIEWS: usize = 8;

/// A namespace the user may list shells in.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Place {
    /// The namespace.
    pub namespace: String,
    /// Whether RBAC lets them create a shell there.
    pub may_create: bool,
}

/// The namespaces opened to shells, by name, as the gateway lists them.
async fn opened(gw: &Gateway) -> Result<Vec<String>, Refusal> {
    let selector = format!("{SHELLS_NAMESPACE_LABEL}={SHELLS_NAMESPACE_LABEL_VALUE}");
    let params = ListParams::default().labels(&selector).limit(MAX_PLACES);
    let listed = Api::<Namespace>::all(gw.client.clone()).list_metadata(&params).await.map_err(|e| Refusal {
        status: StatusCode::BAD_GATEWAY,
        message: format!("the gateway could not list the namespaces opened to shells ({e}): name a namespace instead"),
    })?;
    let mut names: Vec<String> = listed.items.into_iter().filter_map(|ns| ns.metadata.name).collect();
    names.sort();
    Ok(names)
}

/// The places of the user `as_user` speaks for.
pub async fn places(gw: &Gateway, as_user: &AsUser) -> Result<Vec<Place>, Refusal> {
    let checked: Vec<Option<Place>> = futures::stream::iter(opened(gw).await?)
        .map(|namespace| async move {
            if !may(as_user, &namespace, "list", PLURAL, None).await? {
                return Ok(None);
            }
            let may_create = may(as_user, &namespace, "create", PLURAL, None).await?;
            Ok::<_, Refusal>(Some(Place { namespace, may_create }))
        })
        .buffered(CONCURRENT_REVIEWS)
        .try_collect()
        .await?;
    Ok(checked.into_iter().flatten().collect())
}

/// The namespaces a request names: `named` (checked as a Kubernetes name), or, when it names
/// none, every place of the user `as_user` speaks for.
pub async fn named_or_all(gw: &Gateway, as_user: &AsUser, named: &str) -> Result<Vec<String>, Refusal> {
    if named.is_empty() {
        Ok(places(gw, as_user).await?.into_iter().map(|p| p.namespace).collect())
    } else {
        Ok(vec![super::namespace(named)?.to_owned()])
    }
}

/// `GET /api/places`: where the signed-in user may have shells.
pub async fn list(State(gw): State<Arc<Gateway>>, info: Peer, headers: HeaderMap) -> Response {
    let as_user = match super::acting(&gw, &headers, &info, Purpose::Read).await {
        Ok(as_user) => as_user,
        Err(refusal) => return refused(refusal),
    };
    match places(&gw, &as_user).await {
        Ok(places) => Json(json!({ "places": places })).into_response(),
        Err(refusal) => refused(refusal),
    }
}
