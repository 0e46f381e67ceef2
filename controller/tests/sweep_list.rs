//! The sweep's paged lists against the real apiserver (`myownshell_controller::write::sweep_list`).

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use myownshell_controller::labels::shell_objects_selector;
use myownshell_controller::write::sweep_list::list_all;
use myownshell_tests::controller::ShellNamespace;
use serde_json::json;

/// What the test reads of a listed object: uid, instance label, being deleted.
type Seen = BTreeMap<String, (String, Option<String>, bool)>;

/// Every labelled object is read, page by page (two to a page here; the sweep asks for 500),
/// with its uid, instance label and whether it is being deleted; objects without the labels are
/// not.
#[tokio::test]
async fn the_sweeps_list_reads_every_page() {
    let ShellNamespace { client, ns, .. } = ShellNamespace::create("ctrl-sweep-pages").await.unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let map = |name: &str, labelled: bool| -> ConfigMap {
        let labels = if labelled {
            json!({"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": name,
                   "app.kubernetes.io/managed-by": "myownshell-operator"})
        } else {
            json!({"app.kubernetes.io/name": "myownshell"})
        };
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": labels, "finalizers": ["example.com/hold"]}}),
        )
        .unwrap()
    };
    let mut uids = BTreeMap::new();
    for i in 0..5 {
        let made = maps.create(&PostParams::default(), &map(&format!("m-{i}"), true)).await.unwrap();
        uids.insert(made.name_any(), made.uid().unwrap());
    }
    maps.create(&PostParams::default(), &map("unlabelled", false)).await.unwrap();
    maps.delete("m-3", &DeleteParams::default()).await.unwrap();

    let listed = list_all(&client, &maps, Some(&shell_objects_selector()), 2).await.unwrap();
    let seen: Seen = listed
        .iter()
        .map(|l| (l.name.clone(), (l.uid.clone(), l.instance().map(str::to_owned), l.terminating())))
        .collect();
    let want: Seen =
        uids.iter().map(|(name, uid)| (name.clone(), (uid.clone(), Some(name.clone()), name == "m-3"))).collect();
    assert_eq!(seen, want, "three pages of two, the unlabelled one left out");
    assert!(listed.iter().all(|l| l.namespace == ns), "{listed:?}");
    let everything = list_all(&client, &maps, None, 4).await.unwrap();
    assert!(everything.iter().any(|l| l.name == "unlabelled"), "no selector: everything");

    // Leave nothing held: the finalizers off.
    let release = json!({"metadata": {"finalizers": null}});
    for name in uids.keys().map(String::as_str).chain(["unlabelled"]) {
        maps.patch(name, &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
    }
}
