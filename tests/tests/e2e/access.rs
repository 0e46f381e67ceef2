//! The access phase: who gets into a shell on the real node, with the operator deployed from
//! `config/`. `alice` owns a shell, `bob` and `carol` may edit the namespace (the built-in `edit`
//! role, which may exec into any pod there), `devs` is a group; all through `kubectl --as`.

use myownshell_api::names::reasons;
use myownshell_envtest::eventually;
use myownshell_envtest::kubectl::KubectlOutput;
use myownshell_tests::access::{Refusal, kubectl_as, namespace_editors, refusal, shell_manifest};
use myownshell_webhook::connect::access::PROXY_NAME_FORMS;

use super::{E2e, SYSTEM, TIMEOUT, WEBHOOK, import_probe_image, wait_running};

const AUTH: &[&str] = &["system:authenticated"];
/// The README's recipe for `--apiserver-client-ca-file`: the ConfigMap
/// `myownshell-apiserver-client-ca` mounted into the webhook's container (a strategic merge
/// patch, which keeps the volumes an overlay added)...
const APISERVER_CLIENT_CA_MOUNT: &str = r#"{"spec":{"template":{"spec":{"volumes":[{"name":"apiserver-client-ca","configMap":{"name":"myownshell-apiserver-client-ca"}}],"containers":[{"name":"webhook","volumeMounts":[{"name":"apiserver-client-ca","mountPath":"/etc/myownshell/apiserver-client-ca","readOnly":true}]}]}}}}"#;
/// ... and the flag, added to its arguments (a JSON patch: a strategic one would replace them).
const APISERVER_CLIENT_CA_FLAG: &str = r#"[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--apiserver-client-ca-file=/etc/myownshell/apiserver-client-ca/ca.crt"}]"#;

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
/// get around it refused, the record, and the gate closed to everyone while the webhook is down
/// (only in namespaces opened to shells).
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
    beside_the_shell(&a).await;
    forged_records_are_refused(&a, &pod).await;

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
    // Ending alice's shell, orphaning its pods, or taking its finalizer off: not bob's to do (on
    // a live shell the mutating webhook puts the finalizer back before the policy would refuse).
    let strip = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    let stripped = a.as_user("bob", AUTH, &["patch", "mos", "mine", "--type=json", "-p", strip]).await;
    let finalizers = a.e2e.run(&["get", "mos", "mine", "-n", &a.ns, "-o", "jsonpath={.metadata.finalizers}"]).await;
    assert!(
        (!stripped.success && stripped.stderr.contains("shell-deletion"))
            || finalizers.contains("myownshell.io/finalizer"),
        "bob's strip of the finalizer: {finalizers}: {}",
        stripped.stderr
    );
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
    // A clock the user sets: a restartedAt in the future (which would hold off every idle and
    // run-time stop) is stamped with the webhook's clock.
    let future = a
        .apply_as("alice", &shell_manifest("clock", "{size: 0, lifetime: {restartedAt: '2030-01-01T00:00:00Z'}}"))
        .await;
    assert!(future.success, "{}", future.stderr);
    let stamped = a.e2e.run(&["get", "mos", "clock", "-n", &a.ns, "-o", "jsonpath={.spec.lifetime.restartedAt}"]).await;
    assert!(stamped.starts_with("20") && !stamped.starts_with("2030"), "restartedAt kept as asked: {stamped}");
    // The Deployment, the pods and their owner: as the operator made them.
    let image = a
        .e2e
        .run(&["get", "deploy", "mine", "-n", &a.ns, "-o", "jsonpath={.spec.template.spec.containers[0].image}"])
        .await;
    assert_eq!(image, myownshell_api::defaults::IMAGE);
    let running = wait_running(a.e2e, &a.ns, "mine", 1).await;
    assert_eq!(running, [pod], "the shell's pod is the one it was");
}

/// What an editor could try beside the shell rather than through it: a pod of his own on its
/// node with a hostPath into its volumes or the host's processes (refused: the namespace enforces
/// Pod Security `baseline`, as the README asks of namespaces with shells), and a pod named as
/// the shell alice is about to create, which that shell would hand her (her shell is refused
/// while it runs, naming it).
async fn beside_the_shell(a: &Access<'_>) {
    let e2e = a.e2e;
    e2e.run(&["label", "namespace", &a.ns, "pod-security.kubernetes.io/enforce=baseline"]).await;
    let container = r#"{"name":"c","image":"busybox:1.37.0","command":["sleep","3600"]"#;
    for (what, spec) in [
        (
            "hostpath",
            format!(
                r#"{{"volumes":[{{"name":"h","hostPath":{{"path":"/var/lib/kubelet/pods"}}}}],"containers":[{container},"volumeMounts":[{{"name":"h","mountPath":"/h"}}]}}]}}"#
            ),
        ),
        (
            "hostpid",
            format!(r#"{{"hostPID":true,"containers":[{container},"securityContext":{{"privileged":true}}}}]}}"#),
        ),
    ] {
        let pod =
            format!(r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"neighbour-{what}"}},"spec":{spec}}}"#);
        let out = a.apply_as("bob", &pod).await;
        assert!(
            !out.success && out.stderr.contains("violates PodSecurity \"baseline"),
            "bob's {what} pod: {}",
            out.stderr
        );
    }
    // bob's pod, named as shell `later`'s Deployment would name one, running on the node.
    let planted = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"later-7d9f8c6b4-x2x4z"}},"spec":{{"terminationGracePeriodSeconds":1,"containers":[{container}}}]}}}}"#
    );
    let out = a.apply_as("bob", &planted).await;
    assert!(out.success, "{}", out.stderr);
    e2e.wait_for(
        "bob's pod named as shell later's Running",
        &["get", "pod", "later-7d9f8c6b4-x2x4z", "-n", &a.ns, "-o", "jsonpath={.status.phase}"],
        |p| p == "Running",
    )
    .await;
    let later = a.apply_as("alice", &shell_manifest("later", "{size: 1}")).await;
    assert!(
        !later.success && later.stderr.contains("pods named as shell later's still run (later-7d9f8c6b4-x2x4z)"),
        "alice's shell later: {}",
        later.stderr
    );
    e2e.run(&["delete", "pod", "later-7d9f8c6b4-x2x4z", "-n", &a.ns, "--wait=false"]).await;
}

