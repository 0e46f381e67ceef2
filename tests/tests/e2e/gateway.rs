//! The gateway deployed from `config/` (its own Deployment, Service, ServiceAccount and
//! impersonation role), reached as a user would without an Ingress: `kubectl port-forward` to
//! its Service; then the browser flow of `gateway_browser.rs` in Chromium.

use std::time::Duration;

use myownshell_envtest::eventually;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};

use super::{E2e, SYSTEM, gateway_browser};

/// `kubectl port-forward` to the gateway's Service on a port of its choosing; the process (killed
/// when dropped) and the local port.
async fn port_forward(e2e: &E2e) -> (ManagedProcess, u16) {
    let cp = e2e.cluster.control_plane();
    let log = cp.layout().dir.join("gateway-port-forward.log");
    let _ = std::fs::remove_file(&log);
    let spec = ProcessSpec::new("port-forward", myownshell_envtest::kubectl::kubectl_binary(), log.clone())
        .args(["port-forward", "-n", SYSTEM, "svc/myownshell-gateway", "--address=127.0.0.1", ":443"])
        .env("KUBECONFIG", cp.kubeconfig_path());
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
    let (_forward, port) = port_forward(e2e).await;
    let ns = e2e.namespace("e2e-gateway").await;
    gateway_browser::owner_stranger_and_reload(&e2e.kubectl, &ns, &format!("https://127.0.0.1:{port}")).await;
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}
