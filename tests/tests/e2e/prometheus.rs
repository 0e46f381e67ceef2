//! The prometheus phase: a real Prometheus (Debian's 2.42, a process on the host) scrapes the
//! installed operator the way the Prometheus Operator would from `config/prometheus`, and
//! evaluates its alerts on what it scrapes.
//!
//! Debian's Prometheus has no Kubernetes service discovery, so this phase plays the Prometheus
//! Operator's part: each ServiceMonitor of `config/prometheus` becomes a job named after the
//! Service it selects (prometheus-operator's `job` label), with the ServiceMonitor's scheme,
//! path, TLS server name and bearer token, and `file_sd` targets written from that Service's
//! EndpointSlices (pod IP and the named port; the host reaches the pods of every node). The
//! token is that of the ServiceAccount `config/prometheus`'s ClusterRoleBinding names. The rules
//! are the PrometheusRule's `.spec`, as kustomize renders it.
//!
//! Checked: both jobs are up and `myownshell_controller_reconciles_total` has values; a third job
//! whose token is not bound to `myownshell-metrics-reader` is down with a 403; every rule
//! evaluates without error and every dashboard query runs; and with the controller scaled to 0,
//! `MyOwnShellControllerDown` fires. The rules are the committed ones but for that alert's `for`,
//! shortened from 5 minutes to [`CONTROLLER_DOWN_FOR`] so the phase need not wait 5 minutes (its
//! expression, labels and runbook are unchanged; `tests/prometheus/rules-test.yaml` tests the 5
//! minutes). Then the controller comes back and the alert clears.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use myownshell_envtest::assets::{target_dir, workspace_root};
use myownshell_envtest::eventually;
use myownshell_envtest::http::plain_get;
use myownshell_envtest::kustomize::{of_kind, render};
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use serde_json::{Value, json};

use super::{CONTROLLER, E2e, SYSTEM, TIMEOUT, shell};

/// The directory holding Debian's `prometheus` (`cargo xtask e2e` sets it).
const PROMETHEUS_ENV: &str = "MYOWNSHELL_PROMETHEUS";
/// The job scraping the controller's targets with a token `myownshell-metrics-reader` is not
/// bound to.
const UNBOUND_JOB: &str = "unbound-reader";
const CONTROLLER_DOWN: &str = "MyOwnShellControllerDown";
/// The `for` of [`CONTROLLER_DOWN`] in this phase (committed: 5 minutes).
const CONTROLLER_DOWN_FOR: &str = "15s";
/// Scrapes and rule evaluations this often, so a phase takes seconds.
const INTERVAL: &str = "5s";

/// One scrape job, as prometheus-operator makes it from a ServiceMonitor endpoint and a Service
/// it selects.
struct Job {
    /// The Service's name: prometheus-operator's `job` label.
    service: String,
    /// The endpoint's port name, looked up in the EndpointSlices.
    port: String,
    /// The endpoint's `scheme`, `path` and TLS settings.
    endpoint: Value,
}

/// A Prometheus process; killed when dropped.
struct Prometheus {
    process: ManagedProcess,
    addr: SocketAddr,
}

impl Prometheus {
    /// `GET path` on its HTTP API: the `data` of a successful answer.
    async fn api(&self, path: &str) -> Result<Value, String> {
        let (status, body) = plain_get(self.addr, path).await?;
        let answer: Value = serde_json::from_str(&body).map_err(|e| format!("{path}: {status} {e}: {body}"))?;
        if status == 200 && answer["status"] == "success" {
            Ok(answer["data"].clone())
        } else {
            Err(format!("{path}: {status} {body}"))
        }
    }

    async fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(promql))).await?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    async fn targets(&self, job: &str) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/targets?state=active").await?;
        let all = data["activeTargets"].as_array().cloned().unwrap_or_default();
        Ok(all.into_iter().filter(|t| t["labels"]["job"] == job).collect())
    }

    /// The pending and firing alerts named `name`.
    async fn alerts(&self, name: &str) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/alerts").await?;
        let all = data["alerts"].as_array().cloned().unwrap_or_default();
        Ok(all.into_iter().filter(|a| a["labels"]["alertname"] == name).collect())
    }

    /// Debian's `prometheus` ([`PROMETHEUS_ENV`]) on `dir/prometheus.yml`, listening on a free
    /// loopback port; once it says it is ready.
    async fn start(dir: &Path) -> Self {
        let binary =
            std::env::var_os(PROMETHEUS_ENV).map(|d| PathBuf::from(d).join("prometheus")).unwrap_or_else(|| {
                panic!("{PROMETHEUS_ENV} is not set: `cargo xtask e2e` sets it to the directory of Debian's prometheus")
            });
        let port = free_port().unwrap();
        let spec = ProcessSpec::new("prometheus", binary, dir.join("prometheus.log"))
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
        let prometheus =
            Self { process: ManagedProcess::spawn(spec).unwrap(), addr: SocketAddr::from(([127, 0, 0, 1], port)) };
        poll(&prometheus, "Prometheus ready", || async {
            match plain_get(prometheus.addr, "/-/ready").await? {
                (200, _) => Ok(()),
                (status, body) => Err(format!("{status} {body}")),
            }
        })
        .await;
        prometheus
    }

    fn log_tail(&self) -> String {
        self.process.log_tail(20)
    }
}

