//! A leader that cannot renew its lease stops before the lease can expire, so two replicas
//! never reconcile at once. Its own test binary: it stops the apiserver.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use myownshell_envtest::{create_shell_namespace, eventually, shared};
use myownshell_tests::controller::ControllerProcess;

const TIMEOUT: Duration = Duration::from_secs(30);
const LEASE: &str = "myownshell-renew-lease";
const LEASE_SECS: u64 = 6;

#[tokio::test]
async fn a_leader_that_cannot_renew_stops_before_its_lease_expires() {
    let cp = shared();
    let client = cp.client().unwrap();
    let ns = create_shell_namespace(&client, "ctrl-renew").await.unwrap();
    let lease_duration = format!("{LEASE_SECS}s");
    let flags = [
        "--namespace",
        &ns,
        "--leader-elect",
        "--leader-election-id",
        LEASE,
        "--leader-election-namespace",
        &ns,
        "--lease-duration",
        &lease_duration,
        "--renew-deadline",
        "4s",
        "--retry-period",
        "1s",
    ];
    let mut controller = ControllerProcess::start(cp, "renew", &flags).unwrap();
    eventually("leadership", TIMEOUT, || async {
        if controller.metric("myownshell_controller_leader").await? == 1.0 { Ok(()) } else { Err("standby".to_owned()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));

    cp.stop_apiserver().unwrap();
    let exited_at = eventually("the leader to give up", TIMEOUT, || {
        let status = controller.process.exit_status();
        async move { status.map(|s| (s, SystemTime::now())).ok_or_else(|| "still running".to_owned()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_tail(30)));
    let (status, exited_at) = exited_at;
    assert!(!status.success(), "losing leadership is a failure exit: {status}");
    assert!(controller.log_tail(10).contains("leadership lost"), "{}", controller.log_tail(30));

    // The lease as the leader last renewed it: it had not expired when the process stopped.
    cp.start_apiserver().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(cp.client().unwrap(), &ns);
    let spec = leases.get(LEASE).await.unwrap().spec.unwrap();
    let renewed: SystemTime = spec.renew_time.unwrap().0.into();
    let expiry = renewed + Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap()).unwrap());
    let margin = expiry.duration_since(exited_at).unwrap_or_else(|e| {
        panic!("the leader ran {:?} past its lease's expiry\n{}", e.duration(), controller.log_tail(30))
    });
    eprintln!("the leader stopped {margin:.1?} before its lease would have expired");
}
