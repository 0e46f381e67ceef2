//! The cluster's network: what a Kind cluster gets from its docker network, without a container
//! engine. A network namespace of its own, held by one process, holds a bridge; the host joins
//! it through one veth link, and each node through a veth of its own. The nodes, the host and
//! the apiserver (bound to the host's end) share one L2 segment, so traffic between nodes (pod
//! to pod, and pod to a Service whose endpoint kube-proxy picked on another node) goes from node
//! to node over the bridge and never through the host: the host forwards nothing (its
//! `ip_forward` stays as it is, its FORWARD chain is never consulted), so nothing has to be
//! changed on the host that could outlive a run.
//!
//! Why a namespace of its own rather than the first node's link, as with one node: the apiserver
//! binds to the host's end of the link, so that address must live as long as the cluster, not as
//! long as whichever node holds it: a node may be killed (see [`super::Cluster::kill_node`]),
//! and the other nodes, the tests and the pods must still reach the apiserver. The holder is
//! started like every child of the harness (parent-death signal), so when the run ends, however
//! it ends, the namespace goes, taking the bridge and the host's link (and its address and
//! routes) with it.
//!
//! Addresses, all from the run's slot (0..250), which the host link `mosnode<slot>` locks (its
//! creation fails if another run holds the slot, and the slot frees itself when the run's
//! network goes):
//! - the segment `10.213.<slot>.0/24`: the host (and the apiserver) at .1, node k at .(k+1),
//!   so the first node is at .2 as it always was;
//! - node k's pods: `10.214.<slot>.0/24` for the first node (as always), `10.(214+k).<slot>.0/24`
//!   for k ≥ 2 (10.215 is taken by the Services), hence at most [`MAX_NODES`] nodes;
//! - the Services: `10.215.<slot>.0/24`.
//!
//! Routes: the host routes each node's pod range to that node, and the Service range to the
//! first node (whose kube-proxy answers for the host; the apiserver itself calls webhooks at
//! their endpoints, see [`super`]). Each node routes the other nodes' pod ranges to them
//! directly on the segment, and everything else to the host. Reverse-path filtering holds
//! everywhere: a packet from a pod of node j reaches node k on `eth0`, and node k's route back to
//! node j's pods leaves through `eth0` too.
//!
//! Each node's end gets a fixed MAC address derived from its IP (as Docker does), so a node
//! that comes back after [`super::Cluster::kill_node`] answers at the address the host's and the
//! other nodes' ARP caches already hold: no waiting for stale neighbour entries to expire.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::control_plane::{HarnessError, Ipv4Net};

use super::netns::HeldNetwork;
use super::sandbox::run;

/// The most nodes a cluster can have: the second octet of node k's pod range is 214 + k.
pub const MAX_NODES: u8 = 41;
const SLOTS: u8 = 250;
const LINK_PREFIX: &str = "mosnode";
/// The bridge, inside the network's namespace.
const BRIDGE: &str = "br0";
/// The host link's end inside the network's namespace.
const HOST_PORT: &str = "host";
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// Every address of one cluster, from its slot (pure, so the plan can be read and tested).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    slot: u8,
}

impl Addresses {
    /// The addresses of the run holding `slot`.
    pub fn new(slot: u8) -> Self {
        Self { slot }
    }
    /// The slot (0..250).
    pub fn slot(&self) -> u8 {
        self.slot
    }
    /// The segment the host and the nodes share: `10.213.<slot>.0/24`.
    pub fn segment(&self) -> Ipv4Net {
        Ipv4Net { network: Ipv4Addr::new(10, 213, self.slot, 0), prefix: 24 }
    }
    /// The host's address on the segment; kube-apiserver binds to it.
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 1)
    }
    /// Node `number`'s (1-based) address on the segment, its InternalIP.
    pub fn node_ip(&self, number: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, number + 1)
    }
    /// Node `number`'s MAC address: locally administered, the IP's four bytes after `02:00`.
    pub fn node_mac(&self, number: u8) -> String {
        let [a, b, c, d] = self.node_ip(number).octets();
        format!("02:00:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
    }
    /// Node `number`'s pod range (see the module docs).
    pub fn pod_cidr(&self, number: u8) -> Ipv4Net {
        let second = if number <= 1 { 214 } else { 214 + number };
        Ipv4Net { network: Ipv4Addr::new(10, second, self.slot, 0), prefix: 24 }
    }
    /// The Services' ClusterIPs.
    pub fn service_cidr(&self) -> Ipv4Net {
        Ipv4Net { network: Ipv4Addr::new(10, 215, self.slot, 0), prefix: 24 }
    }
    /// The host's routes in a cluster of `nodes`: each node's pods via that node, the Services
    /// via the first node.
    pub fn host_routes(&self, nodes: u8) -> Vec<(Ipv4Net, Ipv4Addr)> {
        let mut routes: Vec<(Ipv4Net, Ipv4Addr)> = (1..=nodes).map(|n| (self.pod_cidr(n), self.node_ip(n))).collect();
        routes.push((self.service_cidr(), self.node_ip(1)));
        routes
    }
    /// Node `number`'s routes besides its default route to the host: the other nodes' pods,
    /// each via its node.
    pub fn node_routes(&self, number: u8, nodes: u8) -> Vec<(Ipv4Net, Ipv4Addr)> {
        (1..=nodes).filter(|n| *n != number).map(|n| (self.pod_cidr(n), self.node_ip(n))).collect()
    }
}

