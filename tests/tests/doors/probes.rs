//! How each door of the table is tried, as one person: every probe is the attack (or the use)
//! the row describes, made as that person on the real apiserver (writes as server-side dry runs,
//! so that one person's try leaves the world as it was for the next).

use http::Method;
use myownshell_api::names;
use myownshell_tests::doors::Person;
use serde_json::{Value, json};

use crate::gateway;
use crate::world::{GOING, HOME, Outcome, POD, REPLICA_SET, SERVICE, SHELL, World, pod_spec};

/// A pod template mounting the shell's home, labelled `labels`.
fn home_template(labels: Value) -> Value {
    json!({"metadata": {"labels": labels}, "spec": pod_spec()})
}

/// The same, for a Job (which may not restart).
fn home_job_template() -> Value {
    let mut spec = pod_spec();
    spec["restartPolicy"] = json!("Never");
    json!({"metadata": {"labels": {"app": "mine"}}, "spec": spec})
}

fn workload(api_version: &str, kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec})
}

fn claim_from(source: Value) -> Value {
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
    if let Value::Object(fields) = source {
        spec.as_object_mut().unwrap().extend(fields);
    }
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "copy"}, "spec": spec})
}

/// `door` tried as `person`; `None` for a door no probe knows (a row added without one).
pub async fn walk(w: &World, door: &str, person: Person) -> Option<Outcome> {
    let ns = w.ns.clone();
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let shell_labels = json!({names::LABEL_NAME: names::LABEL_NAME_VALUE, names::LABEL_INSTANCE: SHELL});
    let mine = json!({"app": "mine"});
    let dry = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.push("--dry-run=server".into());
        all
    };
    let kubectl = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        w.kubectl(person, &args, None).await
    };
    Some(match door {
        "exec" => {
            w.raw(
                person,
                Method::GET,
                &format!("{pods}/{POD}/exec?command=true&stdout=true&container=shell"),
                None,
                true,
            )
            .await
        }
        "attach" => {
            w.raw(person, Method::GET, &format!("{pods}/{POD}/attach?stdout=true&container=shell"), None, true).await
        }
        "port-forward" => w.raw(person, Method::GET, &format!("{pods}/{POD}/portforward?ports=8080"), None, true).await,
        "pod-proxy" => w.raw(person, Method::GET, &format!("{pods}/{POD}/proxy/"), None, false).await,
        "pod-proxy-port" => w.raw(person, Method::GET, &format!("{pods}/{POD}:8080/proxy/"), None, false).await,
        "pod-proxy-scheme" => w.raw(person, Method::GET, &format!("{pods}/https:{POD}:8443/proxy/"), None, false).await,
        "service-proxy" => {
            w.raw(person, Method::GET, &format!("/api/v1/namespaces/{ns}/services/{SERVICE}:8080/proxy/"), None, false)
                .await
        }
        "debug-interactive" | "debug" => {
            let keyboard = door == "debug-interactive";
            let name = format!("debug-{}", person.column());
            let patch = json!({"spec": {"ephemeralContainers": [
                {"name": name, "image": "busybox:1.37.0", "stdin": keyboard, "tty": keyboard}]}});
            kubectl(dry(&[
                "patch",
                "pod",
                POD,
                "--subresource=ephemeralcontainers",
                "--type=strategic",
                "-p",
                &patch.to_string(),
            ]))
            .await
        }
        "debug-copy" => {
            w.create(
                person,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-debug"}, "spec": pod_spec()}),
            )
            .await
        }
        "logs" => kubectl(vec!["logs".into(), POD.into(), "-c".into(), "shell".into()]).await,
        "evict" => {
            let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": POD}});
            w.raw(person, Method::POST, &format!("{pods}/{POD}/eviction?dryRun=All"), Some(eviction), false).await
        }
        "delete-pod" => kubectl(dry(&["delete", "pod", POD])).await,
        "lookalike-pod" => {
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-6c8d7f9b5-abcde", "labels": shell_labels},
                             "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]}});
            w.create(person, pod).await
        }
        "edit-pod" => kubectl(dry(&["label", "pod", POD, "stolen=yes"])).await,
        "resize-pod" => {
            let patch = json!({"spec": {"containers": [{"name": "shell", "resources": {"limits": {"cpu": "1"}}}]}});
            kubectl(dry(&["patch", "pod", POD, "--subresource=resize", "--type=strategic", "-p", &patch.to_string()]))
                .await
        }
        "pod-status" => {
            let patch = json!({"metadata": {"labels": {names::LABEL_INSTANCE: "other"}}});
            kubectl(dry(&["patch", "pod", POD, "--subresource=status", "--type=merge", "-p", &patch.to_string()])).await
        }
        "bind-pod" => {
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": POD}, "target": {"kind": "Node", "name": "mine"}});
            w.raw(person, Method::POST, &format!("{pods}/{POD}/binding?dryRun=All"), Some(binding), false).await
        }
        "edit-deployment" => {
            let patch = json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "evil:1"}]);
            kubectl(dry(&["patch", "deployment", SHELL, "--type=json", "-p", &patch.to_string()])).await
        }
        "scale-deployment" => kubectl(dry(&["scale", "deployment", SHELL, "--replicas=3"])).await,
        "scale-replicaset" => kubectl(dry(&["scale", "replicaset", REPLICA_SET, "--replicas=3"])).await,
        "squat-name" => {
            let spec = json!({"selector": {"matchLabels": mine}, "template": {"metadata": {"labels": mine},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1.37.0"}]}}});
            w.create(person, workload("apps/v1", "ReplicaSet", "web-5c7d9f8b6", spec)).await
        }
        "network-policy" => {
            let policy = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "allow-all"},
                                "spec": {"podSelector": {}, "ingress": [{}], "egress": [{}]}});
            w.create(person, policy).await
        }
        _ => return homes(w, door, person).await,
    })
}

