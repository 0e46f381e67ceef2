//! `cargo xtask bench controller [--objects N] [--concurrency C]`
//!
//! On a private test cluster (real etcd, kube-apiserver, kube-controller-manager and
//! kube-scheduler, and kwok's fake nodes, so that every shell's pod exists and turns Ready), with
//! shells that have a lifetime (an idle timeout and a warning, never reached), in one run:
//! - warm-up: one object through every kind of write, so that no phase pays the apiserver's
//!   first-use costs (its first write of a custom resource takes about two seconds);
//! - floor: create N Deployments directly (the very objects the controller would build), C at a
//!   time, with one client, until every one reports its pod ready;
//! - same-writes floor: the requests the controller path makes for N objects, made by a plain
//!   client with no watch, cache or reconcile in between: the N `MyOwnShell` creates C at a time
//!   (as the benchmark makes them) and, as each is created, its finalizer patch, Deployment
//!   lookup (a GET that finds none), apply, status patch and Created event, C objects at a time
//!   (as the controller's `--concurrency C`), and a status patch each time a Deployment reports
//!   its pod (created, then ready), as the controller writes them. This is what the apiserver
//!   must do for the end state; the clock stops as the controller's does, when a watch has seen
//!   every status current and showing its pod ready; then its objects are deleted and its
//!   namespace waited gone (`clear.rs`), so that the controller's phase runs beside the same
//!   objects as this one did (the floor's);
//! - controller: start the real controller binary (release build, `--concurrency C`), create N
//!   `MyOwnShell`s C at a time with the same kind of client, and stop the clock when all N
//!   statuses report the current generation and their pod ready.
//!
//! Then, with the controller holding the N converged objects, each phase starting once the
//! namespace is quiet (no MyOwnShell, Deployment, Pod or Event changed for [`QUIET_FOR`]: the
//! cluster, not only the controller, done with the phase before):
//! - memory: RSS when ready with nothing, peak (VmHWM) and steady (VmRSS once idle for
//!   [`STEADY_AFTER`]), and both per object; once more after [`IDLE_CLOSED_AFTER`], the
//!   client pool's idle connections closed;
//! - churn floor: for each `--churn-rates` rate, the same updates made to the floor's
//!   Deployments directly, with no controller: the machine the cluster alone takes, and how long
//!   after the last update every Deployment has caught up (what the churn figures are read
//!   against: when the cluster alone cannot keep up, no controller's queue stays short);
//! - churn: for each `--churn-rates` rate, spec updates (`size` 1 <-> 2) to random objects at
//!   that rate for `--churn-seconds`; queue latency and reconcile duration p50/p99 from the
//!   controller's own `/metrics` histograms (the figures users watch in production) against
//!   the SLOs (queue p99 <= 1 s, reconcile p99 <= 5 s), and how long after the last update
//!   every status showed its generation again;
//! - controller restart: a new controller process over the converged objects, the time until
//!   it is ready (caches synced) and until it has reconciled every object, and the writes it
//!   made: counted by the apiserver (`apiserver_request_total`, write verbs on MyOwnShells,
//!   Deployments and Events) and by resourceVersion (every MyOwnShell, Deployment and Event
//!   compared before and after); both must be 0;
//! - apiserver restart: the same counts after kube-apiserver restarts under the controller,
//!   which relists and reconciles every object;
//! - operator upgrade: a controller whose pod template differs (`--pod-annotations`) over the
//!   converged objects: the Deployment writes the apiserver counts (must be 0: running shells
//!   wait for a quiet moment; their status, kube-controller-manager's, apart) and the status
//!   writes (one per shell, `UpToDate=False`);
//! - stops: `--stops M` shells given, `--stop-rate R` a second (20), a `maxRunTime` that ends
//!   20 s later; how late after its deadline each one's Deployment is seen gone (p50, p99, max);
//!   first its floor: as many of the floor's Deployments deleted by the benchmark itself at
//!   their deadlines, at the same rate (a timer, a write and a watch, no controller), then its
//!   same-writes floor: as many deadlines met by the benchmark with the controller's two writes,
//!   the delete and the stopped status (`stops_same_writes.rs`); the p99 against each; the writes
//!   per warning, per stop, per start and per update at a quiet moment; the controller's queue
//!   latency and reconcile duration over the stops;
//! - for churn and stops, the apiserver's own latency over the phase (p50, p99 of
//!   `apiserver_request_duration_seconds`, changes and deletions apart): the floor under the
//!   controller's latency figures;
//! - after each restart, the controller's peak RSS during it and its steady RSS.
//!
//! Prints the times, `ratio = controller/floor`, `ratio = controller/same-writes floor`, what
//! each kind of write costs alone, and the figures above. `--heap-profile PATH` runs each
//! controller process under heaptrack (read the profiles with `heaptrack_print PATH.first.zst`
//! and `PATH.restarted.zst`; the RSS figures are then heaptrack's, not the controller's, and
//! `cargo xtask bench` builds the controller with the C library's malloc, the one heaptrack sees).
//! `--homes` gives every shell a home, and the benchmark plays the volume provisioner
//! (`homes.rs`).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use myownshell_envtest::create_shell_namespace;
use myownshell_envtest::kwok::{KwokCluster, KwokOptions};

