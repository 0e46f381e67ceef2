//! The world the doors are walked in: a namespace opened to shells with alice's shell `web`
//! (shared with bob, with a home), the objects the operator and Kubernetes' controllers would
//! have made for it (made here under their own names, since no controller runs on this plane),
//! the connect webhook, the gateway, the policies, and the five people of the table as
//! ServiceAccounts (so that the gateway can authenticate them too).

use std::time::Duration;

use http::Method;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use myownshell_api::{MyOwnShell, names};
use myownshell_envtest::assets::workspace_root;
use myownshell_envtest::control_plane::{ControlPlane, write_kubeconfig};
use myownshell_envtest::kubectl::{Kubectl, KubectlOutput};
use myownshell_envtest::{create_namespace, create_shell_namespace, rbac, service_account_token, service_account_user};
use myownshell_tests::access::{install_policies, namespace_editors, shell_manifest};
use myownshell_tests::doors::Person;
use myownshell_tests::gateway::GatewayProcess;
use myownshell_tests::webhooks::{InstalledWebhooks, WebhookProcess};
use serde_json::{Value, json};

pub const SHELL: &str = "web";
pub const HOME: &str = "myownshell-home-web";
pub const REPLICA_SET: &str = "web-7d9f8c6b4";
pub const POD: &str = "web-7d9f8c6b4-x2x4z";
pub const SERVICE: &str = "web-svc";
/// Another shell of alice's, being deleted (its finalizer waits for the operator, which does not
/// run here): what taking a finalizer off means (on a shell not being deleted, the mutating
/// webhook puts it back).
pub const GOING: &str = "going";
const HOUR: i64 = 3600;

/// What a door let a person do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Through (admitted; on this plane an exec then ends for want of a node).
    Through,
    /// Refused, in these words.
    Refused(String),
}

pub struct World {
    pub client: Client,
    pub kubectl: Kubectl,
    /// The shell's namespace.
    pub ns: String,
    /// Where the people's ServiceAccounts live.
    people: String,
    /// Where the pod's ServiceAccount lives.
    elsewhere: String,
    pub webhook: WebhookProcess,
    _installed: InstalledWebhooks,
    pub gateway: GatewayProcess,
    _recordings: tempfile::TempDir,
}

/// The operator and Kubernetes' controllers, as each acts on a real cluster.
pub const OPERATOR: &str = "system:serviceaccount:myownshell-system:myownshell-controller";
pub const DEPLOYMENT_CONTROLLER: &str = "system:serviceaccount:kube-system:deployment-controller";
pub const REPLICASET_CONTROLLER: &str = "system:serviceaccount:kube-system:replicaset-controller";

impl World {
    pub async fn start(cp: &'static ControlPlane) -> World {
        install_policies(&cp.kubectl()).await.unwrap();
        let client = cp.client().unwrap();
        let ns = create_shell_namespace(&client, "doors").await.unwrap();
        let people = create_namespace(&client, "doors-people").await.unwrap();
        let elsewhere = create_namespace(&client, "doors-elsewhere").await.unwrap();
        let editors: Vec<String> = ["alice", "bob", "carol"].iter().map(|p| service_account_user(&people, p)).collect();
        let editors: Vec<&str> = editors.iter().map(String::as_str).collect();
        namespace_editors(&client, &ns, &editors, &[]).await.unwrap();
        snapshots_for(&client, &ns, &editors).await;
        controllers_may_act(&client).await;
        let (installed, webhook) = myownshell_tests::webhooks::connect_gate(cp, &client, &ns).await.unwrap();
        let recordings = tempfile::tempdir().unwrap();
        let gateway = gateway(cp, &client, &ns, recordings.path()).await;
        let world = World {
            client,
            kubectl: cp.kubectl(),
            ns,
            people,
            elsewhere,
            webhook,
            _installed: installed,
            gateway,
            _recordings: recordings,
        };
        world.make_the_shell().await;
        world
    }

    /// The user name of `person`.
    pub fn user(&self, person: Person) -> String {
        match person {
            Person::Owner => service_account_user(&self.people, "alice"),
            Person::Sharee => service_account_user(&self.people, "bob"),
            Person::Editor => service_account_user(&self.people, "carol"),
            Person::Stranger => service_account_user(&self.people, "dave"),
            Person::Pod => service_account_user(&self.elsewhere, "default"),
        }
    }

