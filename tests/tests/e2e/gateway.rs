//! The gateway deployed from `config/` (its own Deployment, Service, ServiceAccount and
//! impersonation role), reached as a user would without an Ingress: `kubectl port-forward` to
//! its Service; then the browser flow of `gateway_browser.rs` in Chromium; then the gateway
//! given a serving certificate, as production would, and `kubectl myownshell connect` through it.

use std::time::Duration;

use myownshell_certs::pki::{CertificateAuthority, LeafSpec};
use myownshell_envtest::eventually;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};

use super::{E2e, SYSTEM, gateway_browser};

/// `kubectl port-forward` to the gateway's Service on a port of its choosing; the process (killed
/// when dropped) and the local port.
pub(super) async fn port_forward(e2e: &E2e) -> (ManagedProcess, u16) {
    let cp = e2e.cluster.control_plane();
    let log = cp.layout().dir.join("gateway-port-forward.log");
    let _ = std::fs::remove_file(&log);
    let spec = ProcessSpec::new("port-forward", myownshell_envtest::kubectl::kubectl_binary(), log.clone()).args([
        "port-forward",
        "-n",
        SYSTEM,
        "svc/myownshell-gateway",
        "--address=127.0.0.1",
        ":443",
    ]);
    let spec = e2e.kubectl.env().into_iter().fold(spec, |spec, (key, value)| spec.env(key, value));
    let process = ManagedProcess::spawn(spec).unwrap();
    let port = eventually("kubectl port-forward to the gateway", Duration::from_secs(30), || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("Forwarding from 127.0.0.1:")?.split_whitespace().next()?.parse::<u16>().ok())
            .ok_or(text)
    })
    .await
    .unwrap();
    (process, port)
}

/// The phase.
pub async fn in_a_browser(e2e: &E2e) {
    let (forward, port) = port_forward(e2e).await;
    let ns = e2e.namespace("e2e-gateway").await;
    gateway_browser::owner_stranger_and_reload(&e2e.kubectl, &ns, &format!("https://127.0.0.1:{port}")).await;
    // That pod is replaced next, and its forward with it.
    drop(forward);
    plugin_through_the_gateway(e2e, &ns).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}

/// Where the CA of the gateway's serving certificate is kept (PEM), for the phases after this one
/// that verify the gateway (oauth2-proxy in front of it).
pub(super) fn serving_ca_file(e2e: &E2e) -> std::path::PathBuf {
    e2e.cluster.control_plane().layout().dir.join("gateway-serving-ca.crt")
}

/// The gateway serves a certificate of a CA the user has (a Secret mounted into its pod, as
/// production does); `kubectl myownshell connect` goes through it as alice into her shell `web`
/// and exits with the code her shell exits with.
async fn plugin_through_the_gateway(e2e: &E2e, ns: &str) {
    const DAY: Duration = Duration::from_secs(86_400);
    let ca = CertificateAuthority::generate("e2e-gateway-ca", DAY).unwrap();
    let leaf = ca.issue(&LeafSpec::server("myownshell-gateway", vec!["localhost".into()], vec![], DAY)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(path("tls.crt"), &leaf.cert_pem).unwrap();
    std::fs::write(path("tls.key"), &leaf.key_pem).unwrap();
    std::fs::write(path("ca.crt"), ca.cert_pem()).unwrap();
    std::fs::write(serving_ca_file(e2e), ca.cert_pem()).unwrap();
    let (cert, key) = (format!("--cert={}", path("tls.crt")), format!("--key={}", path("tls.key")));
    e2e.run(&["create", "secret", "tls", "gateway-serving", "-n", SYSTEM, &cert, &key]).await;
    let patch = r#"[
      {"op": "add", "path": "/spec/template/spec/volumes/-", "value": {"name": "serving", "secret": {"secretName": "gateway-serving"}}},
      {"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-", "value": {"name": "serving", "mountPath": "/etc/myownshell-gateway/tls", "readOnly": true}},
      {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--tls-cert-file=/etc/myownshell-gateway/tls/tls.crt"},
      {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--tls-private-key-file=/etc/myownshell-gateway/tls/tls.key"}
    ]"#;
    e2e.run(&["patch", "deployment", "myownshell-gateway", "-n", SYSTEM, "--type=json", "-p", patch]).await;
    e2e.run(&["rollout", "status", "deployment/myownshell-gateway", "-n", SYSTEM, "--timeout=180s"]).await;
    let (_forward, port) = port_forward(e2e).await;

    let token = e2e.run(&["create", "token", "alice", "-n", ns]).await.trim().to_owned();
    let url = format!("https://localhost:{port}");
    let ca_file = path("ca.crt");
    let args = ["connect", "web", "--gateway", &url, "--gateway-certificate-authority", &ca_file, "--token", &token];
    let kubeconfig = e2e.cluster.control_plane().kubeconfig_path();
    // The exit code is 7 only if `id -u` ran in the pod as the shell's user (65534). Piped input
    // can reach busybox's interactive sh before it reads its first line (the first line was seen
    // lost), so the command comes twice: whichever runs first ends the shell with its code.
    let exit = "exit $(($(id -u) - 65527))\n";
    let out = myownshell_tests::plugin::run_with_stdin(&kubeconfig, ns, &args, &exit.repeat(2)).unwrap();
    assert_eq!(out.code, 7, "the remote shell's exit code\nstdout: {}\nstderr: {}", out.stdout, out.stderr);
    assert!(!out.stderr.contains(&token), "the token is never printed");

    // The same with nothing pasted: a kubeconfig whose user's token comes from an exec
    // credential plugin, as an OIDC kubeconfig's does (kubelogin's `oidc-login get-token`).
    let exec_kubeconfig = std::path::PathBuf::from(path("exec.kubeconfig"));
    let mut config = e2e.cluster.control_plane().kubeconfig_for_token(&token);
    let credential = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}"}}}}"#
    );
    for named in &mut config.auth_infos {
        named.auth_info = Some(kube::config::AuthInfo {
            exec: Some(kube::config::ExecConfig {
                api_version: Some("client.authentication.k8s.io/v1".into()),
                command: Some("sh".into()),
                args: Some(vec!["-c".into(), format!("printf '%s' '{credential}'")]),
                interactive_mode: Some(kube::config::ExecInteractiveMode::Never),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    myownshell_envtest::control_plane::write_kubeconfig(&exec_kubeconfig, &config).unwrap();
    let args = ["connect", "web", "--gateway", &url, "--gateway-certificate-authority", &ca_file];
    let out = myownshell_tests::plugin::run_with_stdin(&exec_kubeconfig, ns, &args, &exit.repeat(2)).unwrap();
    assert_eq!(out.code, 7, "through an exec credential plugin\nstdout: {}\nstderr: {}", out.stdout, out.stderr);
}
