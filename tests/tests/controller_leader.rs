//! Leader election between real controller processes: exactly one reconciles; a killed leader
//! is replaced once its lease expires; a leader stopped with SIGTERM releases the lease and a
//! standby takes over at once.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use myownshell_envtest::{ControlPlane, eventually};
use myownshell_tests::controller::{ControllerProcess, ShellNamespace, sized_shell};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(30);
const LEASE: &str = "myownshell-test-lease";
/// Short timings so the test runs in seconds; the same ratios as controller-runtime's 15/10/2.
const LEASE_SECS: u64 = 6;
const LEADER: &str = "myownshell_controller_leader";
const RECONCILES: &str = "myownshell_controller_reconciles_total{result=\"success\"}";

fn candidate(cp: &ControlPlane, name: &str, ns: &str) -> ControllerProcess {
    let lease_duration = format!("{LEASE_SECS}s");
    let flags = [
        "--namespace",
        ns,
        "--leader-elect",
        "--leader-election-id",
        LEASE,
        "--leader-election-namespace",
        ns,
        "--lease-duration",
        &lease_duration,
        "--renew-deadline",
        "4s",
        "--retry-period",
        "1s",
    ];
    ControllerProcess::start(cp, name, &flags).unwrap()
}

/// Index of the one candidate reporting leadership while all others report standby.
async fn sole_leader(candidates: &[&ControllerProcess]) -> Result<usize, String> {
    let mut leaders = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        if c.metric(LEADER).await? == 1.0 {
            leaders.push(i);
        }
    }
    match leaders.as_slice() {
        [one] => Ok(*one),
        other => Err(format!("leaders: {other:?}")),
    }
}

async fn replicas_become(deployments: &Api<Deployment>, name: &str, want: i32, logs: &str) {
    eventually(&format!("Deployment {name} replicas = {want}"), TIMEOUT, || async {
        let d = deployments.get_opt(name).await.map_err(|e| e.to_string())?;
        let got = d.and_then(|d| d.spec).and_then(|s| s.replicas);
        if got == Some(want) { Ok(()) } else { Err(format!("replicas {got:?}")) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{logs}"));
}

async fn lease_holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt(LEASE).await.unwrap().and_then(|l| l.spec).and_then(|s| s.holder_identity).filter(|h| !h.is_empty())
}

#[tokio::test]
async fn one_leader_reconciles_and_standbys_take_over() {
    let ShellNamespace { cp, client, ns, shells, deployments } = ShellNamespace::create("ctrl-leader").await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);

    let mut a = candidate(cp, "leader-a", &ns);
    let mut b = candidate(cp, "leader-b", &ns);
    let first = eventually("exactly one leader", TIMEOUT, || async { sole_leader(&[&a, &b]).await }).await.unwrap();
    assert!(lease_holder(&leases).await.is_some(), "the Lease names its holder");
    let (leader, standby) = if first == 0 { (&mut a, &mut b) } else { (&mut b, &mut a) };

    shells.create(&PostParams::default(), &sized_shell("lambda", 1)).await.unwrap();
    replicas_become(&deployments, "lambda", 1, &leader.log_tail(30)).await;
    assert_eq!(standby.metric(RECONCILES).await.unwrap(), 0.0, "the standby reconciled:\n{}", standby.log_tail(30));
    assert_eq!(standby.probe("/readyz").await.unwrap().0, 200, "a waiting standby is ready");

    // Killed leader: no release, so the standby waits for the lease to expire.
    let killed = Instant::now();
    leader.process.kill().unwrap();
    eventually("the standby to lead", TIMEOUT, || async {
        if standby.metric(LEADER).await? == 1.0 { Ok(()) } else { Err("still standby".to_owned()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", standby.log_tail(30)));
    eprintln!("takeover after SIGKILL of the leader: {:.1?} (lease duration {LEASE_SECS}s)", killed.elapsed());
    shells.patch("lambda", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 2}}))).await.unwrap();
    replicas_become(&deployments, "lambda", 2, &standby.log_tail(30)).await;

    // Graceful stop: the leader releases the lease, and a new standby takes it within a retry
    // period or two, well before the lease would have expired.
    let mut c = candidate(cp, "leader-c", &ns);
    eventually("the new standby to be ready", TIMEOUT, || async {
        match c.probe("/readyz").await? {
            (200, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap();
    let stopped = Instant::now();
    let status = standby.process.stop(Duration::from_secs(10)).unwrap();
    assert!(status.success(), "the leader exited with {status}\n{}", standby.log_tail(30));
    assert!(standby.log_tail(10).contains("released the leader lease"), "{}", standby.log_tail(30));
    eventually("the new standby to lead", TIMEOUT, || async {
        if c.metric(LEADER).await? == 1.0 { Ok(()) } else { Err("still standby".to_owned()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.log_tail(30)));
    let takeover = stopped.elapsed();
    eprintln!("takeover after SIGTERM of the leader: {takeover:.1?} (lease duration {LEASE_SECS}s)");
    assert!(
        takeover < Duration::from_secs(LEASE_SECS),
        "a released lease is taken before it could have expired; took {takeover:?}"
    );
    shells.patch("lambda", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 3}}))).await.unwrap();
    replicas_become(&deployments, "lambda", 3, &c.log_tail(30)).await;
    c.process.stop(Duration::from_secs(10)).unwrap();
}
