//! A door without a row fails here: every resource and subresource a policy or a webhook of
//! `config/` names, every route of the gateway and path of the webhook, every subresource of
//! pods (and every proxy) the apiserver serves, and every door of Kubernetes' own list has its
//! row in `docs/doors.yaml`, or is named below as no door, with the reason.

use std::collections::BTreeSet;

use myownshell_api::names;
use myownshell_envtest::assets::workspace_root;
use myownshell_tests::doors::Door;
use serde_json::Value;

/// Resources the policies or webhooks name that are no way into a shell, and why.
pub const NOT_DOORS: &[(&str, &str)] = &[
    ("myownshellclasses", "a class is what a shell may be; who may use one is RBAC's `use`, asked at every start"),
    ("nodes/status", "a node's status says nothing of a shell's processes, files or terminals"),
    ("services/status", "a Service's status routes nothing"),
];

/// Kubernetes' own list of ways to reach a pod's processes and files (the floor), and
/// the rows that answer for each.
pub const FLOOR: &[(&str, &[&str])] = &[
    ("exec", &["exec"]),
    ("attach", &["attach"]),
    ("portforward", &["port-forward"]),
    ("proxy, in every name form", &["pod-proxy", "pod-proxy-port", "pod-proxy-scheme"]),
    ("services/proxy", &["service-proxy"]),
    ("ephemeral containers", &["debug", "debug-interactive"]),
    ("debug copies", &["debug-copy"]),
    (
        "every workload kind with a pod template",
        &[
            "home-deployment",
            "home-replicaset",
            "home-statefulset",
            "home-daemonset",
            "home-job",
            "home-cronjob",
            "home-replicationcontroller",
            "home-podtemplate",
            "edit-deployment",
            "scale-deployment",
            "scale-replicaset",
        ],
    ),
    ("bare pods", &["home-pod", "lookalike-pod"]),
    ("generic ephemeral volumes", &["home-ephemeral-volume"]),
    ("claim clones and snapshots", &["home-clone", "home-clone-ref", "home-snapshot"]),
    ("DELETECOLLECTION", &["home-delete-collection"]),
    ("logs of debug containers", &["logs", "debug-interactive"]),
    ("pods/binding", &["bind-pod"]),
    ("pods/resize", &["resize-pod"]),
    ("nodes/proxy", &["kubelet"]),
];

fn yaml_documents(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---")
        .filter(|doc| doc.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')))
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// Every resource (`pods`, `pods/exec`, …) the policies of `config/policy` and the webhooks of
/// `config/webhook` match on.
pub fn named_in_config() -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let root = workspace_root().join("config");
    let files = std::fs::read_dir(root.join("policy"))
        .unwrap()
        .chain(std::fs::read_dir(root.join("webhook")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"));
    for path in files {
        for doc in yaml_documents(&path) {
            let rules = doc["spec"]["matchConstraints"]["resourceRules"].as_array().cloned().unwrap_or_default();
            let webhook_rules = doc["webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|w| w["rules"].as_array().cloned().unwrap_or_default());
            for rule in rules.into_iter().chain(webhook_rules) {
                for resource in rule["resources"].as_array().into_iter().flatten() {
                    named.insert(resource.as_str().unwrap_or_default().to_owned());
                }
            }
        }
    }
    named
}

/// Every route of the gateway's router, as its source writes them.
pub fn gateway_routes() -> Vec<String> {
    let source = std::fs::read_to_string(workspace_root().join("gateway/src/web/mod.rs")).unwrap();
    source.split(".route(\"").skip(1).map(|rest| rest.split('"').next().unwrap_or_default().to_owned()).collect()
}

/// What has no row: a line each.
pub fn without_rows(doors: &[Door], served: &BTreeSet<String>) -> Vec<String> {
    let apis: BTreeSet<&str> = doors.iter().filter_map(|d| d.api.as_deref()).collect();
    let routes: Vec<&str> = doors.iter().filter_map(|d| d.route.as_deref()).collect();
    let ids: BTreeSet<&str> = doors.iter().map(|d| d.door.as_str()).collect();
    let not_doors: BTreeSet<&str> = NOT_DOORS.iter().map(|(r, _)| *r).collect();
    let mut missing = Vec::new();
    for resource in named_in_config().iter().chain(served) {
        if !apis.contains(resource.as_str()) && !not_doors.contains(resource.as_str()) {
            missing.push(format!("the resource {resource} (named in config/, or served by the apiserver) has no row"));
        }
    }
    let paths = gateway_routes()
        .into_iter()
        .chain([names::CONNECT_PATH, names::MUTATE_PATH, names::VALIDATE_PATH].map(str::to_owned));
    for path in paths {
        if !routes.iter().any(|r| r.contains(&path)) {
            missing.push(format!("the route {path} has no row"));
        }
    }
    for (what, rows) in FLOOR {
        for row in *rows {
            if !ids.contains(row) {
                missing.push(format!("Kubernetes' door {what:?}: its row {row} is missing"));
            }
        }
    }
    missing
}
