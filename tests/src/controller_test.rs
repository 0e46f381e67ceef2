//! One controller test's world: its own namespace on the shared control plane, a controller
//! process limited to it (`--namespace`), and the waits those tests share.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use myownshell_api::MyOwnShell;
use serde_json::json;

use crate::controller_helpers::{ControllerProcess, ShellNamespace};
use myownshell_envtest::{ControlPlane, eventually};

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
        let result = eventually(what, TIMEOUT, || async {
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
