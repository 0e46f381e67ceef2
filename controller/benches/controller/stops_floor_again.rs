//! The delete-only stops floor once more, after the controller's stops and starts: the
//! controller's stops bracketed by two runs of their floor in the same run, and the floor against
//! itself.
//!
//! Why: the stops' figure is a p99 of 100 deadlines a second, all of one second falling at one
//! instant, so it is set by the slowest second or two of the phase. On 2 cores that figure moves
//! between runs by itself: the delete-only floor's p99 ranged 118 to 183 ms over eight runs of the
//! same build (docs/benchmarks.md). A ratio against one floor measured a minute earlier carries
//! that noise; a second floor after the controller's stops shows how far the floor moves within
//! the run, and the ratio against the mean of the two is less tied to one of them.

use kube::Client;

use crate::apiserver_latency::ApiserverLatency;
use crate::churn_floor::floor_caught_up;
use crate::quiet::Quiet;
use crate::stops::{Lateness, starts_floor, stops_floor};

/// Make the floor's first `m` Deployments of `ns` again (the same-writes floor deleted them),
/// then meet their deadlines with deletes as [`stops_floor`] did before the controller's stops,
/// `rate` a second; print that floor's p99 against `before` (the first floor's) and the
/// controller's (`controller`) against both and their mean.
pub(crate) async fn bracket(
    client: &Client,
    ns: &str,
    m: usize,
    rate: u32,
    quiet: &Quiet,
    before: &Lateness,
    controller: &Lateness,
) {
    quiet.settle("the floor's starts, again").await;
    starts_floor(client, ns, m, rate).await;
    floor_caught_up(client, ns).await;
    quiet.settle("the stops floor, again").await;
    let latency = ApiserverLatency::start(client).await;
    let after = stops_floor(client, ns, m, rate).await;
    println!("    {}", latency.line(client).await);
    let mean = (before.p99 + after.p99) / 2.0;
    println!(
        "    stops p99, the floor bracketing the controller: the floor after/before = {:.2}; controller/floor before = {:.2}, after = {:.2}, their mean ({:.0} ms) = {:.2} (target 2x)",
        after.p99 / before.p99,
        controller.p99 / before.p99,
        controller.p99 / after.p99,
        mean * 1000.0,
        controller.p99 / mean,
    );
}
