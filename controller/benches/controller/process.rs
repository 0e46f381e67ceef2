//! The controller binary under test: started, scraped as an authorized reader, its memory read
//! from /proc, and waited for until it settles.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kube::Client;
use myownshell_envtest::http::plain_get;
use myownshell_envtest::ports::free_port;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use myownshell_envtest::{ControlPlane, eventually};
use myownshell_tests::controller::metric_value;

use crate::*;

/// The controller binary under test, with its probe and metrics ports.
pub(crate) struct Controller {
    pub(crate) process: ManagedProcess,
    pub(crate) probe: SocketAddr,
    pub(crate) metrics: SocketAddr,
}

impl Controller {
    /// Start it (watching only `ns`) and wait until `/readyz` answers 200: both caches synced.
    /// Returns it and how long that took.
    pub(crate) async fn start(cp: &ControlPlane, ns: &str, options: &Options, name: &str) -> (Self, Duration) {
        Self::start_with(cp, ns, options, name, &[]).await
    }

    /// [`Controller::start`] with more flags.
    pub(crate) async fn start_with(
        cp: &ControlPlane,
        ns: &str,
        options: &Options,
        name: &str,
        flags: &[&str],
    ) -> (Self, Duration) {
        let probe_port = free_port().unwrap();
        let metrics_port = free_port().unwrap();
        let log = cp.layout().dir.join(format!("controller-bench-{name}.log"));
        let binary = env!("CARGO_BIN_EXE_myownshell-controller");
        let spec = match &options.heap_profile {
            // One profile per controller process (`PATH.first.zst`, `PATH.restarted.zst`): heaptrack
            // would overwrite one file with the next.
            Some(path) => ProcessSpec::new("controller", "heaptrack", &log)
                .arg("-o")
                .arg(format!("{}.{name}", path.display()))
                .arg(binary),
            None => ProcessSpec::new("controller", binary, &log),
        };
        let spec = spec
            .arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .arg(format!("--namespace={ns}"))
            .arg(format!("--concurrency={}", options.concurrency))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{probe_port}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .args(flags.iter().copied())
            // `MYOWNSHELL_BENCH_CONTROLLER_LOG` for more, e.g. which transition each status write
            // was (`myownshell_controller::reconcile=debug`, `write::status_changes`).
            .env("RUST_LOG", std::env::var("MYOWNSHELL_BENCH_CONTROLLER_LOG").unwrap_or_else(|_| "warn".to_owned()));
        let start = Instant::now();
        let process = ManagedProcess::spawn(spec).unwrap();
        let controller = Self {
            process,
            probe: SocketAddr::from(([127, 0, 0, 1], probe_port)),
            metrics: SocketAddr::from(([127, 0, 0, 1], metrics_port)),
        };
        eventually("the controller to be ready", Duration::from_secs(120), || async {
            match plain_get(controller.probe, "/readyz").await? {
                (200, _) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.process.log_tail(20)));
        (controller, start.elapsed())
    }

    /// A memory figure from /proc/PID/status (`VmRSS:` now, `VmHWM:` peak), in MiB.
    pub(crate) fn rss_mib(&self, field: &str) -> f64 {
        rss_mib(self.process.pid(), field)
    }

    /// Start the peak (VmHWM) over from the current RSS, so the next phase reports its own.
    pub(crate) fn reset_peak(&self) {
        let pid = self.process.pid();
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap_or_else(|e| panic!("resetting VmHWM: {e}"));
    }
}

/// The controller's peak RSS (VmHWM) now, and its RSS once idle for [`STEADY_AFTER`]
/// (allocators give freed memory back over seconds, not at once).
pub(crate) async fn peak_and_steady(controller: &Controller) -> (f64, f64) {
    let peak = controller.rss_mib("VmHWM:");
    tokio::time::sleep(STEADY_AFTER).await;
    (peak, controller.rss_mib("VmRSS:"))
}

/// A memory figure of a process from /proc/PID/status (`VmRSS:` now, `VmHWM:` peak), in MiB.
pub(crate) fn rss_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(f64::NAN);
    kb / 1024.0
}

/// Reads the controller's `/metrics` as an authorized scraper (one token for the whole run).
pub(crate) struct Scraper {
    pub(crate) token: String,
}

impl Scraper {
    pub(crate) async fn new(client: &Client) -> Self {
        Self { token: myownshell_tests::scrape::scraper_token(client).await.unwrap() }
    }

    pub(crate) async fn scrape(&self, controller: &Controller) -> String {
        let path = myownshell_runtime::paths::METRICS;
        match myownshell_tests::scrape::https_get(controller.metrics, path, Some(&self.token)).await {
            Ok((200, body)) => body,
            other => panic!("scraping the controller: {other:?}\n{}", controller.process.log_tail(20)),
        }
    }
}

/// The sum of every series of the counter family `name` (e.g. all `writes_total{kind}`).
pub(crate) fn family_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.split(' ').next() == Some(name))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// Wait until the controller has run at least `reconciles` reconciles since it started, none is
/// in flight and its reconcile count has not moved for two seconds. Returns how long it took.
pub(crate) async fn settled(scraper: &Scraper, controller: &Controller, reconciles: f64) -> Duration {
    let start = Instant::now();
    let mut last = (-1.0, Instant::now());
    loop {
        let text = scraper.scrape(controller).await;
        let done = family_sum(&text, "myownshell_controller_reconciles_total");
        let in_flight = metric_value(&text, "myownshell_controller_reconciles_in_flight").unwrap_or(0.0);
        if done != last.0 {
            last = (done, Instant::now());
        } else if done >= reconciles && in_flight == 0.0 && last.1.elapsed() >= Duration::from_secs(2) {
            return last.1.duration_since(start);
        }
        assert!(start.elapsed() < DEADLINE, "not settled: {done} of {reconciles} reconciles, {in_flight} in flight");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
