//! Creating, starting, stopping and deleting a shell from the page, each made **as the user**:
//! the apiserver's RBAC, the validating webhook (only the owner changes a shell's spec; the
//! class's rules and caps) and the deletion policy (only the owner deletes it) decide, and
//! their refusals reach the page in their own words. The writes are the ones `kubectl
//! myownshell start`/`stop` and `kubectl delete` make. `?dryRun=All` asks as kubectl's
//! `--dry-run=server` does: every layer decides, nothing is written.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use kube::Resource;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Request;
use myownshell_api::MyOwnShell;
use myownshell_api::names::{API_VERSION, KIND};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::row::row;
use super::{api_refusal, bad_request};
use crate::exec::as_user::AsUser;
use crate::gateway::Gateway;
use crate::signin::{Purpose, Refusal};
use crate::web::reply::{Peer, refused};

/// What the page's form sends to create a shell. Everything else comes from the class (or the
/// operator's defaults); the webhook fills it in and checks it.
#[derive(Deserialize, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewShell {
    /// `metadata.name`.
    pub name: String,
    /// `spec.className`; none for the default class (or no class where the cluster has none).
    #[serde(default)]
    pub class_name: Option<String>,
    /// `spec.home.size`: a home that survives stops, of this size (`5Gi`); none for no home.
    #[serde(default)]
    pub home_size: Option<String>,
    /// `spec.sharedWith.users`.
    #[serde(default)]
    pub shared_users: Vec<String>,
    /// `spec.sharedWith.groups`.
    #[serde(default)]
    pub shared_groups: Vec<String>,
}

/// `?dryRun=All`: decided by everyone who decides, written nowhere.
#[derive(Deserialize, Debug, Default)]
pub struct DryRun {
    #[serde(default, rename = "dryRun")]
    dry_run: Option<String>,
}

impl DryRun {
    fn on(&self) -> bool {
        self.dry_run.as_deref() == Some("All")
    }
}

fn present(values: &[String]) -> Vec<&str> {
    values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()).collect()
}

/// The shell `new` describes, or the field it lacks.
pub fn manifest(new: &NewShell) -> Result<Value, Refusal> {
    let name = new.name.trim();
    if name.is_empty() {
        return Err(bad_request("name: a shell needs a name (lowercase letters, digits and '-')"));
    }
    let mut spec = Map::new();
    if let Some(class) = new.class_name.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
        spec.insert("className".into(), json!(class));
    }
    if let Some(size) = new.home_size.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        spec.insert("home".into(), json!({ "size": size }));
    }
    let (users, groups) = (present(&new.shared_users), present(&new.shared_groups));
    if !users.is_empty() || !groups.is_empty() {
        let mut shared = Map::new();
        if !users.is_empty() {
            shared.insert("users".into(), json!(users));
        }
        if !groups.is_empty() {
            shared.insert("groups".into(), json!(groups));
        }
        spec.insert("sharedWith".into(), Value::Object(shared));
    }
    Ok(json!({ "apiVersion": API_VERSION, "kind": KIND, "metadata": { "name": name }, "spec": spec }))
}

fn shells(namespace: &str) -> Request {
    Request::new(MyOwnShell::url_path(&(), Some(namespace)))
}

async fn create_as(as_user: &AsUser, namespace: &str, new: &NewShell, dry: &DryRun) -> Result<MyOwnShell, Refusal> {
    let body = serde_json::to_vec(&manifest(new)?).map_err(bad_request)?;
    let params = PostParams { dry_run: dry.on(), ..PostParams::default() };
    let request = shells(namespace).create(&params, body).map_err(bad_request)?;
    as_user.request(request).await.map_err(api_refusal)
}

async fn patch_as(as_user: &AsUser, at: (&str, &str), patch: &Value, dry: &DryRun) -> Result<MyOwnShell, Refusal> {
    let (namespace, name) = at;
    let params = PatchParams { dry_run: dry.on(), ..PatchParams::default() };
    let request = shells(namespace).patch(name, &params, &Patch::Merge(patch)).map_err(bad_request)?;
    as_user.request(request).await.map_err(api_refusal)
}

async fn delete_as(as_user: &AsUser, namespace: &str, name: &str, dry: &DryRun) -> Result<(), Refusal> {
    let params = DeleteParams { dry_run: dry.on(), ..DeleteParams::default() };
    let request = shells(namespace).delete(name, &params).map_err(bad_request)?;
    as_user.request::<Value>(request).await.map(drop).map_err(api_refusal)
}