/// How a node is wired into the network, for its sandbox to configure on its side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLink {
    /// The node's address and the segment's prefix length.
    pub address: Ipv4Net,
    /// The default gateway: the host.
    pub gateway: Ipv4Addr,
    /// The other nodes' pod ranges and the node each is reached through.
    pub routes: Vec<(Ipv4Net, Ipv4Addr)>,
}

/// The running network: the namespace holding the bridge, and the host's link into it.
#[derive(Debug)]
pub struct Network {
    holder: HeldNetwork,
    addresses: Addresses,
    nodes: u8,
}

impl Network {
    /// Create the namespace, claim a slot with the host's link, and wire the bridge, the host's
    /// address and routes for `nodes` nodes. `log` is the holder's log.
    pub(crate) fn start(log: &Path, nodes: u8) -> Result<Self, HarnessError> {
        let holder = HeldNetwork::start("cluster-network", log).map_err(HarnessError::Start)?;
        let slot = claim_slot(holder.pid())?;
        let network = Self { holder, addresses: Addresses::new(slot), nodes };
        network.configure().map_err(HarnessError::Start)?;
        Ok(network)
    }

    /// Inside: the bridge with the host's port on it. On the host: the segment's address on the
    /// link and the routes of [`Addresses::host_routes`].
    fn configure(&self) -> Result<(), String> {
        let script = format!(
            "set -e
ip link set lo up
ip link add {BRIDGE} type bridge
ip link set {BRIDGE} up
ip link set {HOST_PORT} master {BRIDGE} up
"
        );
        self.inside(&script)?;
        let link = self.link_name();
        let host = format!("{}/{}", self.host_ip(), self.addresses.segment().prefix);
        run("ip", &["addr", "add", &host, "dev", &link])?;
        run("ip", &["link", "set", &link, "up"])?;
        for (cidr, via) in self.addresses.host_routes(self.nodes) {
            run("ip", &["route", "add", &cidr.to_string(), "via", &via.to_string(), "dev", &link])?;
        }
        Ok(())
    }

    fn inside(&self, script: &str) -> Result<(), String> {
        self.holder.inside(script)
    }

    /// Plug node `number`, whose network namespace `node_pid` is in, into the bridge: a veth
    /// with `node<number>` on the bridge and `eth0` (with the node's fixed MAC) in the node. The
    /// port of the node's previous life, if the kernel still has it, goes first.
    pub(crate) fn attach(&self, number: u8, node_pid: u32) -> Result<NodeLink, String> {
        self.wait_detached(number)?;
        let port = format!("node{number}");
        let script = format!(
            "set -e
ip link add {port} type veth peer name eth0 address {mac} netns {node_pid}
ip link set {port} master {BRIDGE} up
",
            mac = self.addresses.node_mac(number)
        );
        self.inside(&script).map_err(|e| format!("plugging node {number} into the cluster network: {e}"))?;
        Ok(NodeLink {
            address: Ipv4Net { network: self.addresses.node_ip(number), prefix: self.addresses.segment().prefix },
            gateway: self.host_ip(),
            routes: self.addresses.node_routes(number, self.nodes),
        })
    }