/// Connection records forged by a pod that reaches the webhook's port: taken as true by a webhook
/// that answers anyone, refused once it is given the apiserver's client CA as the README says
/// (`--apiserver-client-ca-file`, the test cluster's apiserver presenting its client certificate
/// to webhooks). Nothing of the forgery reaches the record; the gate goes on working.
async fn forged_records_are_refused(a: &Access<'_>, pod: &str) {
    let e2e = a.e2e;
    import_probe_image(e2e);
    let probe = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: forger\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: probe\n    image: {}\n    command: [sleep, \"3600\"]\n",
        myownshell_envtest::node::images::PROBE_IMAGE
    );
    let made = a.apply_as("bob", &probe).await;
    assert!(made.success, "{}", made.stderr);
    e2e.wait_for(
        "bob's forger pod Running",
        &["get", "pod", "forger", "-n", &a.ns, "-o", "jsonpath={.status.phase}"],
        |p| p == "Running",
    )
    .await;
    let ip = e2e
        .run(&["get", "service", "myownshell-webhook-service", "-n", SYSTEM, "-o", "jsonpath={.spec.clusterIP}"])
        .await;
    let forge = |user: &str| {
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "f0f0f0f0-0000-0000-0000-000000000001",
                "kind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "exec", "name": pod, "namespace": a.ns, "operation": "CONNECT",
                "userInfo": {"username": user, "groups": ["system:authenticated"]},
                "object": {"kind": "PodExecOptions", "apiVersion": "v1", "command": ["sh"]}
            }
        });
        format!(
            "printf '%s' '{review}' | curl -sk -o /dev/null -w '%{{http_code}}' -H 'Content-Type: application/json' --data-binary @- https://{ip}:443/connect-v1-pod"
        )
    };
    let send = |user: &'static str| {
        let script = forge(user);
        async move {
            kubectl_as(&e2e.kubectl, "bob", AUTH, &["exec", "-n", &a.ns, "forger", "--", "sh", "-c", &script]).await
        }
    };
    let events = || async {
        e2e.run(&["get", "events", "-n", &a.ns, "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"]).await
    };
    // (Polled while the forger's first connection cannot reach the Service yet: no answer.)
    let before = eventually("the forgery answered", TIMEOUT, || async {
        let out = send("forged-before").await;
        if out.stdout.trim() == "000" { Err(format!("{out:?}")) } else { Ok(out) }
    })
    .await
    .unwrap();
    assert_eq!(before.stdout.trim(), "200", "a webhook that answers anyone takes the forgery: {before:?}");
    eventually("the forgery recorded as a connection", TIMEOUT, || async {
        let seen = events().await;
        if seen.contains("forged-before") { Ok(()) } else { Err(seen) }
    })
    .await
    .unwrap();

    // As the README says: the CA in a ConfigMap, mounted, and the flag.
    let ca = e2e.cluster.control_plane().webhook_client_ca_file();
    let from_file = format!("--from-file=ca.crt={}", ca.display());
    e2e.run(&["create", "configmap", "myownshell-apiserver-client-ca", "-n", SYSTEM, &from_file]).await;
    e2e.run(&["patch", "deployment", WEBHOOK, "-n", SYSTEM, "--type=strategic", "-p", APISERVER_CLIENT_CA_MOUNT]).await;
    e2e.run(&["patch", "deployment", WEBHOOK, "-n", SYSTEM, "--type=json", "-p", APISERVER_CLIENT_CA_FLAG]).await;
    e2e.rollout(WEBHOOK).await;
    // The old pod answers on while it drains (until the endpoints no longer list it, and a few
    // seconds more): wait until it is gone, so that what answers is the new one alone.
    e2e.wait_for(
        "one webhook pod, with the flag",
        &[
            "get",
            "pods",
            "-n",
            SYSTEM,
            "-l",
            "app.kubernetes.io/component=webhook",
            "-o",
            "jsonpath={range .items[*]}{.spec.containers[0].args}{\"\\n\"}{end}",
        ],
        |out| out.lines().count() == 1 && out.contains("--apiserver-client-ca-file"),
    )
    .await;
    // (kube-proxy may still send a first try to the old pod's address: no answer, tried again.)
    let after = eventually("the forgery answered", TIMEOUT, || async {
        let out = send("forged-after").await;
        if out.stdout.trim() == "000" { Err(format!("{out:?}")) } else { Ok(out) }
    })
    .await
    .unwrap();
    assert_eq!(after.stdout.trim(), "403", "only the apiserver is answered: {after:?}");
    // The gate itself still works (the apiserver presents its certificate) and records; the
    // refused forgery is in no record.
    a.exec_until("alice", AUTH, pod, None, &["true"]).await;
    // erin (an editor through the group devs, which the shell is not shared with yet) is new to
    // the record: once her refusal is in it, the forgery before her would be too.
    a.exec_until("erin", &["devs", "system:authenticated"], pod, Some(Refusal::Webhook), &["true"]).await;
    eventually("erin's refusal recorded after the forgery", TIMEOUT, || async {
        let seen = events().await;
        if seen.contains("erin was refused exec") { Ok(seen) } else { Err(seen) }
    })
    .await
    .map(|seen| assert!(!seen.contains("forged-after"), "{seen}"))
    .unwrap();
    e2e.run(&["delete", "pod", "forger", "-n", &a.ns, "--wait=false"]).await;
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

