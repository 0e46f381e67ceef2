//! Running the real `myownshell-controller` binary against a test control plane, and reading
//! its probes (plain HTTP) and its authenticated metrics (HTTPS, as a metrics-reader).

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use myownshell_api::{MyOwnShell, MyOwnShellSpec};

use myownshell_envtest::assets::workspace_binary;
use myownshell_envtest::control_plane::{ControlPlane, shared};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};

/// A fresh namespace on the shared control plane, with the clients a controller test uses.
pub struct ShellNamespace {
    /// The control plane every test in this test binary shares.
    pub cp: &'static ControlPlane,
    /// An admin client (`system:masters`: RBAC does not apply to it).
    pub client: kube::Client,
    /// The namespace's name, `<prefix>-<pid>-<n>`.
    pub ns: String,
    /// `MyOwnShell`s in the namespace, as the admin.
    pub shells: Api<MyOwnShell>,
    /// Deployments in the namespace (the controller's output), as the admin.
    pub deployments: Api<Deployment>,
}

impl ShellNamespace {
    /// A namespace named after `prefix` (plus a unique suffix).
    pub async fn create(prefix: &str) -> Result<Self, String> {
        let cp = shared();
        let client = cp.client().map_err(|e| format!("admin client: {e}"))?;
        let ns = myownshell_envtest::create_namespace(&client, prefix)
            .await
            .map_err(|e| format!("namespace {prefix}: {e}"))?;
        Ok(Self {
            cp,
            shells: Api::namespaced(client.clone(), &ns),
            deployments: Api::namespaced(client.clone(), &ns),
            client,
            ns,
        })
    }
}

/// A `MyOwnShell` asking for `size` shells, everything else defaulted.
pub fn sized_shell(name: &str, size: i32) -> MyOwnShell {
    MyOwnShell::new(name, MyOwnShellSpec { size: Some(size), ..MyOwnShellSpec::default() })
}

/// A controller process with its probe and metrics ports; killed when dropped.
pub struct ControllerProcess {
    /// The running binary: to signal or stop it, or to read its log.
    pub process: ManagedProcess,
    /// Port of its HTTPS `/metrics` on 127.0.0.1 (`--metrics-bind-address`); read it with
    /// [`ControllerProcess::metrics`].
    pub metrics_port: u16,
    /// Port of its plain-HTTP `/healthz` and `/readyz` on 127.0.0.1
    /// (`--health-probe-bind-address`); see [`ControllerProcess::probe`].
    pub probe_port: u16,
    /// Reads the metrics: the admin client sets up a scraper identity, whose token is kept.
    client: kube::Client,
    scraper_token: tokio::sync::OnceCell<String>,
}

impl std::fmt::Debug for ControllerProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerProcess")
            .field("process", &self.process)
            .field("metrics_port", &self.metrics_port)
            .field("probe_port", &self.probe_port)
            .finish_non_exhaustive()
    }
}

impl ControllerProcess {
    /// Start the controller binary with the control plane's admin kubeconfig, free loopback
    /// ports, and `extra` flags (e.g. `--namespace`, `--leader-elect`). `name` names the log
    /// file under the control plane's run directory.
    pub fn start(cp: &ControlPlane, name: &str, extra: &[&str]) -> Result<Self, String> {
        let binary = workspace_binary("myownshell-controller")?;
        let metrics_port = free_port().map_err(|e| format!("free port: {e}"))?;
        let probe_port = free_port().map_err(|e| format!("free port: {e}"))?;
        let log = cp.layout().dir.join(format!("controller-{name}.log"));
        let spec = ProcessSpec::new(format!("controller-{name}"), binary, log)
            .arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{probe_port}"))
            .args(extra.iter().copied())
            .env("RUST_LOG", "info,myownshell_controller=debug");
        let process = ManagedProcess::spawn(spec).map_err(|e| format!("starting the controller: {e}"))?;
        let client = cp.client().map_err(|e| format!("admin client: {e}"))?;
        Ok(Self { process, metrics_port, probe_port, client, scraper_token: tokio::sync::OnceCell::new() })
    }

    /// `GET path` on the probe port: (status code, body).
    pub async fn probe(&self, path: &str) -> Result<(u16, String), String> {
        myownshell_envtest::http::plain_get(std::net::SocketAddr::from(([127, 0, 0, 1], self.probe_port)), path).await
    }

    /// The `/metrics` text, read over TLS with a metrics-reader's token.
    pub async fn metrics(&self) -> Result<String, String> {
        let token = self.scraper_token.get_or_try_init(|| crate::scrape::scraper_token(&self.client)).await?;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.metrics_port));
        match crate::scrape::https_get(addr, myownshell_api::names::METRICS_PATH, Some(token)).await? {
            (200, body) => Ok(body),
            (code, body) => Err(format!("/metrics answered {code}: {body}")),
        }
    }

    /// One sample of `/metrics` (exact series, e.g. `myownshell_controller_leader`), 0 if absent.
    pub async fn metric(&self, series: &str) -> Result<f64, String> {
        Ok(metric_value(&self.metrics().await?, series).unwrap_or(0.0))
    }

    /// The last lines of the controller's log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// The value of one series in Prometheus text output.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_values() {
        let text =
            "# HELP x y\nmyownshell_controller_leader 1\nmyownshell_controller_writes_total{kind=\"status\"} 3\n";
        assert_eq!(metric_value(text, "myownshell_controller_leader"), Some(1.0));
        assert_eq!(metric_value(text, "myownshell_controller_writes_total{kind=\"status\"}"), Some(3.0));
        assert_eq!(metric_value(text, "myownshell_controller_writes_total{kind=\"deployment\"}"), None);
    }
}