/// The doors into the shell's home.
async fn homes(w: &World, door: &str, person: Person) -> Option<Outcome> {
    let shell_name_only = json!({names::LABEL_NAME: names::LABEL_NAME_VALUE});
    let mine = json!({"app": "mine"});
    let selected = |labels: &Value| json!({"matchLabels": labels});
    let template = home_template(mine.clone());
    Some(match door {
        "home-pod" => {
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "notes", "labels": shell_name_only,
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": REPLICA_SET,
                                                  "uid": "5e2b7f0e-0000-4000-8000-000000000001", "controller": true}]},
                "spec": pod_spec()});
            w.create(person, pod).await
        }
        "home-replicaset" => {
            let spec =
                json!({"selector": selected(&shell_name_only), "template": home_template(shell_name_only.clone())});
            w.create(person, workload("apps/v1", "ReplicaSet", "web-x", spec)).await
        }
        "home-deployment" => {
            let spec = json!({"selector": selected(&mine), "template": template});
            w.create(person, workload("apps/v1", "Deployment", "notes", spec)).await
        }
        "home-statefulset" => {
            let spec = json!({"serviceName": "notes", "selector": selected(&mine), "template": template});
            w.create(person, workload("apps/v1", "StatefulSet", "notes", spec)).await
        }
        "home-daemonset" => {
            let spec = json!({"selector": selected(&mine), "template": template});
            w.create(person, workload("apps/v1", "DaemonSet", "notes", spec)).await
        }
        "home-job" => {
            w.create(person, workload("batch/v1", "Job", "notes", json!({"template": home_job_template()}))).await
        }
        "home-cronjob" => {
            let spec = json!({"schedule": "* * * * *", "jobTemplate": {"spec": {"template": home_job_template()}}});
            w.create(person, workload("batch/v1", "CronJob", "notes", spec)).await
        }
        "home-replicationcontroller" => {
            let spec = json!({"selector": mine, "template": template});
            w.create(person, workload("v1", "ReplicationController", "notes", spec)).await
        }
        "home-podtemplate" => {
            w.create(
                person,
                json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "notes"}, "template": template}),
            )
            .await
        }
        "home-ephemeral-volume" => {
            let volume = json!({"name": "copy", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                "dataSource": {"kind": "PersistentVolumeClaim", "name": HOME}}}}});
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notes"},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.37.0"}], "volumes": [volume]}});
            w.create(person, pod).await
        }
        "home-clone" => {
            w.create(person, claim_from(json!({"dataSource": {"kind": "PersistentVolumeClaim", "name": HOME}}))).await
        }
        "home-clone-ref" => {
            w.create(person, claim_from(json!({"dataSourceRef": {"kind": "PersistentVolumeClaim", "name": HOME}})))
                .await
        }
        "home-snapshot" => {
            let snapshot = json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": {"name": "copy"},
                                  "spec": {"source": {"persistentVolumeClaimName": HOME}}});
            w.create(person, snapshot).await
        }
        "home-plant" => {
            let mut claim = claim_from(json!({}));
            claim["metadata"]["name"] = json!("myownshell-home-next");
            w.create(person, claim).await
        }
        "home-take" => {
            let args = ["annotate", "pvc", HOME, "--overwrite", "myownshell.io/shell-uid=mine", "--dry-run=server"];
            w.kubectl(person, &args, None).await
        }
        "home-delete" => w.kubectl(person, &["delete", "pvc", HOME, "--dry-run=server"], None).await,
        "home-delete-collection" => {
            let path = format!("/api/v1/namespaces/{}/persistentvolumeclaims?dryRun=All", w.ns);
            w.raw(person, Method::DELETE, &path, None, false).await
        }
        _ => return shells(w, door, person).await,
    })
}

