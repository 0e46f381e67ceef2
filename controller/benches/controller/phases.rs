//! The controller phases, in order: converge, memory, churn, restarts, an operator upgrade, stops.

use std::time::{Duration, Instant};

use kube::api::Api;
use myownshell_api::MyOwnShell;
use myownshell_envtest::kwok::KwokCluster;
use myownshell_tests::controller::resource_versions;

use crate::*;

/// The controller phases (see the crate docs). Returns the time to converge.
/// `floor_ns` holds the floor's Deployments, for the churn floor.
pub(crate) async fn with_controller(cluster: &KwokCluster, ns: &str, floor_ns: &str, options: &Options) -> Duration {
    let cp = cluster.control_plane();
    let n = options.objects;
    let client = cp.client().unwrap();
    let scraper = Scraper::new(&client).await;
    let (mut controller, _) = Controller::start(cp, ns, options, "first").await;
    let idle = controller.rss_mib("VmRSS:");
    let shells: Api<MyOwnShell> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let cpu = CpuMeter::start(cluster, controller.process.pid());
    let done = tokio::spawn(converged(cp.client().unwrap(), ns.to_owned(), n, Goal::ShellsReady));
    create_all(&shells, n, options.concurrency, shell).await;
    tokio::time::timeout(DEADLINE, done)
        .await
        .unwrap_or_else(|_| panic!("not converged after {DEADLINE:?}\n{}", controller.process.log_tail(20)))
        .unwrap();
    let took = start.elapsed();
    println!("  converging ({took:.2?}): {}", cpu.line(cluster, controller.process.pid()));
    // Watched only from here: four more watches would load the apiserver while converging.
    let quiet = Quiet::watch(&client, &[ns, floor_ns]);
    let peak = controller.rss_mib("VmHWM:");
    let text = scraper.scrape(&controller).await;
    println!("  after converging (the controller's own counters):");
    for line in text.lines().filter(|l| {
        l.starts_with("myownshell_controller_writes_total") || l.starts_with("myownshell_controller_reconciles_total")
    }) {
        println!("    {line}");
    }
    settled(&scraper, &controller, 0.0).await;
    tokio::time::sleep(STEADY_AFTER).await;
    let steady = controller.rss_mib("VmRSS:");
    let per_object = |mib: f64| (mib - idle) * 1024.0 / n as f64;
    println!(
        "  controller RSS: ready and empty {idle:.1} MiB; peak (VmHWM) {peak:.1} MiB = {:.1} KiB/object; steady (VmRSS {STEADY_AFTER:?} after converging) {steady:.1} MiB = {:.1} KiB/object",
        per_object(peak),
        per_object(steady)
    );
    tokio::time::sleep(IDLE_CLOSED_AFTER.saturating_sub(STEADY_AFTER)).await;
    let closed = controller.rss_mib("VmRSS:");
    println!(
        "    and {IDLE_CLOSED_AFTER:?} after converging, the burst's idle connections closed: {closed:.1} MiB = {:.1} KiB/object",
        per_object(closed)
    );

    if options.churn_seconds > 0 {
        let (mut sizes, mut floor_replicas) = (vec![1; n], vec![1; n]);
        for &rate in &options.churn_rates {
            let phase = (rate, options.churn_seconds);
            churn_floor(cluster, &client, floor_ns, &mut floor_replicas, phase, controller.process.pid()).await;
            quiet.settle(&format!("churn {rate}/s")).await;
            let cpu = CpuMeter::start(cluster, controller.process.pid());
            let latency = ApiserverLatency::start(&client).await;
            churn(&client, ns, &mut sizes, rate, options.churn_seconds, &scraper, &controller).await;
            println!("    {}", latency.line(&client).await);
            println!("    {}", cpu.line(cluster, controller.process.pid()));
        }
    }

    // Restart the controller over converged objects: it must write nothing.
    settled(&scraper, &controller, 0.0).await;
    quiet.settle("the controller restart").await;
    let before = resource_versions(&client, ns).await.unwrap();
    let requests_before = apiserver_writes(&client).await;
    assert!(controller.process.is_running(), "the controller died:\n{}", controller.process.log_tail(20));
    controller.process.stop(Duration::from_secs(10)).unwrap();
    let (restarted, ready) = Controller::start(cp, ns, options, "restarted").await;
    controller = restarted;
    let reconciled = ready + settled(&scraper, &controller, n as f64).await;
    let requests = apiserver_writes(&client).await - requests_before;
    let rewritten = changed(&client, ns, &before).await;
    let (peak, steady) = peak_and_steady(&controller).await;
    println!(
        "  controller restart: ready (caches synced) in {ready:.2?}, every object reconciled in {reconciled:.2?}; writes: {requests:.0} requests at the apiserver, {rewritten} objects changed (must be 0, 0); RSS peak {peak:.1} MiB, steady {steady:.1} MiB",
    );

    // Restart kube-apiserver under the controller: the relist must write nothing either.
    quiet.settle("the apiserver restart").await;
    let reconciles_before = family_sum(&scraper.scrape(&controller).await, "myownshell_controller_reconciles_total");
    let before = resource_versions(&client, ns).await.unwrap();
    controller.reset_peak();
    cp.stop_apiserver().unwrap();
    let down = Instant::now();
    cp.start_apiserver().await.unwrap();
    let back = down.elapsed();
    // Clients hold connections to the old process.
    let client = cp.client().unwrap();
    let resynced = settled(&scraper, &controller, reconciles_before + n as f64).await;
    let requests = apiserver_writes(&client).await;
    let rewritten = changed(&client, ns, &before).await;
    let (peak, steady) = peak_and_steady(&controller).await;
    println!(
        "  apiserver restart: apiserver back in {back:.2?}, every object relisted and reconciled {resynced:.2?} after; writes: {requests:.0} requests at the apiserver, {rewritten} objects changed (must be 0, 0); controller RSS peak {peak:.1} MiB, steady {steady:.1} MiB",
    );
    // An operator upgrade that changes the pod template: no running shell is restarted, so no
    // Deployment is written; each shell's status says it is not up to date.
    settled(&scraper, &controller, 0.0).await;
    quiet.settle("the operator upgrade").await;
    let writes_before = apiserver_writes_by_resource(&client).await;
    controller.process.stop(Duration::from_secs(10)).unwrap();
    let flags = ["--pod-annotations=bench.myownshell.io/release=2"];
    let (upgraded, ready) = Controller::start_with(cp, ns, options, "upgraded", &flags).await;
    controller = upgraded;
    let reconciled = ready + settled(&scraper, &controller, n as f64).await;
    let after = apiserver_writes_by_resource(&client).await;
    let delta = |key: &str| after.get(key).copied().unwrap_or(0.0) - writes_before.get(key).copied().unwrap_or(0.0);
    let deployments = delta("deployments") + delta("deployments/scale");
    println!(
        "  operator upgrade (a new pod template): every object reconciled in {reconciled:.2?}; writes at the apiserver: Deployments {deployments:.0} (must be 0; their status, kube-controller-manager's: {:.0}), MyOwnShell status {:.0} (one each: UpToDate=False), MyOwnShells {:.0}, Events {:.0}",
        delta("deployments/status"),
        delta("myownshells/status"),
        delta("myownshells"),
        delta("events"),
    );

    if options.stops > 0 {
        let cpu = CpuMeter::start(cluster, controller.process.pid());
        let latency = ApiserverLatency::start(&client).await;
        let writes = WritesPer::start(&client).await;
        let floor_late = stops_floor(&client, floor_ns, options.stops.min(n), options.stop_rate).await;
        println!("    {}", latency.line(&client).await);
        println!("    {}", cpu.line(cluster, controller.process.pid()));
        floor_caught_up(&client, floor_ns).await;
        quiet.settle("the stops").await;
        // What deleting a Deployment with a pod costs the apiserver with no controller at all: the
        // benchmark's delete, and what kube-controller-manager, the garbage collector and the
        // node write about it. A stop through the controller adds to it.
        let floor_stops = options.stops.min(n);
        println!("    floor {}", writes.line(&client, "stop", floor_stops, 0).await);
        println!("      {}", writes.pods_line(&client, floor_stops).await);
        println!("      {}", writes.events_line(&client).await);
        let writes = WritesPer::start(&client).await;
        starts_floor(&client, floor_ns, floor_stops, options.stop_rate).await;
        floor_caught_up(&client, floor_ns).await;
        quiet.settle("the floor's starts' writes").await;
        println!("    floor {}", writes.line(&client, "start", floor_stops, 0).await);
        println!("      {}", writes.pods_line(&client, floor_stops).await);
        // The same deadlines met with the controller's two writes, a delete and a status.
        let floor_shells = crate::stops_same_writes::prepare(&client, floor_ns, floor_stops).await;
        quiet.settle("the same-writes stops floor's shells").await;
        let latency = ApiserverLatency::start(&client).await;
        let writes = WritesPer::start(&client).await;
        let same_late =
            crate::stops_same_writes::stops_same_writes_floor(&client, floor_ns, floor_shells, options.stop_rate).await;
        println!("    {}", latency.line(&client).await);
        quiet.settle("the same-writes stops floor's writes").await;
        println!("    same-writes floor {}", writes.line(&client, "stop", floor_stops, 0).await);
        let cpu = CpuMeter::start(cluster, controller.process.pid());
        let latency = ApiserverLatency::start(&client).await;
        let m = options.stops.min(n);
        let warnings = WritesPer::start(&client).await;
        let before = scraper.scrape(&controller).await;
        let (writes, own, late) = stops(&client, ns, m, options.stop_rate, &quiet, warnings).await;
        println!(
            "    stops p99: controller/floor = {:.2}, controller/same-writes floor = {:.2} (target 2x)",
            late.p99 / floor_late.p99,
            late.p99 / same_late.p99
        );
        println!("    {}", latency.line(&client).await);
        println!("    {}", reconciles_line(&before, &scraper.scrape(&controller).await));
        println!("    {}", cpu.line(cluster, controller.process.pid()));
        quiet.settle("the stops' writes").await;
        println!("    {}", writes.line(&client, "stop", m, own).await);
        println!("      {}", writes.pods_line(&client, m).await);
        println!("      {}", writes.events_line(&client).await);
        // The same shells started again (their run time taken off): what a start writes.
        let writes = WritesPer::start(&client).await;
        let started = start_again(&client, ns, m, n, options.stop_rate).await;
        quiet.settle("the starts' writes").await;
        println!(
            "    starts: {m} stopped shells started again, {:.0}/s, all Ready in {started:.2?}",
            options.stop_rate
        );
        println!("    {}", writes.line(&client, "start", m, m).await);
        println!("      {}", writes.pods_line(&client, m).await);
        // The delete-only floor once more: the controller's stops bracketed by two of its floor's.
        let rate = options.stop_rate;
        crate::stops_floor_again::bracket(&client, floor_ns, floor_stops, rate, &quiet, &floor_late, &late).await;
        // An operator upgrade whose new template every shell takes at its quiet moment (come at
        // once: a quiet period of a second): what rolling one shell's template writes.
        settled(&scraper, &controller, 0.0).await;
        quiet.settle("the quiet-moment updates").await;
        let writes = WritesPer::start(&client).await;
        controller.process.stop(Duration::from_secs(10)).unwrap();
        let flags = ["--pod-annotations=bench.myownshell.io/release=3", "--template-update-quiet-after=1s"];
        let (rolled, ready) = Controller::start_with(cp, ns, options, "rolled", &flags).await;
        controller = rolled;
        let reconciled = ready + settled(&scraper, &controller, n as f64).await;
        quiet.settle("the updates' writes").await;
        println!(
            "    updates at a quiet moment: {n} shells rolled to a new template, every object reconciled in {reconciled:.2?}"
        );
        println!("    {}", writes.line(&client, "update", n, 0).await);
    }
    assert!(controller.process.is_running(), "the controller died:\n{}", controller.process.log_tail(20));
    controller.process.stop(Duration::from_secs(10)).unwrap();
    took
}

/// What the controller's own metrics say of a phase of stops: how late after its deadline each
/// stop began (a timer's wake-up and the wait for a worker), the queue's wait for an event, the
/// reconciles' time, how many reconciles and writes.
fn reconciles_line(before: &str, after: &str) -> String {
    let [(q50, q99), (r50, r99)] = crate::churn::reconcile_figures(before, after);
    let (reconciles, writes) = crate::churn::reconciles_and_writes(before, after);
    let (d50, d99) =
        crate::churn::histogram_figures(before, after, "myownshell_controller_lifetime_stop_delay_seconds");
    format!(
        "the controller meanwhile: each stop began after its deadline p50 {d50:.1} ms, p99 {d99:.1} ms; queue latency (events) p50 {q50:.1} ms, p99 {q99:.1} ms; reconcile p50 {r50:.1} ms, p99 {r99:.1} ms; {reconciles:.0} reconciles, {writes:.0} writes"
    )
}