/// The webhook stopped: the gate fails closed (nobody gets into the shell, its owner included,
/// nor into an ordinary Deployment's pod of this namespace opened to shells, which only the
/// webhook could tell from a shell's), while the same Deployment in a namespace not opened to
/// shells is untouched (the real configuration's namespaceSelector); then the webhook comes back.
async fn with_the_webhook_stopped(a: &Access<'_>, pod: &str) {
    let e2e = a.e2e;
    let client = e2e.cluster.control_plane().client().unwrap();
    let plain_ns = myownshell_envtest::create_namespace(&client, "e2e-access-plain").await.unwrap();
    namespace_editors(&client, &plain_ns, &["bob"], &[]).await.unwrap();
    let other = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ordinary\nspec:\n  selector:\n    matchLabels: {app: ordinary}\n  template:\n    metadata:\n      labels: {app: ordinary}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: busybox:1.37.0\n        command: [sleep, \"3600\"]\n";
    e2e.apply(&a.ns, other).await.unwrap();
    e2e.apply(&plain_ns, other).await.unwrap();
    let running = |ns: String| async move { ordinary_running(e2e, &ns).await };
    let ordinary = running(a.ns.clone()).await;
    let plain = running(plain_ns.clone()).await;
    a.exec_until("bob", AUTH, &ordinary, None, &["true"]).await;
    let bob_in_plain = |want: Option<Refusal>| {
        let (plain, plain_ns) = (plain.clone(), plain_ns.clone());
        async move {
            // Polled: bob's RoleBinding reaches the apiserver's authorizer through an informer.
            eventually(&format!("bob's exec into {plain_ns}/{plain}"), TIMEOUT, || async {
                let out = kubectl_as(&e2e.kubectl, "bob", AUTH, &["exec", "-n", &plain_ns, &plain, "--", "true"]).await;
                if refusal(&out) == want && out.success {
                    Ok(())
                } else {
                    Err(format!("{:?}: {}", refusal(&out), out.stderr))
                }
            })
            .await
            .unwrap();
        }
    };
    bob_in_plain(None).await;

    e2e.run(&["scale", "deployment", WEBHOOK, "-n", SYSTEM, "--replicas=0"]).await;
    e2e.wait_for(
        "the webhook's pods gone",
        &["get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/component=webhook", "-o", "name"],
        |out| out.trim().is_empty(),
    )
    .await;
    for user in ["bob", "alice"] {
        let refused = a.exec_until(user, AUTH, pod, Some(Refusal::WebhookDown), &["id"]).await;
        assert!(refused.stderr.contains("connect-v1-pod"), "{}", refused.stderr);
    }
    a.exec_until("bob", AUTH, &ordinary, Some(Refusal::WebhookDown), &["true"]).await;
    bob_in_plain(None).await;

    e2e.run(&["scale", "deployment", WEBHOOK, "-n", SYSTEM, "--replicas=1"]).await;
    e2e.rollout(WEBHOOK).await;
    a.exec_until("bob", AUTH, pod, Some(Refusal::Webhook), &["id"]).await;
    a.exec_until("alice", AUTH, pod, None, &["true"]).await;
    e2e.run(&["delete", "namespace", &plain_ns, "--wait=false"]).await;
}

/// The name of the Running pod of Deployment `ordinary` in `ns`.
async fn ordinary_running(e2e: &E2e, ns: &str) -> String {
    eventually(&format!("the ordinary pod Running in {ns}"), TIMEOUT, || async {
        let out = e2e
            .run(&[
                "get",
                "pods",
                "-n",
                ns,
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
    .unwrap()
}