    /// The groups the apiserver gives `person`'s token.
    pub fn groups(&self, person: Person) -> Vec<String> {
        let ns = if person == Person::Pod { &self.elsewhere } else { &self.people };
        vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}"), "system:authenticated".into()]
    }

    /// A token of `person`'s, as their pod or their kubeconfig would hold.
    pub async fn token(&self, person: Person) -> String {
        let (ns, name) = match person {
            Person::Owner => (&self.people, "alice"),
            Person::Sharee => (&self.people, "bob"),
            Person::Editor => (&self.people, "carol"),
            Person::Stranger => (&self.people, "dave"),
            Person::Pod => (&self.elsewhere, "default"),
        };
        service_account_token(&self.client, ns, name, &[], HOUR).await.unwrap()
    }

    /// `kubectl` as `user` in `groups`, in the shell's namespace.
    pub async fn kubectl_as(&self, user: &str, groups: &[String], args: &[&str], stdin: Option<&str>) -> KubectlOutput {
        let mut all = vec!["--as".to_owned(), user.to_owned()];
        for g in groups {
            all.extend(["--as-group".to_owned(), g.clone()]);
        }
        all.extend(["-n".to_owned(), self.ns.clone()]);
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        self.kubectl.run_with_stdin(&all, stdin).await.unwrap_or_else(|e| KubectlOutput {
            success: false,
            stdout: String::new(),
            stderr: e,
        })
    }

    /// `kubectl` as `person`: through, or refused in kubectl's words.
    pub async fn kubectl(&self, person: Person, args: &[&str], stdin: Option<&str>) -> Outcome {
        outcome_of(&self.kubectl_as(&self.user(person), &self.groups(person), args, stdin).await)
    }

    /// Create `object` (JSON) as `person`, a server-side dry run.
    pub async fn create(&self, person: Person, object: Value) -> Outcome {
        self.kubectl(person, &["create", "--dry-run=server", "-f", "-"], Some(&object.to_string())).await
    }

    /// A raw request to the apiserver as `person` (`upgrade`: asked as a WebSocket, as exec,
    /// attach and port-forward are): through unless the apiserver answers 401 or 403.
    pub async fn raw(&self, person: Person, method: Method, path: &str, body: Option<Value>, upgrade: bool) -> Outcome {
        let mut request =
            http::Request::builder().method(method).uri(path).header("Impersonate-User", self.user(person));
        for group in self.groups(person) {
            request = request.header("Impersonate-Group", group);
        }
        if upgrade {
            request = request
                .header("Connection", "Upgrade")
                .header("Upgrade", "websocket")
                .header("Sec-WebSocket-Version", "13")
                .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
                .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io");
        }
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        if !body.is_empty() {
            request = request.header("Content-Type", "application/json");
        }
        let response = match self.client.send(request.body(kube::client::Body::from(body)).unwrap()).await {
            Ok(response) => response,
            Err(kube::Error::Api(status)) if [401, 403].contains(&status.code) => {
                return Outcome::Refused(status.message);
            }
            Err(e) => return Outcome::Refused(format!("no answer: {e}")),
        };
        let status = response.status().as_u16();
        if status == 401 || status == 403 {
            use http_body_util::BodyExt;
            let bytes = response.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            return Outcome::Refused(format!("{status}: {}", String::from_utf8_lossy(&bytes)));
        }
        Outcome::Through
    }

    /// Alice's shell `web`, shared with bob, with a home; its claim, Deployment, ReplicaSet and
    /// a ready pod as the operator and Kubernetes' controllers make them; a Service that
    /// selects the pod.
    async fn make_the_shell(&self) {
        let bob = self.user(Person::Sharee);
        let spec = format!("{{size: 1, sharedWith: {{users: [\"{bob}\"]}}, home: {{size: 1Gi}}}}");
        let owner = self.user(Person::Owner);
        let out = self
            .kubectl_as(&owner, &self.groups(Person::Owner), &["apply", "-f", "-"], Some(&shell_manifest(SHELL, &spec)))
            .await;
        assert!(out.success, "alice's shell: {}", out.stderr);
        let shell = Api::<MyOwnShell>::namespaced(self.client.clone(), &self.ns).get(SHELL).await.unwrap();
        let uid = shell.metadata.uid.clone().unwrap();
        let labels = json!({names::LABEL_NAME: names::LABEL_NAME_VALUE, names::LABEL_INSTANCE: SHELL});
        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": HOME, "labels": labels.clone(),
                         "annotations": {names::ANNOTATION_HOME_OWNER: owner, names::ANNOTATION_HOME_SHELL_UID: uid}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        self.made_by(OPERATOR, claim).await;
        let template = json!({"metadata": {"labels": labels.clone()}, "spec": pod_spec()});
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": SHELL, "labels": labels.clone()},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels.clone()}, "template": template.clone()}});
        let deployment = self.made_by(OPERATOR, deployment).await;
        let owned_by = |kind: &str, name: &str, uid: &str| {
            json!([{"apiVersion": if kind == "Deployment" || kind == "ReplicaSet" { "apps/v1" } else { "v1" },
                    "kind": kind, "name": name, "uid": uid, "controller": true}])
        };
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": REPLICA_SET, "labels": labels.clone(),
                         "ownerReferences": owned_by("Deployment", SHELL, deployment["metadata"]["uid"].as_str().unwrap())},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels.clone()}, "template": template}});
        let rs = self.made_by(DEPLOYMENT_CONTROLLER, rs).await;
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "labels": labels.clone(),
                         "ownerReferences": owned_by("ReplicaSet", REPLICA_SET, rs["metadata"]["uid"].as_str().unwrap())},
            "spec": pod_spec()});
        self.made_by(REPLICASET_CONTROLLER, pod).await;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let running = json!({"status": myownshell_tests::shell_pods::running()});
        pods.patch_status(POD, &PatchParams::default(), &Patch::Merge(running)).await.unwrap();
        let status = json!({"status": {"selector": format!("{}={SHELL},{}={}", names::LABEL_INSTANCE, names::LABEL_NAME, names::LABEL_NAME_VALUE), "replicas": 1}});
        Api::<MyOwnShell>::namespaced(self.client.clone(), &self.ns)
            .patch_status(SHELL, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
        // Shared with bob as `web` is: a Service proxy is let through only for someone who may
        // connect to every shell of the namespace.
        let going = shell_manifest(GOING, &format!("{{size: 0, sharedWith: {{users: [\"{bob}\"]}}}}"));
        let out = self.kubectl_as(&owner, &self.groups(Person::Owner), &["apply", "-f", "-"], Some(&going)).await;
        assert!(out.success, "alice's shell {GOING}: {}", out.stderr);
        let out = self.kubectl.run(&["delete", "mos", GOING, "-n", &self.ns, "--wait=false"]).await.unwrap();
        assert!(out.success, "deleting {GOING}: {}", out.stderr);
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE},
            "spec": {"selector": labels, "ports": [{"port": 8080}]}});
        let out = self
            .kubectl
            .run_with_stdin(&["create", "-n", &self.ns, "-f", "-"], Some(&service.to_string()))
            .await
            .unwrap();
        assert!(out.success, "the Service: {}", out.stderr);
    }

    /// Create `object` as `maker`; what the apiserver stored.
    async fn made_by(&self, maker: &str, object: Value) -> Value {
        let out = self
            .kubectl_as(
                maker,
                &["system:authenticated".to_owned()],
                &["create", "-o", "json", "-f", "-"],
                Some(&object.to_string()),
            )
            .await;
        assert!(out.success, "{maker} making {}: {}", object["metadata"]["name"], out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    }
}

