//! Shell classes at admission, against the real apiserver, real RBAC and a `myownshell-webhook`
//! process: the default class and what it fills in, a class's rules naming the class, the field
//! and what it allows, RBAC's `use` (granted per namespace with an ordinary Role, revoked: the
//! running shell runs on, its next start is refused), an unknown class, two default classes.
//!
//! One test: classes are cluster-scoped, and a default class would change what every other
//! test's shells get.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, Subject};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use myownshell_api::MyOwnShell;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::{create_shell_namespace, eventually, service_account_user, shared};
use myownshell_tests::access::{as_user, namespace_editors, shell_manifest};
use myownshell_tests::webhooks::{InstalledWebhooks, Target, WebhookOptions, WebhookProcess};

const READY: Duration = Duration::from_secs(60);

fn class(name: &str, default: bool, spec: &str) -> String {
    let annotation = if default { "\n  annotations: {myownshell.io/is-default-class: \"true\"}" } else { "" };
    format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShellClass\nmetadata:\n  name: {name}{annotation}\nspec: {spec}\n"
    )
}

/// `kubectl apply` of `manifest` in `ns` as `user`: (success, stdout + stderr).
async fn apply_as(user: &str, ns: &str, manifest: &str) -> (bool, String) {
    let mut args = as_user(user, &["system:authenticated"]);
    args.extend(["apply", "-n", ns, "-f", "-"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = shared().kubectl().run_with_stdin(&args, Some(manifest)).await.unwrap();
    (out.success, format!("{}{}", out.stdout, out.stderr))
}

/// A Role granting `use` of `class` in `ns`, bound to `user`.
async fn grant_use(client: &kube::Client, ns: &str, class: &str, user: &str) {
    let meta = |name: &str| ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..ObjectMeta::default() };
    let role = Role {
        metadata: meta("use-team-class"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["myownshell.io".into()]),
            resources: Some(vec!["myownshellclasses".into()]),
            resource_names: Some(vec![class.into()]),
            verbs: vec!["use".into()],
            ..PolicyRule::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta("use-team-class"),
        role_ref: k8s_openapi::api::rbac::v1::RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "use-team-class".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        }]),
    };
    let apply = PatchParams::apply("myownshell-tests");
    Api::<Role>::namespaced(client.clone(), ns).patch("use-team-class", &apply, &Patch::Apply(&role)).await.unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .patch("use-team-class", &apply, &Patch::Apply(&binding))
        .await
        .unwrap();
}

