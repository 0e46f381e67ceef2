//! Shell pods as the Deployment would make them, for the control plane without a
//! kube-controller-manager: a test writes the pod and the status the kubelet would report.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_api::names;
use serde_json::{Value, json};

/// The pod-template hash the fake ReplicaSet of every shell carries.
pub const HASH: &str = "5d8c7b9f4";

/// Create pod `<shell>-<HASH>-<suffix>` of shell `shell` (labelled and owned as its ReplicaSet
/// would have it, on `node` if given) and give it `status`, as the kubelet would write it.
pub async fn create(
    pods: &Api<Pod>,
    shell: &str,
    suffix: &str,
    node: Option<&str>,
    status: Value,
) -> Result<String, String> {
    let name = format!("{shell}-{HASH}-{suffix}");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {
                names::LABEL_NAME: names::LABEL_NAME_VALUE,
                names::LABEL_INSTANCE: shell,
                names::LABEL_MANAGED_BY: names::LABEL_MANAGED_BY_VALUE,
                "pod-template-hash": HASH,
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{shell}-{HASH}"),
                "uid": "00000000-0000-0000-0000-000000000001", "controller": true,
            }],
        },
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "containers": [{"name": "shell", "image": "busybox:1.37.0"}],
        },
    }))
    .map_err(|e| e.to_string())?;
    pods.create(&PostParams::default(), &pod).await.map_err(|e| format!("creating pod {name}: {e}"))?;
    report(pods, &name, status).await?;
    Ok(name)
}

/// Write `status` into pod `name`, as the kubelet would.
pub async fn report(pods: &Api<Pod>, name: &str, status: Value) -> Result<(), String> {
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
        .await
        .map(drop)
        .map_err(|e| format!("writing pod {name}'s status: {e}"))
}

/// The status of a pod whose `shell` container waits for `reason` (`ImagePullBackOff`, …).
pub fn waiting(reason: &str, message: &str) -> Value {
    json!({
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
        "containerStatuses": [{
            "name": "shell", "ready": false, "restartCount": 0, "image": "busybox:1.37.0", "imageID": "",
            "state": {"waiting": {"reason": reason, "message": message}},
        }],
    })
}

/// The status of a pod whose container restarted `restarts` times, last ending with `ended`
/// (`Error`, `OOMKilled`) and exit code `code`, now in back-off.
pub fn crash_looping(ended: &str, code: i32, restarts: i32) -> Value {
    json!({
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
        "containerStatuses": [{
            "name": "shell", "ready": false, "restartCount": restarts, "image": "busybox:1.37.0", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}},
            "lastState": {"terminated": {"reason": ended, "exitCode": code, "finishedAt": k8s_openapi::jiff::Timestamp::now().to_string()}},
        }],
    })
}

/// The status of a pod the scheduler found no node for.
pub fn unschedulable(message: &str) -> Value {
    json!({
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
    })
}

/// The status of a running, ready pod.
pub fn running() -> Value {
    json!({
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        "containerStatuses": [{
            "name": "shell", "ready": true, "restartCount": 0, "image": "busybox:1.37.0", "imageID": "",
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        }],
    })
}

/// A running pod for shell `name` in `ns`, and the selector and replicas in the shell's status,
/// as the controller and a kubelet would leave them on a plane where neither runs: the pod's
/// name.
pub async fn ready(client: &kube::Client, ns: &str, name: &str) -> Result<String, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = create(&pods, name, "x2x4z", None, running()).await?;
    let selector = format!("{}={name}", names::LABEL_INSTANCE);
    let status = json!({ "status": { "selector": selector, "replicas": 1 } });
    Api::<myownshell_api::MyOwnShell>::namespaced(client.clone(), ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .map_err(|e| e.to_string())?;
    Ok(pod)
}