/// The shell pod's spec: its container and its home.
pub fn pod_spec() -> Value {
    json!({"containers": [{"name": "shell", "image": "busybox:1.37.0"}],
           "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": HOME}}]})
}

/// Refused (by RBAC, a policy or a webhook) or through, by what kubectl printed.
pub fn outcome_of(out: &KubectlOutput) -> Outcome {
    let refused = ["Forbidden", "forbidden", "denied the request", "Unauthorized", "failed calling webhook"];
    if !out.success && refused.iter().any(|w| out.stderr.contains(w)) {
        Outcome::Refused(out.stderr.trim().to_owned())
    } else if out.success
        || ["does not have a host assigned", "is not running", "error dialing backend"]
            .iter()
            .any(|w| out.stderr.contains(w))
    {
        Outcome::Through
    } else {
        Outcome::Refused(format!("not a refusal nor a success: {}", out.stderr.trim()))
    }
}

/// The operator and Kubernetes' controllers may act here as on a real cluster (RBAC-wise; the
/// policies decide the rest).
async fn controllers_may_act(client: &Client) {
    let apply = PatchParams::apply("myownshell-tests").force();
    for (name, user) in [
        ("doors-operator", OPERATOR),
        ("doors-deployment-controller", DEPLOYMENT_CONTROLLER),
        ("doors-replicaset-controller", REPLICASET_CONTROLLER),
    ] {
        let subject = Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        };
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: "cluster-admin".into(),
            },
            subjects: Some(vec![subject]),
        };
        Api::<ClusterRoleBinding>::all(client.clone()).patch(name, &apply, &Patch::Apply(&binding)).await.unwrap();
    }
}