/// Percent-encoding of a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn write(path: &Path, text: &str) {
    // Written aside and renamed: Prometheus watches the target files and must never read half
    // of one.
    let aside = path.with_extension("tmp");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

/// The jobs prometheus-operator would make of the ServiceMonitors of `config/prometheus`: one
/// per Service in the system namespace that a monitor's selector matches and that has the
/// endpoint's port.
async fn jobs(e2e: &E2e, objects: &[Value]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for monitor in of_kind(objects, "ServiceMonitor") {
        let endpoint = monitor["spec"]["endpoints"][0].clone();
        let port = endpoint["port"].as_str().unwrap().to_owned();
        let selector: Vec<String> = monitor["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
            .collect();
        let services = e2e.run(&["get", "services", "-n", SYSTEM, "-l", &selector.join(","), "-o", "json"]).await;
        let services: Value = serde_json::from_str(&services).unwrap();
        for service in services["items"].as_array().unwrap() {
            let ports = service["spec"]["ports"].as_array().unwrap();
            if ports.iter().any(|p| p["name"] == port.as_str()) {
                let name = service["metadata"]["name"].as_str().unwrap().to_owned();
                jobs.push(Job { service: name, port: port.clone(), endpoint: endpoint.clone() });
            }
        }
    }
    jobs
}

/// `file_sd` target groups for `job`: every endpoint of its Service's EndpointSlices, labelled
/// as prometheus-operator labels its targets.
async fn targets(e2e: &E2e, job: &Job) -> Value {
    let selector = format!("kubernetes.io/service-name={}", job.service);
    let slices = e2e.run(&["get", "endpointslices", "-n", SYSTEM, "-l", &selector, "-o", "json"]).await;
    let slices: Value = serde_json::from_str(&slices).unwrap();
    let mut groups = Vec::new();
    for slice in slices["items"].as_array().unwrap() {
        let ports = slice["ports"].as_array().cloned().unwrap_or_default();
        let Some(port) = ports.iter().find(|p| p["name"] == job.port.as_str()).and_then(|p| p["port"].as_u64()) else {
            continue;
        };
        for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
            let ip = endpoint["addresses"][0].as_str().unwrap();
            groups.push(json!({
                "targets": [format!("{ip}:{port}")],
                "labels": {
                    "namespace": SYSTEM,
                    "service": job.service,
                    "pod": endpoint["targetRef"]["name"],
                    "endpoint": job.port,
                },
            }));
        }
    }
    Value::Array(groups)
}

/// Rewrite every job's target file from the EndpointSlices, as service discovery would keep it.
async fn refresh_targets(e2e: &E2e, jobs: &[Job], dir: &Path) {
    for job in jobs {
        let groups = targets(e2e, job).await;
        write(&dir.join(format!("{}.json", job.service)), &groups.to_string());
    }
}

/// A scrape config for `job`, authenticating with the token in `token`. With `ca` (the
/// monitor's CA Secret exists) the certificate is verified as the ServiceMonitor says.
fn scrape_config(name: &str, job: &Job, token: &Path, ca: Option<&Path>, dir: &Path) -> Value {
    let endpoint = &job.endpoint;
    let mut tls = json!({"server_name": endpoint["tlsConfig"]["serverName"]});
    match ca {
        Some(ca) => tls["ca_file"] = json!(ca),
        // config/overlays/local has no metrics certificate: each binary serves a self-signed
        // one it makes at start (a new one per pod), which no CA vouches for. The cert-manager
        // overlay is the verified variant (tests/tests/deploy.rs checks the ServiceMonitors
        // name its CA Secret).
        None => tls["insecure_skip_verify"] = json!(true),
    }
    json!({
        "job_name": name,
        "scheme": endpoint["scheme"],
        "metrics_path": endpoint["path"],
        // prometheus-operator turns `bearerTokenFile` into this; the file is read at each scrape.
        "authorization": {"type": "Bearer", "credentials_file": token},
        "tls_config": tls,
        "file_sd_configs": [{"files": [dir.join(format!("{}.json", job.service))], "refresh_interval": INTERVAL}],
    })
}

