//! Approvals at admission, against the real apiserver, real RBAC and a `myownshell-webhook`
//! process, through `kubectl myownshell approve` and `reject` and by hand: the owner never
//! approves her own shell, whatever she writes; an approver the class does not name, or whom
//! RBAC does not let `approve`, is refused; an approver's entry is recorded with his name, why he
//! may and when, whatever his request said; nobody changes an entry, and only its author takes it
//! back (the owner cannot remove a rejection). (What approvals come to, and the shell held until
//! it has them: `controller_classes.rs`.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use myownshell_api::{Decision, MyOwnShell};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{create_shell_namespace, eventually, service_account_user, shared};
use myownshell_tests::access::{as_user, namespace_editors, shell_manifest};
use myownshell_tests::plugin;
use myownshell_tests::webhooks::{InstalledWebhooks, Target, WebhookOptions, WebhookProcess};
use serde_json::json;

const READY: Duration = Duration::from_secs(60);

/// `kubectl args` as `user`: (success, stdout + stderr).
async fn kubectl_as(user: &str, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut all = as_user(user, &["system:authenticated"]);
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = shared().kubectl().run_with_stdin(&all, stdin).await.unwrap();
    (out.success, format!("{}{}", out.stdout, out.stderr))
}

/// `kubectl myownshell args` as `user`: (exit code 0, stdout + stderr).
fn plugin_as(ns: &str, user: &str, args: &[&str]) -> (bool, String) {
    let kubeconfig = shared().kubeconfig_path();
    let mut all = vec!["--as", user, "--as-group", "system:authenticated"];
    all.extend_from_slice(args);
    let out = plugin::run(&kubeconfig, ns, &all).unwrap();
    (out.code == 0, format!("{}{}", out.stdout, out.stderr))
}

/// RBAC's `approve` (config/rbac's approver ClusterRole, under a name of this test's) for
/// `users` in `ns`.
async fn approvers(client: &kube::Client, ns: &str, users: &[&str]) {
    let roles =
        std::fs::read_to_string(myownshell_envtest::assets::workspace_root().join("config/rbac/user_roles.yaml"))
            .unwrap();
    let shipped = roles.split("\n---\n").find(|doc| doc.contains("name: approver")).expect("the approver role");
    let mut role: ClusterRole = serde_saphyr::from_str(shipped).unwrap();
    let name = format!("{ns}-approver");
    role.metadata.name = Some(name.clone());
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some("approvers".into()), namespace: Some(ns.into()), ..ObjectMeta::default() },
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "ClusterRole".into(), name },
        subjects: Some(
            users
                .iter()
                .map(|u| Subject {
                    kind: "User".into(),
                    name: (*u).into(),
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    namespace: None,
                })
                .collect(),
        ),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns).create(&PostParams::default(), &binding).await.unwrap();
}