/// VolumeSnapshots: the CRD (as a CSI snapshot controller installs it) and, for `editors` in
/// `ns`, the right to make them (as its aggregated roles give editors), so that the policy, not
/// RBAC, is what refuses a snapshot of a home.
async fn snapshots_for(client: &Client, ns: &str, editors: &[&str]) {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "volumesnapshots.snapshot.storage.k8s.io",
                     "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter/pull/419"}},
        "spec": {"group": "snapshot.storage.k8s.io", "scope": "Namespaced",
                 "names": {"plural": "volumesnapshots", "singular": "volumesnapshot", "kind": "VolumeSnapshot"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let out = myownshell_envtest::shared()
        .kubectl()
        .run_with_stdin(&["apply", "-f", "-"], Some(&crd.to_string()))
        .await
        .unwrap();
    assert!(out.success, "the VolumeSnapshot CRD: {}", out.stderr);
    let apply = PatchParams::apply("myownshell-tests").force();
    let meta = |name: &str| ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..ObjectMeta::default() };
    let role = Role {
        metadata: meta("snapshots"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["snapshot.storage.k8s.io".into()]),
            resources: Some(vec!["volumesnapshots".into()]),
            verbs: vec!["create".into(), "get".into(), "list".into()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(client.clone(), ns).patch("snapshots", &apply, &Patch::Apply(&role)).await.unwrap();
    let subjects = editors
        .iter()
        .map(|u| Subject {
            kind: "User".into(),
            name: (*u).into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        })
        .collect();
    let binding = RoleBinding {
        metadata: meta("snapshots"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "snapshots".into(),
        },
        subjects: Some(subjects),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .patch("snapshots", &apply, &Patch::Apply(&binding))
        .await
        .unwrap();
    // The CRD serves once established.
    myownshell_envtest::eventually("the VolumeSnapshot CRD served", Duration::from_secs(30), || async {
        let out = myownshell_envtest::shared().kubectl().run(&["get", "volumesnapshots", "-n", ns]).await?;
        if out.success { Ok(()) } else { Err(out.stderr) }
    })
    .await
    .unwrap();
}

/// The gateway, as its own ServiceAccount bound to the ClusterRole `config/rbac` ships, keeping
/// recordings in `recordings`.
async fn gateway(cp: &'static ControlPlane, client: &Client, ns: &str, recordings: &std::path::Path) -> GatewayProcess {
    let text = std::fs::read_to_string(workspace_root().join("config/rbac/gateway_role.yaml")).unwrap();
    let role = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "ClusterRole")
        .expect("a ClusterRole in gateway_role.yaml");
    let mut role: ClusterRole = serde_json::from_value(role).unwrap();
    let name = format!("{ns}-gateway");
    role.metadata = ObjectMeta { name: Some(name.clone()), ..Default::default() };
    let apply = PatchParams::apply("myownshell-tests").force();
    Api::<ClusterRole>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&role)).await.unwrap();
    let binding = rbac::cluster_role_binding(&name, &name, rbac::service_account_subject(ns, "gateway"));
    Api::<ClusterRoleBinding>::all(client.clone()).patch(&name, &apply, &Patch::Apply(&binding)).await.unwrap();
    let token = service_account_token(client, ns, "gateway", &[], HOUR).await.unwrap();
    let kubeconfig = cp.layout().dir.join(format!("{ns}-gateway.kubeconfig"));
    write_kubeconfig(&kubeconfig, &cp.kubeconfig_for_token(&token)).unwrap();
    let dir = format!("--recordings-dir={}", recordings.display());
    GatewayProcess::start(cp, kubeconfig, &name, &[&dir]).await.unwrap()
}