#[tokio::test]
async fn classes_at_admission_default_rules_use_and_revocation() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_shell_namespace(&client, "classes").await.unwrap();
    let (alice, bob) = (service_account_user(&ns, "alice"), service_account_user(&ns, "bob"));
    namespace_editors(&client, &ns, &[&alice, &bob], &[]).await.unwrap();
    let port = free_port().unwrap();
    let target = Target { base_url: format!("https://127.0.0.1:{port}"), ca_bundle: None, namespace: ns.clone() };
    let installed = InstalledWebhooks::install(&client, &ns, &target).await.unwrap();
    let mut options = WebhookOptions::for_installed(&installed, &ns, port);
    options.args = vec!["--class-use-allow-cache-ttl=1s".into(), "--class-use-deny-cache-ttl=1s".into()];
    let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
    webhook.wait_ready(READY).await.unwrap();

    let (small, team) = (format!("{ns}-small"), format!("{ns}-team"));
    let small_spec = "{description: Small shells for everyone, images: {allowed: [\"busybox:1.37.0\", \"registry.example.com/tools/*\"], \
                      default: \"busybox:1.37.0\"}, resources: {max: {cpu: 500m, memory: 256Mi}}, maxSize: 2, \
                      lifetime: {maxRunTime: 8h, idleTimeout: 2h}}";
    let team_spec = "{description: The team's bigger shells, images: {allowed: [\"*\"]}, resources: {max: {cpu: \"2\", memory: 2Gi}}}";
    let admin = cp.kubectl();
    let classes = format!("{}---\n{}", class(&small, true, small_spec), class(&team, false, team_spec));
    admin.run_with_stdin(&["apply", "-f", "-"], Some(&classes)).await.unwrap().ok().unwrap();
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), &ns);
    // What config/ gives every authenticated user: reading the classes.
    let roles =
        std::fs::read_to_string(myownshell_envtest::assets::workspace_root().join("config/rbac/user_roles.yaml"))
            .unwrap();
    let viewer: Vec<&str> = roles.split("\n---\n").filter(|doc| doc.contains("class-viewer")).collect();
    admin.run_with_stdin(&["apply", "-f", "-"], Some(&viewer.join("\n---\n"))).await.unwrap().ok().unwrap();

    // A shell that names no class gets the default one, and what it fills in.
    eventually("a shell without a class gets the default", READY, || async {
        let (ok, out) = apply_as(&alice, &ns, &shell_manifest("plain", "{size: 1}")).await;
        let shell = shells.get_opt("plain").await.map_err(|e| e.to_string())?;
        match shell.map(|s| s.spec) {
            Some(spec) if spec.class_name.as_deref() == Some(small.as_str()) => {
                // Left to the class: the controller takes its default image when it builds the pods.
                assert_eq!(spec.image, None);
                let lifetime = spec.lifetime.unwrap_or_default();
                assert_eq!(
                    (lifetime.max_run_time.as_deref(), lifetime.idle_timeout.as_deref()),
                    (Some("8h"), Some("2h"))
                );
                Ok(())
            }
            other => {
                // Made before the webhook saw the class: start again.
                let _ = shells.delete("plain", &DeleteParams::default()).await;
                Err(format!("{ok} {out} {other:?}"))
            }
        }
    })
    .await
    .unwrap();

    // The class's rules, naming the class, the field and what it allows; the operator's too.
    let (ok, out) = apply_as(&alice, &ns, &shell_manifest("alpine", "{image: \"alpine:3.20\"}")).await;
    assert!(!ok, "{out}");
    for words in [
        &format!("MyOwnShellClass \"{small}\"'s spec.images.allowed"),
        "busybox:1.37.0, registry.example.com/tools/*",
        "got \"alpine:3.20\"",
    ] {
        assert!(out.contains(words), "{words}: {out}");
    }
    let (ok, out) =
        apply_as(&alice, &ns, &shell_manifest("big", "{size: 3, resources: {limits: {cpu: \"1\", memory: 64Mi}}}"))
            .await;
    assert!(
        !ok && out.contains("spec.size: must be at most 2")
            && out.contains("spec.resources.limits[cpu]: must be at most 500m"),
        "{out}"
    );

    // Another class needs `use`: bob has none; a Role grants it to alice in this namespace.
    let team_shell = |name: &str| shell_manifest(name, &format!("{{className: {team}, size: 1}}"));
    let (ok, out) = apply_as(&bob, &ns, &team_shell("bobs")).await;
    assert!(!ok && out.contains(&format!("{bob} may not use MyOwnShellClass \"{team}\" in namespace {ns}")), "{out}");
    grant_use(&client, &ns, &team, &alice).await;
    eventually("alice uses the team class once granted", READY, || async {
        match apply_as(&alice, &ns, &team_shell("alices")).await {
            (true, _) => Ok(()),
            (false, out) => Err(out),
        }
    })
    .await
    .unwrap();

    // `kubectl myownshell classes` shows each what they may use; `ls` shows each shell's class.
    let dir = tempfile::tempdir().unwrap();
    for (who, sees, not) in [("alice", vec![&small, &team], None), ("bob", vec![&small], Some(&team))] {
        let token = myownshell_envtest::service_account_token(&client, &ns, who, &[], 3600).await.unwrap();
        let kubeconfig = dir.path().join(format!("{who}.kubeconfig"));
        myownshell_envtest::control_plane::write_kubeconfig(&kubeconfig, &cp.kubeconfig_for_token(&token)).unwrap();
        let out = myownshell_tests::plugin::run(&kubeconfig, &ns, &["classes"]).unwrap();
        assert_eq!(out.code, 0, "{}", out.stderr);
        for class in sees {
            assert!(out.stdout.lines().any(|l| l.starts_with(class.as_str())), "{who} may use {class}: {}", out.stdout);
        }
        if let Some(class) = not {
            assert!(!out.stdout.contains(class.as_str()), "{who} may not use {class}: {}", out.stdout);
        }
        if who == "alice" {
            assert!(out.stdout.contains("Small shells for everyone") && out.stdout.contains("yes"), "{}", out.stdout);
            let ls = myownshell_tests::plugin::run(&kubeconfig, &ns, &["ls"]).unwrap();
            let line = ls.stdout.lines().find(|l| l.starts_with("alices ")).unwrap_or_default().to_owned();
            assert!(
                ls.stdout.starts_with("NAME ") && ls.stdout.contains("CLASS") && line.contains(&team),
                "{}",
                ls.stdout
            );
        }
    }

    // Revoked: her running shell is left alone, it stops; its next start is refused.
    Api::<RoleBinding>::namespaced(client.clone(), &ns)
        .delete("use-team-class", &DeleteParams::default())
        .await
        .unwrap();
    let stop = format!("{{className: {team}, size: 1, stopped: true}}");
    let (ok, out) = apply_as(&alice, &ns, &shell_manifest("alices", &stop)).await;
    assert!(ok, "stopping needs no grant: {out}");
    let stopped = shells.get("alices").await.unwrap().spec;
    assert_eq!(stopped.stopped, Some(true), "{out} {stopped:?}");
    let patch_as_alice = |patch: &'static str| {
        let (alice, ns) = (alice.clone(), ns.clone());
        async move {
            let mut args = as_user(&alice, &["system:authenticated"]);
            args.extend(["patch", "mos", "alices", "-n", &ns, "--type=merge", "-p", patch].map(str::to_owned));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            shared().kubectl().run(&args).await.unwrap()
        }
    };
    // (An allow is trusted for --class-use-allow-cache-ttl, 1 s here: a start within it passes,
    // and is stopped again.)
    eventually("the next start refused", READY, || async {
        // What `kubectl myownshell start` and `stop` send.
        let out = patch_as_alice(r#"{"spec": {"stopped": false}}"#).await;
        if out.success {
            assert!(patch_as_alice(r#"{"spec": {"stopped": true}}"#).await.success);
            return Err(format!("started within the cache's life: {}", out.stdout));
        }
        match out.stderr.contains("may not use MyOwnShellClass") {
            true => Ok(()),
            false => Err(out.stderr),
        }
    })
    .await
    .unwrap();
    assert_eq!(shells.get("alices").await.unwrap().spec.stopped, Some(true), "nothing is lost: still there, stopped");

    // A class that does not exist; then two default classes: the newest wins, with a warning.
    let (ok, out) = apply_as(&alice, &ns, &shell_manifest("nowhere", "{className: no-such-class}")).await;
    assert!(!ok && out.contains("spec.className: no MyOwnShellClass is named \"no-such-class\""), "{out}");
    let newer = format!("{ns}-newer");
    admin.run_with_stdin(&["apply", "-f", "-"], Some(&class(&newer, true, "{}"))).await.unwrap().ok().unwrap();
    eventually("the newest default class taken, with a warning", READY, || async {
        let (ok, out) = apply_as(&alice, &ns, &shell_manifest("second", "{size: 1}")).await;
        let got = shells.get_opt("second").await.map_err(|e| e.to_string())?.and_then(|s| s.spec.class_name);
        if got.as_deref() == Some(newer.as_str()) {
            assert!(out.contains("several MyOwnShellClasses are marked"), "{out}");
            return Ok(());
        }
        let _ = shells.delete("second", &DeleteParams::default()).await;
        Err(format!("{ok} {out} {got:?}"))
    })
    .await
    .unwrap();

    let names = [small.as_str(), team.as_str(), newer.as_str()];
    for name in names {
        admin.run(&["delete", "myownshellclass", name, "--wait=false"]).await.unwrap();
    }
    drop(webhook);
    installed.remove().await.unwrap();
}

/// What a platform team writes is checked as it is written (`config/policy/shell_classes.yaml`,
/// in the apiserver): a default image the class does not allow is refused; a class that allows
/// nothing, everything, or lets nobody run a shell is admitted with a warning saying so.
#[tokio::test]
async fn a_class_is_checked_as_it_is_written() {
    let cp = shared();
    let admin = cp.kubectl();
    let policy = myownshell_envtest::assets::workspace_root().join("config/policy/shell_classes.yaml");
    admin.run(&["apply", "-f", policy.to_str().unwrap()]).await.unwrap().ok().unwrap();
    let name = |what: &str| format!("policy-{what}-{}", std::process::id());
    let refused = class(
        &name("refused"),
        false,
        "{images: {allowed: [\"registry.example.com/tools/*\"], default: \"busybox:1.37.0\"}}",
    );
    eventually("the class policy in force", READY, || async {
        let out = admin.run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&refused)).await.unwrap();
        match out.success {
            false if out.stderr.contains("spec.images.default: must be one of the images spec.images.allowed allows (registry.example.com/tools/*), got busybox:1.37.0") => Ok(()),
            _ => Err(format!("{} {}", out.stdout, out.stderr)),
        }
    })
    .await
    .unwrap();
    let fits = class(
        &name("fits"),
        false,
        "{images: {allowed: [\"registry.example.com/tools/*\"], default: \"registry.example.com/tools/shell:1\"}}",
    );
    let out = admin.run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&fits)).await.unwrap();
    assert!(out.success && !out.stderr.contains("Warning"), "{}", out.stderr);
    let warned = [
        ("{images: {allowed: []}}", "the class allows no image"),
        ("{images: {allowed: [\"**\"]}}", "the class allows every image"),
        ("{maxRunningPerUser: 0}", "nobody may run a shell of this class"),
    ];
    for (spec, says) in warned {
        let out = admin
            .run_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&class(&name("warned"), false, spec)))
            .await
            .unwrap();
        assert!(out.success && out.stderr.contains("Warning: ") && out.stderr.contains(says), "{spec}: {}", out.stderr);
    }
}
