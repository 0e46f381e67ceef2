//! Render kustomize trees with the real `kubectl kustomize` and pick objects out of them.

use serde_json::Value;

use crate::assets::workspace_root;
use crate::kubectl::kubectl_binary;

/// `kubectl kustomize config/<dir>` as JSON objects.
pub fn render(dir: &str) -> Result<Vec<Value>, String> {
    let path = workspace_root().join("config").join(dir);
    let out = std::process::Command::new(kubectl_binary())
        .arg("kustomize")
        .arg(&path)
        .output()
        .map_err(|e| format!("running kubectl kustomize: {e}"))?;
    if !out.status.success() {
        return Err(format!("kubectl kustomize {}: {}", path.display(), String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_saphyr::from_multiple::<Value>(&text).map_err(|e| format!("parsing kustomize output of {dir}: {e}"))
}

/// The objects of `kind` (any name).
pub fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The one object of `kind` named `name`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Result<&'a Value, String> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .ok_or_else(|| format!("no {kind} named {name} in the rendered objects"))
}

/// A `v1/List` of the given objects, as JSON text for `kubectl apply -f -`.
pub fn as_list(objects: &[&Value]) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()
}