fn answer(shell: Result<MyOwnShell, Refusal>) -> Response {
    match shell {
        Ok(shell) => Json(json!({ "shell": row(&shell) })).into_response(),
        Err(refusal) => refused(refusal),
    }
}

/// The shell at `at`, patched with `patch` as the signed-in caller (start, stop).
async fn patched(
    gw: &Gateway,
    (headers, info): (&HeaderMap, &Peer),
    at: (&str, &str),
    patch: &Value,
    dry: &DryRun,
) -> Result<MyOwnShell, Refusal> {
    let as_user = super::acting(gw, headers, info, Purpose::Change).await?;
    patch_as(&as_user, super::target(at.0, at.1)?, patch, dry).await
}

/// `POST /api/shells/{namespace}`: a new shell, from the page's form.
pub async fn create(
    State(gw): State<Arc<Gateway>>,
    Path(namespace): Path<String>,
    Query(dry): Query<DryRun>,
    info: Peer,
    headers: HeaderMap,
    Json(new): Json<NewShell>,
) -> Response {
    let created = async {
        let as_user = super::acting(&gw, &headers, &info, Purpose::Change).await?;
        create_as(&as_user, super::namespace(&namespace)?, &new, &dry).await
    };
    answer(created.await)
}

/// `POST /api/shells/{namespace}/{shell}/start`: run it again, its clocks restarted (as
/// `kubectl myownshell start`).
pub async fn start(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, name)): Path<(String, String)>,
    Query(dry): Query<DryRun>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let patch = myownshell_api::lifecycle::start_patch(&myownshell_runtime::time::now());
    answer(patched(&gw, (&headers, &info), (&namespace, &name), &patch, &dry).await)
}

/// `POST /api/shells/{namespace}/{shell}/stop`: its pods go; it, its home and its terminals'
/// records stay (as `kubectl myownshell stop`).
pub async fn stop(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, name)): Path<(String, String)>,
    Query(dry): Query<DryRun>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let patch = myownshell_api::lifecycle::stop_patch();
    answer(patched(&gw, (&headers, &info), (&namespace, &name), &patch, &dry).await)
}

/// `DELETE /api/shells/{namespace}/{shell}`: the shell goes (its home as `spec.home.onDelete`
/// says).
pub async fn delete(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, name)): Path<(String, String)>,
    Query(dry): Query<DryRun>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let deleted = async {
        let as_user = super::acting(&gw, &headers, &info, Purpose::Change).await?;
        let (namespace, name) = super::target(&namespace, &name)?;
        delete_as(&as_user, namespace, name, &dry).await
    };
    match deleted.await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refused(refusal),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{NewShell, manifest};

    #[test]
    fn the_form_becomes_a_shell_with_only_what_it_says() {
        let full = NewShell {
            name: " dev ".into(),
            class_name: Some("standard".into()),
            home_size: Some("1Gi".into()),
            shared_users: vec!["bob".into(), " ".into()],
            shared_groups: vec!["team".into()],
        };
        let cases = [
            (
                NewShell { name: "dev".into(), ..NewShell::default() },
                json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "dev"}, "spec": {}}),
            ),
            (
                full,
                json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "dev"},
                       "spec": {"className": "standard", "home": {"size": "1Gi"},
                                "sharedWith": {"users": ["bob"], "groups": ["team"]}}}),
            ),
            (
                NewShell {
                    name: "dev".into(),
                    class_name: Some(" ".into()),
                    home_size: Some(String::new()),
                    shared_users: vec![String::new()],
                    ..NewShell::default()
                },
                json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": "dev"}, "spec": {}}),
            ),
        ];
        for (new, want) in cases {
            assert_eq!(manifest(&new).map_err(|r| r.message).unwrap_or_default(), want, "{new:?}");
        }
    }

    #[test]
    fn a_form_without_a_name_is_refused_naming_the_field() {
        for name in ["", "   "] {
            let refusal = manifest(&NewShell { name: name.into(), ..NewShell::default() }).err().map(|r| r.message);
            assert!(refusal.as_deref().is_some_and(|m| m.starts_with("name: ")), "{refusal:?}");
        }
    }
}
