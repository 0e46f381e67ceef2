//! The access phase: who gets into a shell on the real node, with the operator deployed from
//! `config/`. `alice` owns a shell, `bob` and `carol` may edit the namespace (the built-in `edit`
//! role, which may exec into any pod there), `devs` is a group; all through `kubectl --as`.

use myownshell_api::names::reasons;
use myownshell_envtest::eventually;
use myownshell_envtest::kubectl::KubectlOutput;
use myownshell_tests::access::{Refusal, kubectl_as, namespace_editors, refusal, shell_manifest};
use myownshell_webhook::connect::access::PROXY_NAME_FORMS;

use super::{E2e, SYSTEM, TIMEOUT, WEBHOOK, wait_running};

const AUTH: &[&str] = &["system:authenticated"];

struct Access<'e> {
    e2e: &'e E2e,
    ns: String,
}

impl Access<'_> {
    async fn as_user(&self, user: &str, groups: &[&str], args: &[&str]) -> KubectlOutput {
        let mut all = vec!["-n", self.ns.as_str()];
        all.extend_from_slice(args);
        kubectl_as(&self.e2e.kubectl, user, groups, &all).await
    }

    async fn apply_as(&self, user: &str, manifest: &str) -> KubectlOutput {
        let mut args = myownshell_tests::access::as_user(user, AUTH);
        args.extend(["apply", "-n", &self.ns, "-f", "-"].map(str::to_owned));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.e2e.kubectl.run_with_stdin(&args, Some(manifest)).await.unwrap()
    }

    /// Poll `exec pod -- args` as `user` until who refused it is `want` (`None`: it ran); the
    /// last answer.
    async fn exec_until(
        &self,
        user: &str,
        groups: &[&str],
        pod: &str,
        want: Option<Refusal>,
        cmd: &[&str],
    ) -> KubectlOutput {
        let mut args = vec!["exec", pod, "--"];
        args.extend_from_slice(cmd);
        eventually(&format!("{user}'s exec into {pod} to be {want:?}"), TIMEOUT, || async {
            let out = self.as_user(user, groups, &args).await;
            let ok = match want {
                None => out.success,
                Some(w) => refusal(&out) == Some(w),
            };
            if ok { Ok(out) } else { Err(format!("{:?}: {}{}", refusal(&out), out.stdout, out.stderr)) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.e2e.diagnostics()))
    }

    async fn pod_uid(&self, pod: &str) -> String {
        self.e2e.run(&["get", "pod", pod, "-n", &self.ns, "-o", "jsonpath={.metadata.uid}"]).await
    }
}