/// RBAC's `use` of `class` for `user` everywhere (a class that is not the default needs it).
async fn may_use(client: &kube::Client, class: &str, user: &str) {
    let role = ClusterRole {
        metadata: ObjectMeta { name: Some(format!("use-{class}")), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["myownshell.io".into()]),
            resources: Some(vec!["myownshellclasses".into()]),
            resource_names: Some(vec![class.into()]),
            verbs: vec!["use".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("use-{class}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("use-{class}")},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]
    });
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(binding).unwrap();
    Api::all(client.clone()).create(&PostParams::default(), &binding).await.unwrap();
}

#[tokio::test]
async fn only_an_approver_of_the_class_approves_and_never_the_owner() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_shell_namespace(&client, "approvals").await.unwrap();
    let [alice, bob, carol, eve] = ["alice", "bob", "carol", "eve"].map(|p| service_account_user(&ns, p));
    namespace_editors(&client, &ns, &[&alice, &bob, &carol, &eve], &[]).await.unwrap();
    approvers(&client, &ns, &[&bob, &eve, &alice]).await;
    let port = free_port().unwrap();
    let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.clone() };
    let installed = InstalledWebhooks::install(&client, &ns, &target).await.unwrap();
    let mut options = WebhookOptions::for_installed(&installed, &ns, port);
    options.args = vec!["--class-use-allow-cache-ttl=1s".into(), "--class-use-deny-cache-ttl=1s".into()];
    let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
    webhook.wait_ready(READY).await.unwrap();

    let class = format!("{ns}-four-eyes");
    let manifest = format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShellClass\nmetadata: {{name: {class}}}\nspec: {{approval: {{approvers: {{users: [\"{bob}\", \"{carol}\"]}}}}}}\n"
    );
    cp.kubectl().run_with_stdin(&["apply", "-f", "-"], Some(&manifest)).await.unwrap().ok().unwrap();
    may_use(&client, &class, &alice).await;
    let shell = shell_manifest("guarded", &format!("{{className: {class}, size: 1}}"));
    eventually("alice's shell of the class admitted", READY, || async {
        match kubectl_as(&alice, &["apply", "-n", &ns, "-f", "-"], Some(&shell)).await {
            (true, _) => Ok(()),
            (false, out) => Err(out),
        }
    })
    .await
    .unwrap();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    let approvals = || async { shells.get("guarded").await.unwrap().spec.approvals.unwrap_or_default() };

    // The owner, every way: the plugin, an entry in bob's name, the status.
    let (ok, out) = plugin_as(&ns, &alice, &["approve", "guarded"]);
    assert!(!ok && out.contains("owns it, and nobody approves their own shell"), "alice's approve: {out}");
    let forged = r#"[{"op": "add", "path": "/spec/approvals", "value": [{"by": "BOB", "decision": "Approve"}]}]"#
        .replace("BOB", &bob);
    let (ok, out) =
        kubectl_as(&alice, &["patch", "mos", "guarded", "-n", &ns, "--type=json", "-p", &forged], None).await;
    assert!(!ok && out.contains("owns it"), "alice's entry in bob's name: {out}");
    let status = r#"{"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Approved", "message": "by me", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#;
    let (ok, out) = kubectl_as(
        &alice,
        &["patch", "mos", "guarded", "-n", &ns, "--subresource=status", "--type=merge", "-p", status],
        None,
    )
    .await;
    assert!(!ok && out.contains("forbidden"), "alice writing the status: {out}");
    assert!(approvals().await.is_empty(), "nothing recorded");

    // eve may approve by RBAC, but the class does not name her; carol is named, RBAC does not let her.
    let (ok, out) = plugin_as(&ns, &eve, &["approve", "guarded"]);
    assert!(!ok && out.contains("is not among its class's approvers"), "eve: {out}");
    let (ok, out) = plugin_as(&ns, &carol, &["approve", "guarded"]);
    assert!(!ok && out.contains("RBAC must grant the verb \"approve\""), "carol: {out}");

    // bob, with his reason: recorded with his name, why he may and when.
    let (ok, out) = plugin_as(&ns, &bob, &["approve", "guarded", "--reason", "on call"]);
    assert!(ok, "bob: {out}");
    let recorded = approvals().await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let entry = &recorded[0];
    assert_eq!(
        (entry.by.as_deref(), entry.via.as_deref(), entry.decision, entry.reason.as_deref()),
        (Some(bob.as_str()), Some("user"), Decision::Approve, Some("on call"))
    );
    let age = k8s_openapi::jiff::Timestamp::now().as_second() - entry.at.as_ref().unwrap().0.as_second();
    assert!((0..120).contains(&age), "recorded {age} s ago");

    // Nobody sets an entry's time: bob dating his a year ahead (to make it last) gives it anew,
    // stamped now; alice cannot touch it.
    let later = r#"[{"op": "replace", "path": "/spec/approvals/0/at", "value": "2027-12-01T00:00:00Z"}]"#;
    let (ok, out) = kubectl_as(&alice, &["patch", "mos", "guarded", "-n", &ns, "--type=json", "-p", later], None).await;
    assert!(!ok && out.contains("takes back"), "alice changing bob's entry: {out}");
    let (ok, out) = kubectl_as(&bob, &["patch", "mos", "guarded", "-n", &ns, "--type=json", "-p", later], None).await;
    assert!(ok, "bob giving his approval anew: {out}");
    let again = approvals().await;
    let age = k8s_openapi::jiff::Timestamp::now().as_second() - again[0].at.as_ref().unwrap().0.as_second();
    assert!((0..120).contains(&age), "bob's entry dated {:?}, not now", again[0].at);

    // Only its author takes an entry back: the owner cannot remove a rejection.
    let (ok, out) = plugin_as(&ns, &bob, &["reject", "guarded", "--reason", "not today"]);
    assert!(ok, "bob's rejection: {out}");
    let remove = r#"[{"op": "remove", "path": "/spec/approvals/1"}]"#;
    let (ok, out) =
        kubectl_as(&alice, &["patch", "mos", "guarded", "-n", &ns, "--type=json", "-p", remove], None).await;
    assert!(!ok && out.contains("takes back"), "alice removing bob's rejection: {out}");
    let (ok, out) = kubectl_as(&bob, &["patch", "mos", "guarded", "-n", &ns, "--type=json", "-p", remove], None).await;
    assert!(ok, "bob taking his rejection back: {out}");
    assert_eq!(approvals().await.len(), 1, "bob's approval stays");

    // An approver changes nothing else of the spec.
    let resize = r#"{"spec": {"size": 0}}"#;
    let (ok, out) = kubectl_as(&bob, &["patch", "mos", "guarded", "-n", &ns, "--type=merge", "-p", resize], None).await;
    assert!(!ok && out.contains("only the shell's owner"), "bob resizing: {out}");
}