/// The doors through the shell object itself, the kubelet and the webhook.
async fn shells(w: &World, door: &str, person: Person) -> Option<Outcome> {
    let bob = w.user(Person::Sharee);
    let run = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        w.kubectl(person, &args, None).await
    };
    let dry = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.push("--dry-run=server".into());
        all
    };
    Some(match door {
        "share" => {
            let patch = json!({"spec": {"sharedWith": {"users": [bob, w.user(person)]}}});
            run(dry(&["patch", "mos", SHELL, "--type=merge", "-p", &patch.to_string()])).await
        }
        "last-applied" => {
            run(dry(&["annotate", "mos", SHELL, "--overwrite", "kubectl.kubernetes.io/last-applied-configuration={}"]))
                .await
        }
        "co-own" => {
            let manifest = json!({"apiVersion": "myownshell.io/v1alpha1", "kind": "MyOwnShell", "metadata": {"name": SHELL},
                                  "spec": {"sharedWith": {"users": [bob]}}});
            let manager = format!("--field-manager={}", person.column());
            let args = ["apply", "--server-side", &manager, "--dry-run=server", "-f", "-"];
            w.kubectl(person, &args, Some(&manifest.to_string())).await
        }
        "owner-references" => {
            let patch = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "mine",
                                                              "uid": "5e2b7f0e-0000-4000-8000-000000000002"}]}});
            run(dry(&["patch", "mos", SHELL, "--type=merge", "-p", &patch.to_string()])).await
        }
        "scale-shell" => run(dry(&["scale", "mos", SHELL, "--replicas=1"])).await,
        "record" => {
            let patch = json!({"status": {"lastConnection": {"user": "alice", "time": "2026-11-29T00:00:00Z", "pod": POD, "kind": "exec"}}});
            run(dry(&["patch", "mos", SHELL, "--subresource=status", "--type=merge", "-p", &patch.to_string()])).await
        }
        "delete-shell" => run(dry(&["delete", "mos", SHELL])).await,
        "finalizer" => {
            run(dry(&["patch", "mos", GOING, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#])).await
        }
        "kubelet" => w.raw(person, Method::GET, "/api/v1/nodes/a-node/proxy/pods", None, false).await,
        "connect-review" => gateway::forged_review(w, names::CONNECT_PATH).await,
        "admission-review" => match gateway::forged_review(w, names::MUTATE_PATH).await {
            Outcome::Through => Outcome::Through,
            Outcome::Refused(_) => gateway::forged_review(w, names::VALIDATE_PATH).await,
        },
        _ => return gateway::walk(w, door, person).await,
    })
}
