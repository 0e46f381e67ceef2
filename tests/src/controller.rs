//! The world of a controller test: the real `myownshell-controller` binary running against a
//! test control plane ([`ControllerProcess`], reading its probes over plain HTTP and its
//! authenticated metrics over HTTPS as a metrics-reader), a namespace of its own
//! ([`ShellNamespace`]), both together ([`ControllerTest`], a controller limited to that
//! namespace with `--namespace`), and the waits those tests share.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use myownshell_api::{MyOwnShell, MyOwnShellSpec};
use serde_json::json;

use myownshell_envtest::assets::workspace_binary;
use myownshell_envtest::control_plane::{ControlPlane, shared};
use myownshell_envtest::eventually;
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
    /// A namespace named after `prefix` (plus a unique suffix), opened to shells.
    pub async fn create(prefix: &str) -> Result<Self, String> {
        let cp = shared();
        let client = cp.client().map_err(|e| format!("admin client: {e}"))?;
        let ns = myownshell_envtest::create_shell_namespace(&client, prefix)
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

    /// Kill the process at once (SIGKILL), as a crash or a lost node would.
    pub fn kill(&mut self) -> Result<(), String> {
        self.process.kill().map(drop).map_err(|e| format!("killing the controller: {e}"))
    }

    /// `GET path` on the probe port: (status code, body).
    pub async fn probe(&self, path: &str) -> Result<(u16, String), String> {
        myownshell_envtest::http::plain_get(std::net::SocketAddr::from(([127, 0, 0, 1], self.probe_port)), path).await
    }

    /// The `/metrics` text, read over TLS with a metrics-reader's token.
    pub async fn metrics(&self) -> Result<String, String> {
        let token = self.scraper_token.get_or_try_init(|| crate::scrape::scraper_token(&self.client)).await?;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.metrics_port));
        match crate::scrape::https_get(addr, myownshell_runtime::paths::METRICS, Some(token)).await? {
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

/// The resourceVersion of every `MyOwnShell`, Deployment and Event in `ns`, keyed
/// `kind/name`: two readings that differ show a write (an update, a creation or a deletion),
/// whoever made it.
pub async fn resource_versions(
    client: &kube::Client,
    ns: &str,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    async fn of<K>(
        client: &kube::Client,
        ns: &str,
        kind: &str,
        into: &mut std::collections::BTreeMap<String, String>,
    ) -> Result<(), String>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        let list = api.list(&Default::default()).await.map_err(|e| format!("listing {kind}s: {e}"))?;
        for o in list.items {
            let meta = o.meta();
            let name = meta.name.clone().unwrap_or_default();
            into.insert(format!("{kind}/{name}"), meta.resource_version.clone().unwrap_or_default());
        }
        Ok(())
    }
    let mut all = std::collections::BTreeMap::new();
    of::<MyOwnShell>(client, ns, "myownshell", &mut all).await?;
    of::<Deployment>(client, ns, "deployment", &mut all).await?;
    of::<k8s_openapi::api::events::v1::Event>(client, ns, "event", &mut all).await?;
    Ok(all)
}

/// Objects written (updated, created or deleted) between two [`resource_versions`] readings.
pub fn written_between(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let changed = after.iter().filter(|(k, v)| before.get(*k) != Some(*v)).map(|(k, _)| k.clone());
    let gone = before.keys().filter(|k| !after.contains_key(*k)).cloned();
    changed.chain(gone).collect()
}

/// The value of one series in Prometheus text output.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

/// The cumulative buckets `(le, count)` of the histogram `name` (e.g.
/// `myownshell_controller_reconcile_duration_seconds`) in Prometheus text, in the order
/// given (ascending, `+Inf` last).
pub fn histogram_buckets(text: &str, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&prefix)?;
            let (le, value) = rest.split_once("\"}")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, value.trim().parse().ok()?))
        })
        .collect()
}

/// What was observed between two readings of the same histogram: `after - before`, bucket by
/// bucket (a `before` of another shape, e.g. from a restarted process, counts as empty).
pub fn histogram_delta(after: &[(f64, f64)], before: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let same_shape = before.len() == after.len() && before.iter().zip(after).all(|(b, a)| b.0 == a.0);
    after.iter().enumerate().map(|(i, &(le, n))| (le, if same_shape { n - before[i].1 } else { n })).collect()
}

/// The `q` quantile (0..=1) of cumulative buckets, as Prometheus's `histogram_quantile`:
/// linear within the bucket the rank falls in; the highest finite bound if it falls in `+Inf`.
/// `None` if nothing was observed.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let within = count - below;
            return Some(if within > 0.0 { lower + (le - lower) * (rank - below) / within } else { le });
        }
        (lower, below) = (le, count);
    }
    Some(lower)
}