/// The Secret's key, if the Secret exists (base64-decoded by kubectl's go-template).
async fn secret_key(e2e: &E2e, secret: &str, key: &str) -> Option<String> {
    let template = format!("{{{{index .data \"{key}\" | base64decode}}}}");
    let out = e2e.try_run(&["get", "secret", secret, "-n", SYSTEM, "-o", &format!("go-template={template}")]).await;
    out.ok().filter(|pem| pem.contains("BEGIN CERTIFICATE"))
}

/// Wait for `what`, polling `check` every second; panic with Prometheus's log on timeout.
async fn poll<T, F, Fut>(prometheus: &Prometheus, what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let result = eventually(what, TIMEOUT, || async {
        let seen = check().await;
        if seen.is_err() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        seen
    })
    .await;
    result.unwrap_or_else(|e| panic!("{e}\n--- prometheus log ---\n{}", prometheus.log_tail()))
}

pub async fn prometheus(e2e: &E2e) {
    let started = Instant::now();
    let dir = target_dir().join(format!("e2e-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let objects = render("prometheus").unwrap();
    let readers = Readers::create(e2e, &objects, &dir).await;
    let jobs = jobs(e2e, &objects).await;
    let mut names: Vec<&str> = jobs.iter().map(|j| j.service.as_str()).collect();
    names.sort();
    assert_eq!(names, ["myownshell-controller-metrics-service", "myownshell-webhook-metrics-service"]);
    refresh_targets(e2e, &jobs, &dir).await;
    let verified = write_config(e2e, &objects, &jobs, &readers, &dir).await;
    let prometheus = Prometheus::start(&dir).await;
    let tls = if verified { "verified TLS" } else { "TLS unverified" };
    eprintln!("e2e: prometheus: up at {} ({tls}) in {:.1?}", prometheus.addr, started.elapsed());

    let ns = e2e.namespace("e2e-prometheus").await;
    scrapes(e2e, &prometheus, &jobs, &ns).await;
    rules_and_dashboard(&prometheus, &objects).await;
    controller_down(e2e, &prometheus, &jobs, &dir).await;

    let Prometheus { mut process, .. } = prometheus;
    process.stop(Duration::from_secs(5)).unwrap();
    e2e.run(&["delete", "clusterrolebinding", &readers.binding]).await;
    for namespace in readers.namespace.iter().chain([&ns]) {
        e2e.run(&["delete", "namespace", namespace, "--wait=false"]).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Who scrapes: the ServiceAccount the committed ClusterRoleBinding of `config/prometheus`
/// names (that binding applied), and a stranger beside it; a token file for each.
struct Readers {
    binding: String,
    /// The ServiceAccounts' namespace, if this phase created it.
    namespace: Option<String>,
    token: PathBuf,
    stranger_token: PathBuf,
}

impl Readers {
    async fn create(e2e: &E2e, objects: &[Value], dir: &Path) -> Self {
        let binding = of_kind(objects, "ClusterRoleBinding")[0];
        let subject = &binding["subjects"][0];
        let (namespace, account) = (subject["namespace"].as_str().unwrap(), subject["name"].as_str().unwrap());
        // It may exist already (kube-prometheus's `monitoring`): then it stays afterwards.
        let created = e2e.try_run(&["create", "namespace", namespace]).await.is_ok();
        let out = e2e.kubectl.run_with_stdin(&["apply", "-f", "-"], Some(&binding.to_string())).await.unwrap();
        assert!(out.success, "applying {}: {}", binding["metadata"]["name"], out.stderr);
        let readers = Self {
            binding: binding["metadata"]["name"].as_str().unwrap().to_owned(),
            namespace: created.then(|| namespace.to_owned()),
            token: dir.join("token"),
            stranger_token: dir.join("stranger-token"),
        };
        for (account, file) in [(account, &readers.token), ("stranger", &readers.stranger_token)] {
            let _ = e2e.try_run(&["create", "serviceaccount", account, "-n", namespace]).await;
            write(file, e2e.run(&["create", "token", account, "-n", namespace, "--duration=1h"]).await.trim());
        }
        readers
    }
}

/// `prometheus.yml` and the rules: a job per ServiceMonitor'd Service, the unbound reader's job
/// on the controller's targets, and the PrometheusRule's `.spec`. Whether the certificates are
/// verified (the monitors' CA Secret exists).
async fn write_config(e2e: &E2e, objects: &[Value], jobs: &[Job], readers: &Readers, dir: &Path) -> bool {
    let mut scrape_configs = Vec::new();
    let mut verified = true;
    for job in jobs {
        let ca_ref = &job.endpoint["tlsConfig"]["ca"]["secret"];
        let ca = secret_key(e2e, ca_ref["name"].as_str().unwrap(), ca_ref["key"].as_str().unwrap()).await.map(|pem| {
            let file = dir.join(format!("{}-ca.crt", job.service));
            write(&file, &pem);
            file
        });
        verified &= ca.is_some();
        scrape_configs.push(scrape_config(&job.service, job, &readers.token, ca.as_deref(), dir));
        if job.service.contains("controller") {
            scrape_configs.push(scrape_config(UNBOUND_JOB, job, &readers.stranger_token, ca.as_deref(), dir));
        }
    }
    let rule = of_kind(objects, "PrometheusRule")[0];
    write(&dir.join("rules.json"), &with_short_controller_down(&rule["spec"]).to_string());
    let config = json!({
        "global": {"scrape_interval": INTERVAL, "scrape_timeout": "4s", "evaluation_interval": INTERVAL},
        "rule_files": [dir.join("rules.json")],
        "scrape_configs": scrape_configs,
    });
    // JSON is YAML to Prometheus.
    write(&dir.join("prometheus.yml"), &config.to_string());
    verified
}

/// The PrometheusRule's `spec` with [`CONTROLLER_DOWN`]'s `for` set to [`CONTROLLER_DOWN_FOR`].
fn with_short_controller_down(spec: &Value) -> Value {
    let mut spec = spec.clone();
    let mut found = false;
    for group in spec["groups"].as_array_mut().into_iter().flatten() {
        for rule in group["rules"].as_array_mut().into_iter().flatten() {
            if rule["alert"] == CONTROLLER_DOWN {
                rule["for"] = json!(CONTROLLER_DOWN_FOR);
                found = true;
            }
        }
    }
    assert!(found, "no {CONTROLLER_DOWN} in the PrometheusRule");
    spec
}

/// Both jobs up through TokenReview and SubjectAccessReview, the stranger refused with a 403;
/// the controller's reconciles counted (after one of a shell made in `ns`), one leader.
async fn scrapes(e2e: &E2e, prometheus: &Prometheus, jobs: &[Job], ns: &str) {
    let started = Instant::now();
    for job in jobs {
        let service = job.service.as_str();
        poll(prometheus, &format!("every target of {service} up"), || async {
            let targets = prometheus.targets(service).await?;
            let up = !targets.is_empty() && targets.iter().all(|t| t["health"] == "up");
            if up { Ok(()) } else { Err(format!("{targets:?}")) }
        })
        .await;
    }
    let error = poll(prometheus, "the unbound reader refused with 403", || async {
        let targets = prometheus.targets(UNBOUND_JOB).await?;
        let error = targets.first().and_then(|t| t["lastError"].as_str()).unwrap_or_default().to_owned();
        let refused = !targets.is_empty() && targets.iter().all(|t| t["health"] == "down") && error.contains("403");
        if refused { Ok(error) } else { Err(format!("{targets:?}")) }
    })
    .await;
    eprintln!("e2e: prometheus: both jobs up, the unbound reader down ({error}) in {:.1?}", started.elapsed());
    // A shell (paused: no pod) so that this controller pod has surely reconciled something.
    e2e.apply(ns, &shell("counted", 0)).await.unwrap();
    let reconciles = poll(prometheus, "myownshell_controller_reconciles_total with a value", || async {
        let result = prometheus.query("sum(myownshell_controller_reconciles_total)").await?;
        let total = result.first().and_then(|r| r["value"][1].as_str()).and_then(|v| v.parse::<f64>().ok());
        total.filter(|t| *t > 0.0).ok_or_else(|| format!("{result:?}"))
    })
    .await;
    let leaders = prometheus.query("sum(myownshell_controller_leader)").await.unwrap();
    assert_eq!(leaders[0]["value"][1], "1", "one leader: {leaders:?}");
    eprintln!("e2e: prometheus: {reconciles} reconciles counted, one leader");
}

/// Every rule evaluates on live data without error (a many-to-many match, say, fails only at
/// run time); every dashboard query runs.
async fn rules_and_dashboard(prometheus: &Prometheus, objects: &[Value]) {
    let groups = of_kind(objects, "PrometheusRule")[0]["spec"]["groups"].as_array().unwrap();
    let count: usize = groups.iter().map(|g| g["rules"].as_array().unwrap().len()).sum();
    poll(prometheus, "every rule evaluated without error", || async {
        let data = prometheus.api("/api/v1/rules").await?;
        let groups = data["groups"].as_array().cloned().unwrap_or_default();
        let rules: Vec<Value> =
            groups.iter().flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default()).collect();
        let bad: Vec<&Value> = rules.iter().filter(|r| r["health"] != "ok").collect();
        if rules.len() == count && bad.is_empty() {
            Ok(())
        } else {
            Err(format!("{} rules; not ok: {bad:?}", rules.len()))
        }
    })
    .await;
    let (mut answered, mut with_data) = (0, 0);
    for query in dashboard_queries() {
        let result = prometheus.query(&query).await.unwrap_or_else(|e| panic!("dashboard query {query}: {e}"));
        answered += 1;
        with_data += usize::from(!result.is_empty());
    }
    eprintln!("e2e: prometheus: {count} rules evaluate; {answered} dashboard queries run, {with_data} with data");
}

/// An alert for real: the controller scaled to 0 leaves no target to scrape and
/// MyOwnShellControllerDown fires; scaled back, the new pod is scraped and the alert
/// clears. Targets are refreshed from the EndpointSlices meanwhile, as service discovery would.
async fn controller_down(e2e: &E2e, prometheus: &Prometheus, jobs: &[Job], dir: &Path) {
    poll(prometheus, &format!("no {CONTROLLER_DOWN} while the controller is up"), || async {
        let alerts = prometheus.alerts(CONTROLLER_DOWN).await?;
        if alerts.is_empty() { Ok(()) } else { Err(format!("{alerts:?}")) }
    })
    .await;
    let scaled = Instant::now();
    e2e.run(&["scale", "deployment", CONTROLLER, "-n", SYSTEM, "--replicas=0"]).await;
    let alert = poll(prometheus, &format!("{CONTROLLER_DOWN} firing"), || async {
        refresh_targets(e2e, jobs, dir).await;
        let alerts = prometheus.alerts(CONTROLLER_DOWN).await?;
        match alerts.first() {
            Some(a) if a["state"] == "firing" => Ok(a.clone()),
            _ => Err(format!("{alerts:?}")),
        }
    })
    .await;
    assert_eq!(alert["labels"]["severity"], "critical", "{alert}");
    assert!(alert["annotations"]["runbook_url"].as_str().unwrap().ends_with("#myownshellcontrollerdown"), "{alert}");
    eprintln!("e2e: prometheus: {CONTROLLER_DOWN} {} {:.1?} after scaling to 0", alert["state"], scaled.elapsed());

    let restored = Instant::now();
    e2e.run(&["scale", "deployment", CONTROLLER, "-n", SYSTEM, "--replicas=1"]).await;
    e2e.rollout(CONTROLLER).await;
    let service = jobs.iter().find(|j| j.service.contains("controller")).unwrap().service.as_str();
    poll(prometheus, &format!("the new controller pod scraped and {CONTROLLER_DOWN} gone"), || async {
        refresh_targets(e2e, jobs, dir).await;
        let targets = prometheus.targets(service).await?;
        let alerts = prometheus.alerts(CONTROLLER_DOWN).await?;
        let up = !targets.is_empty() && targets.iter().all(|t| t["health"] == "up");
        if up && alerts.is_empty() { Ok(()) } else { Err(format!("targets {targets:?}, alerts {alerts:?}")) }
    })
    .await;
    eprintln!(
        "e2e: prometheus: controller back, {CONTROLLER_DOWN} cleared {:.1?} after scaling to 1",
        restored.elapsed()
    );
}

/// The dashboard's panel queries, its variables given values: `$namespace` the system
/// namespace, `$__rate_interval` a minute (four scrapes).
fn dashboard_queries() -> Vec<String> {
    let text = std::fs::read_to_string(workspace_root().join("config/grafana/myownshell.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let mut queries = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            queries.push(expr.replace("$__rate_interval", "1m").replace("$namespace", SYSTEM));
        }
    }
    queries
}
