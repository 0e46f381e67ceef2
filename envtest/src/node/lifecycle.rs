//! How fast a cluster of several nodes notices a lost node and moves its pods: the flags given
//! to kube-controller-manager (its node-lifecycle controller) and kube-apiserver (its
//! `DefaultTolerationSeconds` admission plugin). A cluster of one node keeps every default: its
//! pods have nowhere else to go, and its suites (`tests/tests/node.rs`, `e2e/`) run on 2 busy
//! CI cores, where a kubelet starved for 20 seconds must not cost the operator its pods.
//!
//! What happens when a node is lost ([`super::Cluster::kill_node`]), and how long it takes here:
//! 1. kubelet stops renewing its Lease (every 10 s by default). After
//!    [`NODE_MONITOR_GRACE_PERIOD`] the node-lifecycle controller, which looks every 5 s
//!    (`--node-monitor-period`), sets the node's conditions to Unknown (NotReady), marks its pods
//!    not ready (out of their Services' endpoints) and taints it
//!    `node.kubernetes.io/unreachable:NoExecute`. The default is 50 s; 20 s is two missed
//!    renewals. The flag's help asks for more than HTTP/2's ping and read-idle timeouts, so that
//!    a kubelet whose connection silently died can reconnect first; here the connection is a
//!    local bridge that either works or is gone with its node.
//! 2. The taint-eviction controller deletes every pod that does not tolerate the taint, once its
//!    toleration runs out. Pods that say nothing get a toleration from the apiserver's
//!    `DefaultTolerationSeconds` plugin, 300 s by default: five minutes in which a Deployment
//!    (the operator's, a shell's) still counts the lost pod as its own. With
//!    [`DEFAULT_TOLERATION_SECONDS`] they are deleted 10 s after the taint, and their
//!    controllers create replacements on the nodes that are left. The plugin only touches pods
//!    created after the apiserver started with the flag, which is all of a test cluster's.
//!    (The pods stay Terminating: no kubelet can confirm them gone until the node is back.)
//!
//! Draining needs nothing here: `kubectl drain` cordons the node and evicts its pods through the
//! apiserver's eviction API, which refuses an eviction its PodDisruptionBudget does not allow,
//! using the budget's status that kube-controller-manager's disruption controller keeps (on by
//! default, like every controller it runs here).

use std::time::Duration;

/// `--node-monitor-grace-period` of a cluster of several nodes (default 50 s).
pub const NODE_MONITOR_GRACE_PERIOD: Duration = Duration::from_secs(20);
/// `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds` of
/// a cluster of several nodes (default 300).
pub const DEFAULT_TOLERATION_SECONDS: u32 = 10;

/// Whether a cluster of `nodes` gets the fast settings.
pub fn fast(nodes: u8) -> bool {
    nodes > 1
}

/// kube-controller-manager's flags for a cluster of `nodes`.
pub fn controller_manager_args(nodes: u8) -> Vec<String> {
    if !fast(nodes) {
        return Vec::new();
    }
    vec![format!("--node-monitor-grace-period={}s", NODE_MONITOR_GRACE_PERIOD.as_secs())]
}

/// kube-apiserver's flags for a cluster of `nodes`.
pub fn apiserver_args(nodes: u8) -> Vec<String> {
    if !fast(nodes) {
        return Vec::new();
    }
    vec![
        format!("--default-not-ready-toleration-seconds={DEFAULT_TOLERATION_SECONDS}"),
        format!("--default-unreachable-toleration-seconds={DEFAULT_TOLERATION_SECONDS}"),
    ]
}

/// One phrase for a cluster's summary.
pub fn describe(nodes: u8) -> String {
    if fast(nodes) {
        format!(
            "a lost node NotReady after {}s, its pods deleted {DEFAULT_TOLERATION_SECONDS}s later",
            NODE_MONITOR_GRACE_PERIOD.as_secs()
        )
    } else {
        "node loss handled with Kubernetes' defaults".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_node_keeps_the_defaults_and_several_notice_a_loss_fast() {
        assert!(controller_manager_args(1).is_empty());
        assert!(apiserver_args(1).is_empty());
        assert_eq!(controller_manager_args(2), ["--node-monitor-grace-period=20s"]);
        assert_eq!(
            apiserver_args(3),
            ["--default-not-ready-toleration-seconds=10", "--default-unreachable-toleration-seconds=10"]
        );
    }
}