mod afresh;
mod apiserver_latency;
mod apiserver_metrics;
mod churn;
mod churn_floor;
mod clear;
mod counts;
mod cpu;
mod floors;
mod homes;
mod options;
mod pace;
mod phases;
mod process;
mod quiet;
mod stops;
mod stops_floor_again;
mod stops_same_writes;

pub(crate) use afresh::*;
pub(crate) use apiserver_latency::*;
pub(crate) use churn::*;
pub(crate) use churn_floor::*;
pub(crate) use counts::*;
pub(crate) use cpu::*;
pub(crate) use floors::*;
pub(crate) use options::*;
pub(crate) use phases::*;
pub(crate) use process::*;
pub(crate) use quiet::*;
pub(crate) use stops::*;

/// How long a phase may take to converge before the run fails. 20 minutes: with `--homes` at
/// 10,000 the same-writes floor takes about 700 s on 2 cores, most of it after its creates.
pub(crate) const DEADLINE: Duration = Duration::from_secs(1200);
/// How long the controller idles after converging before its steady RSS is read: longer than
/// any requeue, and long enough for the allocator to hand freed pages back (jemalloc purges a
/// freed page within 10 s, its `dirty_decay_ms`; sampled every 10 s after a relist of 10,000
/// objects, RSS fell at 10 s and 20 s and not after, over 90 s).
pub(crate) const STEADY_AFTER: Duration = Duration::from_secs(20);
/// How long after converging the RSS is read once more, the burst's idle connections closed: the
/// client's pool closes a connection idle for `POOL_IDLE_TIMEOUT` (its timer looks that often,
/// so up to twice that after the last request), then the allocator's 10 s.
pub(crate) const IDLE_CLOSED_AFTER: Duration =
    myownshell_runtime::client_pool::POOL_IDLE_TIMEOUT.saturating_mul(2).saturating_add(Duration::from_secs(15));
pub(crate) const QUEUE_LATENCY: &str = "myownshell_controller_reconcile_queue_latency_seconds";
pub(crate) const RECONCILE_DURATION: &str = "myownshell_controller_reconcile_duration_seconds";
/// Shells given a stop per second in the stops phase unless `--stop-rate` says otherwise: the
/// most stops a fleet of shells reaches on this cluster. Stops come no faster than the starts
/// they end (a `maxRunTime` counts from each shell's start, an `idleTimeout` from its last
/// connection or start), and this cluster starts shells at about 19 a second (10,000 converge
/// in 420 to 525 s). All 10,000 stopping within ten minutes is 17 a second. At 100 a second
/// (run 7, 2026-11-26) the bench's own floor met the deadlines with p99 400 ms, the controller,
/// at about 7 writes per stop, took the apiserver's write p99 to 3.2 s and met them with p99
/// 25 s: a burst of stops five times the start rate is past what this cluster can write. Since a
/// stop deletes the shell's Deployment (2026-11-29: 2 writes per stop, and 2 for its warning,
/// against 12 before), 500 stops at 100 a second are met with p99 344 ms (`--stops 500
/// --stop-rate 100`, 1000 objects), and since a stop's record waits for the deletes in flight
/// (2026-12-01), with p99 174 to 396 ms, 1.10x to 2.91x the delete-only stops floor (median 1.75x
/// over eight runs, six within 2x). That floor moves by itself within one run (0.72x to 1.28x
/// when run again after the controller's stops, `stops_floor_again`): against the two floors'
/// mean, three runs read 1.98x, 0.84x and 1.13x.
pub(crate) const STOP_RATE: u32 = 20;
/// Pods each fake node holds: room for every shell at size 2 (churn doubles some) on a few nodes.
const PODS_PER_NODE: u32 = 1000;

