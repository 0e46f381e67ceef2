//! What the standing sweep ([`super::sweep`]) reads: the metadata of every object of a kind that
//! a label selector matches, a page at a time, each object read straight from the JSON into the
//! five things the sweep needs (name, namespace, uid, instance label, being deleted).
//!
//! Not `Api::list_metadata`: that asks for every object in one response and keeps each one's
//! whole metadata, managedFields and all (a pod's are most of it). The sweep lists every shell's
//! Deployment, ReplicaSet and pod, then every shell, every two minutes; at 2,000 shells with
//! homes those lists were the controller's peak, 193 MB of the heap at once (heaptrack:
//! `cargo xtask bench controller --objects 2000 --homes --churn-seconds 0 --stops 0
//! --heap-profile PATH`), and about 1 GB at 10,000. Read this way, the sweep holds one page's text
//! and the small records of what it has read. Nor kube's `ObjectList`: its `#[serde(flatten)]`
//! makes serde buffer the whole page as untyped values before reading the items.

use kube::api::ListParams;
use kube::core::Request;
use kube::{Api, Client};
use serde::Deserialize;

/// Objects per page, as kube-controller-manager's informers list them.
pub const PAGE: u32 = 500;

/// One listed object's metadata, as far as the sweep reads it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its namespace.
    #[serde(default)]
    pub namespace: String,
    /// Its uid.
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    labels: InstanceLabel,
    /// Only whether it is set is read (kept as its text: one short string for an object being
    /// deleted, none for the rest).
    #[serde(default)]
    deletion_timestamp: Option<String>,
}

impl Listed {
    /// Its `app.kubernetes.io/instance` label.
    pub fn instance(&self) -> Option<&str> {
        self.labels.instance.as_deref()
    }

    /// Whether its deletion was asked for.
    pub fn terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }
}

/// The one label read; serde skips the others without keeping them.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
struct InstanceLabel {
    /// [`myownshell_api::names::LABEL_INSTANCE`] (serde needs the literal; a test holds them equal).
    #[serde(rename = "app.kubernetes.io/instance", default)]
    instance: Option<String>,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    metadata: PageMeta,
    /// `null` in an empty list from some apiservers.
    #[serde(default)]
    items: Option<Vec<Item>>,
}

#[derive(Default, Deserialize)]
struct PageMeta {
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    metadata: Listed,
}

/// Every object of `api` that `selector` (if any) matches, `page` at a time. The pages are one
/// snapshot: the apiserver pins them to the first page's resourceVersion, and refuses a
/// continuation too old for that (410), an error the sweep takes as "try next interval".
pub async fn list_all<K: kube::Resource>(
    client: &Client,
    api: &Api<K>,
    selector: Option<&str>,
    page: u32,
) -> Result<Vec<Listed>, kube::Error> {
    let mut params = ListParams::default().limit(page);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let mut listed = Vec::new();
    loop {
        let mut request = Request::new(api.resource_url()).list_metadata(&params).map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("sweep_list");
        let page: Page = client.request(request).await?;
        listed.extend(page.items.unwrap_or_default().into_iter().map(|item| item.metadata));
        match page.metadata.continue_token.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(listed),
        }
    }
}

#[cfg(test)]
mod tests {
    use myownshell_api::names;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_page_is_read_into_what_the_sweep_needs_and_the_rest_skipped() {
        let page: Page = serde_json::from_value(json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "7", "continue": "next"},
            "items": [
                {"kind": "PartialObjectMetadata", "metadata": {
                    "name": "web-1", "namespace": "a", "uid": "u-1",
                    "labels": {names::LABEL_INSTANCE: "web", "app.kubernetes.io/name": "myownshell"},
                    "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
                    "deletionTimestamp": "2026-11-30T00:00:00Z"
                }},
                {"metadata": {"name": "bare"}},
                {}
            ]
        }))
        .unwrap();
        assert_eq!(page.metadata.continue_token.as_deref(), Some("next"));
        let listed: Vec<Listed> = page.items.unwrap_or_default().into_iter().map(|i| i.metadata).collect();
        assert_eq!(
            (listed[0].name.as_str(), listed[0].namespace.as_str(), listed[0].uid.as_str()),
            ("web-1", "a", "u-1")
        );
        assert_eq!((listed[0].instance(), listed[0].terminating()), (Some("web"), true));
        assert_eq!((listed[1].name.as_str(), listed[1].instance(), listed[1].terminating()), ("bare", None, false));
        assert_eq!(listed[2], Listed::default(), "an item without metadata is read as empty, not an error");
        let last: Page = serde_json::from_value(json!({"metadata": {}, "items": null})).unwrap();
        assert!(last.metadata.continue_token.is_none(), "the last page");
        assert!(last.items.unwrap_or_default().is_empty(), "null items: an empty list");
    }

    #[test]
    fn the_instance_label_read_is_the_one_the_controller_writes() {
        let listed: Listed = serde_json::from_value(json!({"labels": {names::LABEL_INSTANCE: "x"}})).unwrap();
        assert_eq!(listed.instance(), Some("x"));
    }
}
