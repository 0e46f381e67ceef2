//! A new shell never inherits pods. The connect gate tells a shell's pods by their names
//! (`NAME-<hash>-<5 characters>`, [`crate::connect::access::is_pod_of`]), so a shell created while
//! pods named as its own still run would hand them to its creator: those of an earlier shell of
//! the same name (whose finalizer an administrator took off before its pods were gone), or of
//! someone's Deployment of that name. So the creation of a shell is refused while any such pod
//! exists, naming them. This is the one review that asks the apiserver something (a list of the
//! namespace's pods, from its watch cache), and only for a shell's creation.

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::connect::access;

/// The most pod names a refusal lists.
const NAMED: usize = 5;

/// Reads the pods of a namespace for [`EarlierPods::refusal`].
#[derive(Clone)]
pub struct EarlierPods {
    client: kube::Client,
}

impl EarlierPods {
    /// Lists pods with `client` (the webhook's ServiceAccount may list pods).
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// Why shell `name` may not be created in `namespace` now, if it may not. A list that fails
    /// refuses too: a shell is never created unchecked.
    pub async fn refusal(&self, namespace: &str, name: &str) -> Option<String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match pods.list_metadata(&ListParams::default().match_any()).await {
            Ok(list) => {
                let names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
                refusal(name, &names)
            }
            Err(e) => Some(format!("metadata.name: cannot check for pods named as shell {name}'s ({e}); try again")),
        }
    }
}

/// Why shell `name` may not be created while `pods` (names) run in its namespace, if it may not.
pub fn refusal(name: &str, pods: &[String]) -> Option<String> {
    let inherited: Vec<&str> = pods.iter().map(String::as_str).filter(|p| access::is_pod_of(name, p)).collect();
    if inherited.is_empty() {
        return None;
    }
    let mut listed = inherited.iter().take(NAMED).copied().collect::<Vec<_>>().join(", ");
    if inherited.len() > NAMED {
        listed.push_str(&format!(" and {} more", inherited.len() - NAMED));
    }
    Some(format!(
        "metadata.name: pods named as shell {name}'s still run ({listed}): an earlier shell of this name, or \
         another workload; its pods would be handed to this shell's owner. Wait until they are gone, or pick \
         another name"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_inherits_no_pod() {
        let pods = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let cases: Vec<(&str, Vec<String>, Option<&str>)> = vec![
            ("web", pods(&[]), None),
            ("web", pods(&["api-7d9f8c6b4-x2x4z", "web-0", "web-db-7d9f8c6b4-x2x4z"]), None),
            ("web", pods(&["web-7d9f8c6b4-x2x4z"]), Some("(web-7d9f8c6b4-x2x4z)")),
            (
                "web",
                pods(&["web-4-bbbbb", "web-5-bbbbb", "web-6-bbbbb", "web-7-bbbbb", "web-8-bbbbb", "web-9-bbbbb"]),
                Some("web-8-bbbbb and 1 more)"),
            ),
        ];
        for (name, pods, want) in cases {
            let got = refusal(name, &pods);
            match want {
                None => assert_eq!(got, None, "{name} {pods:?}"),
                Some(part) => {
                    let got = got.unwrap_or_default();
                    assert!(got.starts_with("metadata.name: pods named as shell web's still run"), "{got}");
                    assert!(got.contains(part), "{got}");
                }
            }
        }
    }
}