    /// Wait until node `number`'s port is off the bridge: the kernel removes it when the node's
    /// network namespace is released, which happens asynchronously after its last process died.
    pub(crate) fn wait_detached(&self, number: u8) -> Result<(), String> {
        let port = format!("node{number}");
        let deadline = Instant::now() + STOP_TIMEOUT;
        while self.holder.interfaces().contains(&port) {
            if Instant::now() > deadline {
                return Err(format!("node {number}'s network namespace was not released in {STOP_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Every address of this cluster.
    pub fn addresses(&self) -> Addresses {
        self.addresses
    }
    /// The slot this run holds (0..250).
    pub fn slot(&self) -> u8 {
        self.addresses.slot()
    }
    /// The host's end of the link: `mosnode<slot>`.
    pub fn link_name(&self) -> String {
        format!("{LINK_PREFIX}{}", self.slot())
    }
    /// The host's address on the segment; kube-apiserver binds to it.
    pub fn host_ip(&self) -> Ipv4Addr {
        self.addresses.host_ip()
    }
    /// The Services' ClusterIPs.
    pub fn service_cidr(&self) -> Ipv4Net {
        self.addresses.service_cidr()
    }
    /// The pid (on the host) of the process holding the namespace.
    pub fn pid(&self) -> u32 {
        self.holder.pid()
    }
    /// How many nodes the network was wired for.
    pub fn nodes(&self) -> u8 {
        self.nodes
    }

    /// Stop the holder and wait until the kernel has released the namespace: the host's link
    /// (and with it its address and routes) gone.
    pub(crate) fn stop(&mut self) -> Result<(), String> {
        self.holder.stop(Duration::from_secs(1));
        let link = format!("/sys/class/net/{}", self.link_name());
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Path::new(&link).exists() {
            if Instant::now() > deadline {
                return Err(format!(
                    "the cluster network's link {} did not go away in {STOP_TIMEOUT:?}",
                    self.link_name()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Create the host's link with its other end inside the network, on the first free slot.
fn claim_slot(holder_pid: u32) -> Result<u8, HarnessError> {
    let pid = holder_pid.to_string();
    for slot in 0..SLOTS {
        let name = format!("{LINK_PREFIX}{slot}");
        match run("ip", &["link", "add", &name, "type", "veth", "peer", "name", HOST_PORT, "netns", &pid]) {
            Ok(_) => return Ok(slot),
            Err(e) if e.contains("File exists") => continue,
            Err(e) => return Err(HarnessError::Start(format!("creating the cluster's link: {e}"))),
        }
    }
    Err(HarnessError::Start(format!("all {SLOTS} cluster slots are taken (links {LINK_PREFIX}0..)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_node_keeps_the_single_node_addresses() {
        let a = Addresses::new(7);
        assert_eq!(a.host_ip(), Ipv4Addr::new(10, 213, 7, 1));
        assert_eq!(a.node_ip(1), Ipv4Addr::new(10, 213, 7, 2));
        assert_eq!(a.pod_cidr(1).to_string(), "10.214.7.0/24");
        assert_eq!(a.service_cidr().to_string(), "10.215.7.0/24");
    }

    #[test]
    fn every_node_has_its_own_address_pod_range_and_mac() {
        let a = Addresses::new(3);
        let cidrs: Vec<String> = (1..=MAX_NODES).map(|n| a.pod_cidr(n).to_string()).collect();
        assert_eq!(cidrs[1], "10.216.3.0/24");
        assert_eq!(cidrs.last().map(String::as_str), Some("10.255.3.0/24"));
        let mut distinct = cidrs.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), cidrs.len());
        assert!(!cidrs.contains(&a.service_cidr().to_string()));
        assert!(!cidrs.contains(&a.segment().to_string()));
        assert_eq!(a.node_ip(2), Ipv4Addr::new(10, 213, 3, 3));
        assert_eq!(a.node_mac(2), "02:00:0a:d5:03:03");
    }

    #[test]
    fn the_host_routes_pods_to_their_node_and_nodes_route_to_each_other() {
        let a = Addresses::new(0);
        let show = |routes: Vec<(Ipv4Net, Ipv4Addr)>| -> Vec<String> {
            routes.into_iter().map(|(cidr, via)| format!("{cidr} via {via}")).collect()
        };
        assert_eq!(show(a.host_routes(1)), ["10.214.0.0/24 via 10.213.0.2", "10.215.0.0/24 via 10.213.0.2"]);
        assert_eq!(
            show(a.host_routes(2)),
            ["10.214.0.0/24 via 10.213.0.2", "10.216.0.0/24 via 10.213.0.3", "10.215.0.0/24 via 10.213.0.2"]
        );
        assert!(a.node_routes(1, 1).is_empty());
        assert_eq!(show(a.node_routes(1, 2)), ["10.216.0.0/24 via 10.213.0.3"]);
        assert_eq!(show(a.node_routes(2, 2)), ["10.214.0.0/24 via 10.213.0.2"]);
    }
}