fn main() {
    let options = options();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        // Every object's pods exist: three phases of N shells at up to 2 pods each, on fake nodes.
        let nodes = (3 * 2 * options.objects).div_ceil(PODS_PER_NODE as usize).max(1);
        let kwok = KwokOptions::new(nodes, PODS_PER_NODE).unwrap_or_else(|e| panic!("kwok: {e}"));
        let cluster = KwokCluster::start(kwok).await.unwrap_or_else(|e| panic!("kwok cluster: {e}"));
        eprintln!("{}", cluster.summary());
        let cp = cluster.control_plane();
        let client = cp.client().unwrap();
        let _volumes = if options.homes { Some(homes::provide(&client).await) } else { None };
        warm_up(&client).await;
        let floor_ns = create_shell_namespace(&client, "bench-floor").await.unwrap();
        let same_ns = create_shell_namespace(&client, "bench-same-writes").await.unwrap();
        let ctrl_ns = create_shell_namespace(&client, "bench-controller").await.unwrap();
        let parts_ns = create_shell_namespace(&client, "bench-breakdown").await.unwrap();

        let n = options.objects;
        let with = if options.homes { ", each with a home" } else { "" };
        println!("controller bench: {n} objects{with}, concurrency {}", options.concurrency);
        if !options.floors {
            let controller = with_controller(&cluster, &ctrl_ns, &floor_ns, &options).await;
            let rate = n as f64 / controller.as_secs_f64();
            println!("  controller: {n} MyOwnShells -> Deployments + status   {controller:>10.2?}  ({rate:.0}/s)");
            println!("  (--no-floors: no floor ran, so no ratio)");
            return;
        }
        let floor = floor(client.clone(), &floor_ns, &options).await;
        println!("  (floor converged in {floor:.2?})");
        let same = same_writes_floor(client.clone(), &same_ns, &options).await;
        println!("  (same-writes floor converged in {same:.2?})");
        let cleared = clear::clear(&client, &same_ns, options.concurrency).await;
        println!("  (same-writes floor's objects deleted, its namespace gone, in {cleared:.2?})");
        let controller = with_controller(&cluster, &ctrl_ns, &floor_ns, &options).await;
        // The apiserver restarted: a fresh client.
        let client = cp.client().unwrap();
        let parts = breakdown(client, &parts_ns, &options).await;
        let per_sec = |d: Duration| n as f64 / d.as_secs_f64();
        println!("  floor: {n} Deployments created directly              {floor:>10.2?}  ({:.0}/s)", per_sec(floor));
        println!("  same-writes floor: the controller path's requests    {same:>10.2?}  ({:.0}/s)", per_sec(same));
        println!(
            "  controller: {n} MyOwnShells -> Deployments + status   {controller:>10.2?}  ({:.0}/s)",
            per_sec(controller)
        );
        println!("  ratio = controller/floor = {:.2}", controller.as_secs_f64() / floor.as_secs_f64());
        println!("  ratio = controller/same-writes floor = {:.2}", controller.as_secs_f64() / same.as_secs_f64());
        println!("  each kind of write alone ({n} objects, concurrency {}):", options.concurrency);
        let per_object = |d: Duration| d.as_secs_f64() * 1000.0 / n as f64;
        for (kind, took) in &parts {
            println!("    {:<42} {took:>10.2?}  ({:.2} ms/object)", kind.label(), per_object(*took));
        }
        let sum: Duration = parts.iter().map(|(_, t)| *t).sum();
        println!("    {:<42} {sum:>10.2?}  ({:.2} ms/object)", "all of them, one after another", per_object(sum));
    });
}