/// Owner in, strangers out by every way in, sharing without a restart, an editor's attempts to
/// get around it refused, the policy keeping strangers out while the webhook is down, ordinary
/// pods untouched, and the record.
pub async fn access(e2e: &E2e) {
    let ns = e2e.namespace("e2e-access").await;
    let client = e2e.cluster.control_plane().client().unwrap();
    namespace_editors(&client, &ns, &["alice", "bob", "carol"], &["devs"]).await.unwrap();
    let a = Access { e2e, ns: ns.clone() };
    let created = a.apply_as("alice", &shell_manifest("mine", "{size: 1}")).await;
    assert!(created.success, "{}", created.stderr);
    let pod = wait_running(e2e, &ns, "mine", 1).await.remove(0);
    let uid = a.pod_uid(&pod).await;

    let id = a.exec_until("alice", AUTH, &pod, None, &["sh", "-c", "id && echo kept > /tmp/marker"]).await;
    assert!(id.stdout.starts_with("uid=65534"), "{}", id.stdout);
    let via_deployment = a.as_user("alice", AUTH, &["exec", "deploy/mine", "--", "cat", "/tmp/marker"]).await;
    assert_eq!(via_deployment.stdout, "kept\n", "{}", via_deployment.stderr);

    strangers_are_refused_every_way_in(&a, &pod).await;
    editors_cannot_get_around_it(&a, &pod).await;

    // Shared with bob, then with a group: in at once, the pod untouched.
    let shared =
        a.apply_as("alice", &shell_manifest("mine", "{size: 1, sharedWith: {users: [bob], groups: [devs]}}")).await;
    assert!(shared.success, "{}", shared.stderr);
    let bob = a.exec_until("bob", AUTH, &pod, None, &["cat", "/tmp/marker"]).await;
    assert_eq!(bob.stdout, "kept\n");
    a.exec_until("carol", &["devs", "system:authenticated"], &pod, None, &["true"]).await;
    a.exec_until("carol", AUTH, &pod, Some(Refusal::Webhook), &["true"]).await;
    assert_eq!(a.pod_uid(&pod).await, uid, "sharing does not restart the shell");
    let unshared = a.apply_as("alice", &shell_manifest("mine", "{size: 1}")).await;
    assert!(unshared.success, "{}", unshared.stderr);

    the_record(&a, &pod).await;
    with_the_webhook_stopped(&a, &pod).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

async fn strangers_are_refused_every_way_in(a: &Access<'_>, pod: &str) {
    let refused = a.exec_until("bob", AUTH, pod, Some(Refusal::Webhook), &["id"]).await;
    assert!(
        refused.stderr.contains(&format!(
            "it runs shell {}/mine (a MyOwnShell), which only its owner alice may connect to",
            a.ns
        )),
        "{}",
        refused.stderr
    );
    let tries: [(&str, Vec<String>); 4] = [
        ("attach", vec!["attach".into(), pod.into()]),
        ("cp", vec!["cp".into(), format!("{pod}:/tmp/marker"), "/tmp/stolen".into()]),
        ("port-forward", vec!["port-forward".into(), pod.into(), "18081:80".into()]),
        (
            "debug",
            vec![
                "debug".into(),
                pod.into(),
                "--image=busybox:1.37.0".into(),
                "--profile=general".into(),
                "--attach=false".into(),
            ],
        ),
    ];
    for (what, args) in tries {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = a.as_user("bob", AUTH, &args).await;
        assert_eq!(refusal(&out), Some(Refusal::Webhook), "bob's {what}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains("mine (a MyOwnShell)"), "bob's {what}: {}", out.stderr);
    }
    // A proxied request names the pod with its port and scheme (`POD:8080`, `https:POD:8443`):
    // refused for bob in every form; the owner's gets past admission to the pod (where nothing
    // listens on those ports, so the proxy itself answers).
    for form in PROXY_NAME_FORMS {
        let path = format!("/api/v1/namespaces/{}/pods/{}/proxy/", a.ns, form.replace("{pod}", pod));
        let out = a.as_user("bob", AUTH, &["get", "--raw", &path]).await;
        assert_eq!(refusal(&out), Some(Refusal::Webhook), "bob's proxy through {form}: {}", out.stderr);
        let owner = a.as_user("alice", AUTH, &["get", "--raw", &path]).await;
        assert_eq!(refusal(&owner), None, "alice's proxy through {form}: {}", owner.stderr);
    }
}

/// A namespace editor's ways around the check, each refused (or harmless).
async fn editors_cannot_get_around_it(a: &Access<'_>, pod: &str) {
    let refused_by_policy = |out: &KubectlOutput| !out.success && out.stderr.contains("shell-workloads");
    for args in [
        vec!["label", "pod", pod, "app.kubernetes.io/instance-"],
        vec!["patch", "pod", pod, "--type=merge", "-p", r#"{"metadata":{"ownerReferences":null}}"#],
        vec![
            "patch",
            "deployment",
            "mine",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/template/spec/containers/0/command","value":["sh","-c","steal"]}]"#,
        ],
        vec!["set", "image", "deployment/mine", "shell=evil:1"],
    ] {
        let out = a.as_user("bob", AUTH, &args).await;
        assert!(refused_by_policy(&out), "bob {args:?}: {}{}", out.stdout, out.stderr);
    }
    let lookalike = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: mine-7d9f8c6b4-b2c4d\n  labels:\n    app.kubernetes.io/name: myownshell\n    app.kubernetes.io/instance: mine\nspec:\n  containers:\n  - name: shell\n    image: busybox:1.37.0\n    command: [sleep, \"3600\"]\n";
    let out = a.apply_as("bob", lookalike).await;
    assert!(refused_by_policy(&out), "bob's lookalike pod: {}", out.stderr);
    let copy = a
        .as_user(
            "bob",
            AUTH,
            &[
                "debug",
                pod,
                "--copy-to=copied",
                "--keep-labels",
                "--profile=general",
                "--attach=false",
                "--image=busybox:1.37.0",
            ],
        )
        .await;
    assert!(!copy.success, "a labelled copy is a lookalike: {}", copy.stdout);
    // A Service that picks alice's pod: the apiserver's service proxy does not take bob there.
    let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: steal\nspec:\n  selector:\n    app.kubernetes.io/instance: mine\n  ports:\n  - port: 8080\n";
    let made = a.apply_as("bob", service).await;
    assert!(made.success, "{}", made.stderr);
    let path = format!("/api/v1/namespaces/{}/services/steal:8080/proxy/", a.ns);
    let out = a.as_user("bob", AUTH, &["get", "--raw", &path]).await;
    assert!(!out.success && out.stderr.contains("bob may not proxy to service steal"), "{}", out.stderr);
    // Taking the shell's name for a Deployment of his own: refused before any name conflict.
    let squat = a.as_user("bob", AUTH, &["create", "deployment", "mine", "--image=busybox:1.37.0"]).await;
    assert!(!squat.success && squat.stderr.contains("the name is shell mine's"), "{}", squat.stderr);
    // Ending alice's shell, or orphaning its pods: not bob's to do.
    for args in [
        vec!["delete", "mos", "mine", "--wait=false"],
        vec!["delete", "mos", "mine", "--cascade=orphan", "--wait=false"],
    ] {
        let out = a.as_user("bob", AUTH, &args).await;
        assert!(!out.success && out.stderr.contains("shell-deletion"), "bob {args:?}: {}", out.stderr);
    }
    for (what, patch) in [
        ("sharedWith", r#"{"spec":{"sharedWith":{"users":["bob"]}}}"#),
        ("command", r#"{"spec":{"command":["sh","-c","steal"]}}"#),
    ] {
        let out = a.as_user("bob", AUTH, &["patch", "mos", "mine", "--type=merge", "-p", patch]).await;
        assert!(
            !out.success && out.stderr.contains("only the shell's owner alice"),
            "bob's {what} edit: {}",
            out.stderr
        );
    }
    // The Deployment, the pods and their owner: as the operator made them.
    let image = a
        .e2e
        .run(&["get", "deploy", "mine", "-n", &a.ns, "-o", "jsonpath={.spec.template.spec.containers[0].image}"])
        .await;
    assert_eq!(image, myownshell_api::defaults::IMAGE);
    let running = wait_running(a.e2e, &a.ns, "mine", 1).await;
    assert_eq!(running, [pod], "the shell's pod is the one it was");
}

/// Events for allowed and refused connections, and `status.lastConnection`.
async fn the_record(a: &Access<'_>, pod: &str) {
    let events = |reason: &'static str| async move {
        a.e2e
            .run(&[
                "get",
                "events.events.k8s.io",
                "-n",
                &a.ns,
                "--field-selector",
                &format!("reason={reason},regarding.name=mine"),
                "-o",
                "jsonpath={.items[*].note}",
            ])
            .await
    };
    let connected = eventually("a Connected Event", TIMEOUT, || async {
        let notes = events(reasons::CONNECTED).await;
        if notes.contains(&format!("alice connected to pod {pod} (exec)")) { Ok(notes) } else { Err(notes) }
    })
    .await
    .unwrap();
    assert!(connected.contains("bob connected"), "{connected}");
    let denied = events(reasons::CONNECTION_DENIED).await;
    for how in ["exec", "attach", "portforward", "debug"] {
        assert!(denied.contains(&format!("bob was refused {how} into pod {pod}")), "{how}: {denied}");
    }
    eventually("status.lastConnection", TIMEOUT, || async {
        let last = a
            .e2e
            .run(&[
                "get",
                "mos",
                "mine",
                "-n",
                &a.ns,
                "-o",
                "jsonpath={.status.lastConnection.pod} {.status.lastConnection.kind}",
            ])
            .await;
        if last == format!("{pod} exec") { Ok(()) } else { Err(last) }
    })
    .await
    .unwrap();
}

/// The webhook stopped: strangers are still refused (by the policy), the owner gets in, and an
/// ordinary Deployment's pod in the namespace is untouched; then the webhook comes back.
async fn with_the_webhook_stopped(a: &Access<'_>, pod: &str) {
    let e2e = a.e2e;
    let other = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ordinary\nspec:\n  selector:\n    matchLabels: {app: ordinary}\n  template:\n    metadata:\n      labels: {app: ordinary}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: busybox:1.37.0\n        command: [sleep, \"3600\"]\n";
    e2e.apply(&a.ns, other).await.unwrap();
    let ordinary = eventually("the ordinary pod Running", TIMEOUT, || async {
        let out = e2e
            .run(&[
                "get",
                "pods",
                "-n",
                &a.ns,
                "-l",
                "app=ordinary",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}",
            ])
            .await;
        match out.lines().find_map(|l| l.strip_suffix(" Running")) {
            Some(name) => Ok(name.to_owned()),
            None => Err(out),
        }
    })
    .await
    .unwrap();
    a.exec_until("bob", AUTH, &ordinary, None, &["true"]).await;

    e2e.run(&["scale", "deployment", WEBHOOK, "-n", SYSTEM, "--replicas=0"]).await;
    e2e.wait_for(
        "the webhook's pods gone",
        &["get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/component=webhook", "-o", "name"],
        |out| out.trim().is_empty(),
    )
    .await;
    let refused = a.exec_until("bob", AUTH, pod, Some(Refusal::Policy), &["id"]).await;
    assert!(refused.stderr.contains("mine (a MyOwnShell)"), "{}", refused.stderr);
    a.exec_until("alice", AUTH, pod, None, &["true"]).await;
    a.exec_until("bob", AUTH, &ordinary, None, &["true"]).await;

    e2e.run(&["scale", "deployment", WEBHOOK, "-n", SYSTEM, "--replicas=1"]).await;
    e2e.rollout(WEBHOOK).await;
    a.exec_until("bob", AUTH, pod, Some(Refusal::Webhook), &["id"]).await;
}
