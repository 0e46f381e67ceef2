//! A rolling webhook drops no request: this release's webhook is restarted several times in a
//! row (`kubectl rollout restart`) with the machine's cores kept busy and a MyOwnShell applied
//! every 250 ms meanwhile; not one apply may be refused. The old pod answers until its address
//! has left the Service's endpoints, and a moment more (`webhook/src/drain.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::upgrade::keep_applying;
use super::{E2e, SYSTEM, WEBHOOK};

/// How many restarts in a row.
const ROUNDS: usize = 3;

/// Threads that spin until dropped: CPU load beside the cluster, as a busy CI machine has.
struct CpuLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuLoad {
    fn start() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        CpuLoad { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// `ROUNDS` restarts of the webhook under CPU load, applies all along: none refused.
pub async fn roll_under_load(e2e: &E2e) {
    let ns = e2e.namespace("e2e-rolling").await;
    let load = CpuLoad::start();
    let mut refused = Vec::new();
    for round in 1..=ROUNDS {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let prefix = format!("round{round}");
        let applying = keep_applying(e2e, &ns, &prefix, stop_rx);
        let rolling = async {
            let started = Instant::now();
            e2e.run(&["rollout", "restart", "-n", SYSTEM, &format!("deployment/{WEBHOOK}")]).await;
            e2e.rollout(WEBHOOK).await;
            // The old pod gone, not only the new one ready: its drain is what is tried.
            e2e.wait_for(
                "one webhook pod, not terminating",
                &[
                    "get",
                    "pods",
                    "-n",
                    SYSTEM,
                    "-l",
                    "app.kubernetes.io/component=webhook",
                    "-o",
                    "jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
                ],
                |pods| pods.lines().count() == 1 && pods.trim_end().split(' ').count() == 1,
            )
            .await;
            let took = started.elapsed();
            let _ = stop_tx.send(true);
            took
        };
        let ((applied, errors), took) = tokio::join!(applying, rolling);
        eprintln!(
            "e2e: webhook restart {round}/{ROUNDS} under CPU load in {took:.1?}: {applied} applied, {} refused",
            errors.len()
        );
        refused.extend(errors);
    }
    drop(load);
    assert!(refused.is_empty(), "applies refused while the webhook rolled: {refused:?}");
    e2e.run(&["delete", "namespace", &ns, "--wait=false"]).await;
}