/// How long a controller test waits for any one state.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A namespace, its clients and a controller watching only it.
pub struct ControllerTest {
    /// The control plane every test in this test binary shares.
    pub cp: &'static ControlPlane,
    /// An admin client (`system:masters`: RBAC does not apply to it).
    pub client: Client,
    /// The test's namespace, `<prefix>-<pid>-<n>`.
    pub ns: String,
    /// `MyOwnShell`s in the namespace, as the admin.
    pub shells: Api<MyOwnShell>,
    /// Deployments in the namespace (the controller's output), as the admin.
    pub deployments: Api<Deployment>,
    /// The controller, started with `--namespace` set to `ns`: it sees only this test's
    /// objects. Its log is named after the prefix.
    pub controller: ControllerProcess,
}

impl ControllerTest {
    /// A fresh namespace named after `prefix` and a controller for it.
    pub async fn start(prefix: &str) -> Self {
        let ShellNamespace { cp, client, ns, shells, deployments } =
            ShellNamespace::create(prefix).await.unwrap_or_else(|e| panic!("{e}"));
        let controller = ControllerProcess::start(cp, prefix, &["--namespace", &ns]).unwrap_or_else(|e| panic!("{e}"));
        Self { cp, client, ns, shells, deployments, controller }
    }

    /// Wait until the Deployment `name` satisfies `check` (which explains what it saw).
    pub async fn deployment_where(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Deployment) -> Result<(), String>,
    ) -> Deployment {
        let result = eventually(what, TIMEOUT, || async {
            let d = self.deployments.get_opt(name).await.map_err(|e| e.to_string())?;
            let d = d.ok_or_else(|| "no Deployment".to_owned())?;
            check(&d).map(|()| d)
        })
        .await;
        result.unwrap_or_else(|e| panic!("{e}\n--- controller log ---\n{}", self.controller.log_tail(30)))
    }

    /// Wait until the `MyOwnShell` `name` satisfies `check`.
    pub async fn shell_where(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&MyOwnShell) -> Result<(), String>,
    ) -> MyOwnShell {
        self.shell_where_within(name, what, TIMEOUT, check).await
    }

    /// Wait at most `within` until the `MyOwnShell` `name` satisfies `check`.
    pub async fn shell_where_within(
        &self,
        name: &str,
        what: &str,
        within: Duration,
        check: impl Fn(&MyOwnShell) -> Result<(), String>,
    ) -> MyOwnShell {
        let result = eventually(what, within, || async {
            let s = self.shells.get(name).await.map_err(|e| e.to_string())?;
            check(&s).map(|()| s)
        })
        .await;
        result.unwrap_or_else(|e| panic!("{e}\n--- controller log ---\n{}", self.controller.log_tail(30)))
    }

    /// Wait until the Deployment `name` asks for `want` replicas.
    pub async fn replicas_become(&self, name: &str, want: i32) -> Deployment {
        self.deployment_where(name, &format!("Deployment {name} replicas = {want}"), |d| {
            let got = d.spec.as_ref().and_then(|s| s.replicas);
            if got == Some(want) { Ok(()) } else { Err(format!("replicas {got:?}")) }
        })
        .await
    }

    /// Wait until the shell `name` has no Deployment (a stopped shell has none).
    pub async fn deployment_gone(&self, name: &str) {
        eventually(&format!("Deployment {name} gone"), TIMEOUT, || async {
            match self.deployments.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(d)) => Err(format!("still there: replicas {:?}", d.spec.and_then(|s| s.replicas))),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.controller.log_tail(30)));
    }

    /// Event reasons recorded about the `MyOwnShell` `name`.
    pub async fn event_reasons(&self, name: &str) -> Vec<String> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let list = events.list(&ListParams::default()).await.unwrap_or_else(|e| panic!("listing events: {e}"));
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter_map(|e| e.reason)
            .collect()
    }

    /// Wait for an event with `reason` about `name`.
    pub async fn event_with_reason(&self, name: &str, reason: &str) {
        eventually(&format!("a {reason} event for {name}"), TIMEOUT, || async {
            let reasons = self.event_reasons(name).await;
            if reasons.iter().any(|r| r == reason) { Ok(()) } else { Err(format!("{reasons:?}")) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The sum of the controller's `writes_total` counters, once nothing is in flight and the
    /// sum has not moved for a second.
    pub async fn settled_writes(&self) -> f64 {
        self.settled("the write counters", || self.writes()).await
    }

    /// The value of one metrics series (e.g. one kind of write), once nothing is in flight and
    /// it has not moved for a second.
    pub async fn settled_metric(&self, series: &str) -> f64 {
        self.settled(series, || self.controller.metric(series)).await
    }

    async fn settled<F, Fut>(&self, what: &str, read: F) -> f64
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<f64, String>>,
    {
        // Steady for a while, not just between two polls: a write that follows a short requeue
        // (a retry, a cleanup recheck) must not slip past.
        const STEADY: Duration = Duration::from_secs(1);
        let seen = std::cell::Cell::new((-1.0, std::time::Instant::now()));
        let result = eventually(&format!("{what} to settle"), TIMEOUT, || async {
            let now = read().await?;
            let in_flight = self.controller.metric("myownshell_controller_reconciles_in_flight").await?;
            let (before, since) = seen.get();
            if now != before {
                seen.set((now, std::time::Instant::now()));
                return Err(format!("{before} -> {now}"));
            }
            if in_flight == 0.0 && since.elapsed() >= STEADY {
                Ok(now)
            } else {
                Err(format!("{now} for {:?}, in flight {in_flight}", since.elapsed()))
            }
        })
        .await;
        result.unwrap_or_else(|e| panic!("{e}\n--- controller log ---\n{}", self.controller.log_tail(30)))
    }

    /// The sum of the controller's `writes_total` counters now.
    pub async fn writes(&self) -> Result<f64, String> {
        let text = self.controller.metrics().await?;
        Ok(text
            .lines()
            .filter(|l| l.starts_with("myownshell_controller_writes_total{"))
            .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
            .sum())
    }
}

/// The (status, reason) of the condition `type_`, if present.
pub fn condition(shell: &MyOwnShell, type_: &str) -> Option<(String, String)> {
    let status = shell.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

/// A (status, reason) pair to compare with [`condition`].
pub fn cond(status: &str, reason: &str) -> Option<(String, String)> {
    Some((status.to_owned(), reason.to_owned()))
}

/// The test control plane runs no Deployment controller, so a test plays its part: it writes
/// the Deployment's status as kube-controller-manager would.
pub async fn report_ready(deployments: &Api<Deployment>, name: &str, ready: i32) {
    let d = deployments.get(name).await.unwrap_or_else(|e| panic!("reading Deployment {name}: {e}"));
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = json!({"status": {
        "observedGeneration": d.metadata.generation,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": ready,
    }});
    deployments
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap_or_else(|e| panic!("writing Deployment {name} status: {e}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_as_prometheus_computes_them() {
        let text = "# TYPE h histogram\nh_sum 3.5\nh_count 100\nh_bucket{le=\"0.1\"} 50\nh_bucket{le=\"1.0\"} 90\nh_bucket{le=\"5.0\"} 100\nh_bucket{le=\"+Inf\"} 100\n";
        let buckets = histogram_buckets(text, "h");
        assert_eq!(buckets, vec![(0.1, 50.0), (1.0, 90.0), (5.0, 100.0), (f64::INFINITY, 100.0)]);
        assert_eq!(histogram_quantile(0.5, &buckets), Some(0.1), "the rank at a bucket's edge");
        assert_eq!(histogram_quantile(0.25, &buckets), Some(0.05), "linear within the first bucket, from 0");
        let p99 = histogram_quantile(0.99, &buckets).unwrap();
        assert!((p99 - 4.6).abs() < 1e-9, "{p99}");
        assert_eq!(histogram_quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 4.0)]), Some(1.0), "in +Inf: the last bound");
        assert_eq!(histogram_quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 0.0)]), None, "nothing observed");

        let before = vec![(0.1, 40.0), (1.0, 40.0), (5.0, 40.0), (f64::INFINITY, 40.0)];
        let delta = histogram_delta(&buckets, &before);
        assert_eq!(delta, vec![(0.1, 10.0), (1.0, 50.0), (5.0, 60.0), (f64::INFINITY, 60.0)]);
        assert_eq!(histogram_delta(&buckets, &[]), buckets, "no earlier reading: everything is new");
    }

    #[test]
    fn writes_between_two_readings() {
        let reading = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let before = reading(&[("myownshell/a", "1"), ("deployment/a", "2"), ("event/x", "3")]);
        assert!(written_between(&before, &before).is_empty());
        let after = reading(&[("myownshell/a", "4"), ("deployment/a", "2"), ("event/y", "5")]);
        assert_eq!(written_between(&before, &after), ["event/y", "myownshell/a", "event/x"]);
    }

    #[test]
    fn metric_values() {
        let text =
            "# HELP x y\nmyownshell_controller_leader 1\nmyownshell_controller_writes_total{kind=\"status\"} 3\n";
        assert_eq!(metric_value(text, "myownshell_controller_leader"), Some(1.0));
        assert_eq!(metric_value(text, "myownshell_controller_writes_total{kind=\"status\"}"), Some(3.0));
        assert_eq!(metric_value(text, "myownshell_controller_writes_total{kind=\"deployment\"}"), None);
    }
}
