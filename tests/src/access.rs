//! What the tests of "who may get into a shell" share, on the API-only plane and on the real
//! node: users of a namespace's `edit` role (`alice`, `bob`, … through `kubectl --as`), the
//! admission policies of `config/policy`, and reading kubectl's answers.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use myownshell_envtest::kubectl::{Kubectl, KubectlOutput};

/// The webhook check's name, as the apiserver quotes it in a refusal.
pub const CONNECT_WEBHOOK: &str = "connect.myownshell.io";
/// The same check in namespaces not opened to shells (`failurePolicy: Ignore`).
pub const CONNECT_UNOPENED_WEBHOOK: &str = "connect-unopened.myownshell.io";

/// Who refused a connection, by what kubectl printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The connect webhook (`config/webhook`) decided against it, naming the shell.
    Webhook,
    /// The apiserver could not ask the connect webhook (down, not yet serving): the gate fails
    /// closed (`failurePolicy: Fail`).
    WebhookDown,
}

/// Whether kubectl's answer is a refusal by the webhook, or for want of it.
pub fn refusal(out: &KubectlOutput) -> Option<Refusal> {
    if out.success {
        return None;
    }
    // A decision names the shell; a replica that has not listed the shells yet refuses too, but
    // that is no decision.
    let denied_by = |name: &str| out.stderr.contains(&format!("admission webhook \"{name}\" denied the request"));
    if (denied_by(CONNECT_WEBHOOK) || denied_by(CONNECT_UNOPENED_WEBHOOK)) && out.stderr.contains("(a MyOwnShell)") {
        Some(Refusal::Webhook)
    } else if out.stderr.contains(&format!("failed calling webhook \"{CONNECT_WEBHOOK}\"")) {
        Some(Refusal::WebhookDown)
    } else {
        None
    }
}

/// `kubectl --as user --as-group …` flags.
pub fn as_user(user: &str, groups: &[&str]) -> Vec<String> {
    let mut flags = vec!["--as".to_owned(), user.to_owned()];
    for group in groups {
        flags.push("--as-group".to_owned());
        flags.push((*group).to_owned());
    }
    flags
}

/// Run kubectl as `user` (in `groups`) with `args`.
pub async fn kubectl_as(kubectl: &Kubectl, user: &str, groups: &[&str], args: &[&str]) -> KubectlOutput {
    let mut all: Vec<String> = as_user(user, groups);
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    kubectl.run(&all).await.unwrap_or_else(|e| KubectlOutput { success: false, stdout: String::new(), stderr: e })
}

/// Give `users` and `groups` the built-in `edit` role in `namespace` (which may exec into, attach
/// to, port-forward to, edit and create pods, Deployments and MyOwnShells), and `kubectl debug`
/// (ephemeral containers, which `edit` lacks). Where no controller-manager aggregates `edit`
/// (the API-only plane), its sources are bound too: `system:aggregate-to-edit` and `-view`, and
/// the MyOwnShell rules `config/rbac` aggregates into it.
pub async fn namespace_editors(
    client: &Client,
    namespace: &str,
    users: &[&str],
    groups: &[&str],
) -> Result<(), kube::Error> {
    let mut subjects: Vec<Subject> = users
        .iter()
        .map(|u| Subject {
            kind: "User".into(),
            name: (*u).into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        })
        .collect();
    subjects.extend(groups.iter().map(|g| Subject {
        kind: "Group".into(),
        name: (*g).into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        namespace: None,
    }));
    let meta =
        |name: &str| ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..ObjectMeta::default() };
    let rule = |group: &str, resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    };
    let all = ["create", "delete", "get", "list", "patch", "update", "watch"];
    let extra = Role {
        metadata: meta("shells-and-debug"),
        rules: Some(vec![
            rule("", &["pods/ephemeralcontainers"], &["get", "update", "patch"]),
            rule("myownshell.io", &["myownshells"], &all),
            rule("myownshell.io", &["myownshells/scale"], &["get", "patch", "update"]),
        ]),
    };
    let apply = PatchParams::apply("myownshell-tests").force();
    Api::<Role>::namespaced(client.clone(), namespace).patch("shells-and-debug", &apply, &Patch::Apply(&extra)).await?;
    for (name, kind, role) in [
        ("editors", "ClusterRole", "edit"),
        ("edit-sources", "ClusterRole", "system:aggregate-to-edit"),
        ("view-sources", "ClusterRole", "system:aggregate-to-view"),
        ("shells-and-debug", "Role", "shells-and-debug"),
    ] {
        let binding = RoleBinding {
            metadata: meta(name),
            role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: kind.into(), name: role.into() },
            subjects: Some(subjects.clone()),
        };
        Api::<RoleBinding>::namespaced(client.clone(), namespace).patch(name, &apply, &Patch::Apply(&binding)).await?;
    }
    Ok(())
}

/// Install the admission policies of `config/policy` as they are (kubectl apply), and wait
/// until the apiserver enforces them: it loads a new policy and its binding from a watch, so for
/// a moment after the apply nothing is refused yet.
pub async fn install_policies(kubectl: &Kubectl) -> Result<(), String> {
    let objects = myownshell_envtest::kustomize::render("policy")?;
    let refs: Vec<&serde_json::Value> = objects.iter().collect();
    let list = myownshell_envtest::kustomize::as_list(&refs);
    // Two tests of one binary may install them at once: the apply that lost a create to the
    // other's is made again (then it finds them and changes nothing).
    let mut out = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&list)).await?;
    if !out.success && out.stderr.contains("AlreadyExists") {
        out = kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&list)).await?;
    }
    out.ok().map(drop)?;
    // A pod labelled as a shell's, made by someone who is not the ReplicaSet controller, is
    // what `shell-workloads` refuses: tried as a server-side dry run until it is.
    let lookalike = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "policy-probe-7d9f8c6b4-x2x4z", "namespace": "default",
                     "labels": {"app.kubernetes.io/name": "myownshell", "app.kubernetes.io/instance": "policy-probe"}},
        "spec": {"containers": [{"name": "shell", "image": "busybox:1.37.0"}]},
    })
    .to_string();
    myownshell_envtest::eventually("the admission policies in force", std::time::Duration::from_secs(30), || async {
        let out = kubectl.run_with_stdin(&["create", "--dry-run=server", "-f", "-"], Some(&lookalike)).await?;
        if !out.success && out.stderr.contains("ValidatingAdmissionPolicy") {
            Ok(())
        } else {
            Err(format!("the probe pod was {}: {}", if out.success { "admitted" } else { "refused" }, out.stderr))
        }
    })
    .await
}

/// A MyOwnShell manifest `name` with `spec` (YAML flow mapping, e.g. `{size: 1}`).
pub fn shell_manifest(name: &str, spec: &str) -> String {
    format!("apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata:\n  name: {name}\nspec: {spec}\n")
}
