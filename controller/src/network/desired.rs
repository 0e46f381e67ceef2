//! The NetworkPolicies a namespace opened to shells should hold, as a pure function of the
//! namespace and the operator's settings ([`desired`]), and the rule of which policies are ours
//! ([`is_ours`]).
//!
//! One policy, [`POLICY_NAME`], selects every shell pod of the namespace (the labels the
//! controller puts on them, which only the ReplicaSet controller may give a pod there:
//! `config/policy/shell_workloads.yaml`) but those of a class with `spec.network`, and isolates
//! it both ways:
//! - ingress only from the gateway's pods in the operator's namespace (traffic from the node
//!   itself, the kubelet's, is never filtered by NetworkPolicy);
//! - egress to the cluster's DNS (kube-system's `k8s-app: kube-dns` pods, port 53) and to every
//!   address but the private, shared, link-local (the cloud metadata address among them) and
//!   unique-local ranges and the operator's `--shell-egress-except` ranges: so not the nodes, not
//!   other pods (other shells among them), not the apiserver, wherever those sit in such ranges.
//!
//! Each class with `spec.network` gets a policy of its own over its shells (their
//! `myownshell.io/class` label), [`class_policy_name`]: the same, with the namespaces it names
//! let in too, public addresses only unless `publicEgress: false`, and its `egress` ranges, each
//! held to the operator's `--class-egress-allowed` (the metadata address only when that names
//! it exactly). Policies add up, so a class's shells are kept out of the namespace's policy: a
//! class can narrow as well as widen.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use myownshell_api::{ClassNetwork, names};

/// The name of the operator's policy in each namespace opened to shells. Names starting with
/// `myownshell-` in those namespaces are the operator's (`config/policy/shell_network.yaml`
/// lets nobody else make one).
pub const POLICY_NAME: &str = "myownshell-shells";

/// `app.kubernetes.io/component` on the operator's policies.
pub const COMPONENT: &str = "network-isolation";

/// The IPv4 ranges a shell never reaches unless an administrator says: private (RFC 1918),
/// shared address space (RFC 6598, carrier-grade NAT, often a cluster's pods), link-local
/// (RFC 3927, with the cloud metadata address 169.254.169.254).
pub const DENIED_V4: [&str; 5] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"];
/// The IPv6 ranges a shell never reaches: unique-local (RFC 4193) and link-local.
pub const DENIED_V6: [&str; 2] = ["fc00::/7", "fe80::/10"];
/// The cloud metadata address, opened to a class only when `--class-egress-allowed` names it.
pub const METADATA: &str = "169.254.169.254/32";

/// The labels of the gateway's pods (`config/gateway/deployment.yaml`).
pub fn gateway_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (names::LABEL_NAME.to_owned(), names::LABEL_NAME_VALUE.to_owned()),
        ("app.kubernetes.io/component".to_owned(), "gateway".to_owned()),
    ])
}

/// What the operator's flags say about shells' network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The namespace of the gateway's pods (the operator's).
    pub gateway_namespace: String,
    /// More ranges shells may not reach (`--shell-egress-except`): a cluster's pod, Service or
    /// node ranges where they are public addresses.
    pub egress_except: Vec<Cidr>,
    /// More addresses shells may ask DNS (port 53), besides kube-system's `k8s-app: kube-dns`
    /// pods (`--shell-dns`): a node-local DNS cache's link-local address, say.
    pub dns: Vec<Cidr>,
    /// The ranges a class's `spec.network.egress` may open (`--class-egress-allowed`).
    pub class_egress_allowed: Vec<Cidr>,
}

/// A class with `spec.network`, as its policy needs it.
#[derive(Debug, Clone, Copy)]
pub struct ClassView<'a> {
    /// The class's name.
    pub name: &'a str,
    /// Its `spec.network`.
    pub network: &'a ClassNetwork,
}

/// An address range, `address/prefix`, as NetworkPolicy's ipBlock takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address.
    pub addr: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// The address as 128 bits (IPv4 in the top 32).
    fn bits(&self) -> u128 {
        match self.addr {
            IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
            IpAddr::V6(a) => u128::from(a),
        }
    }

    /// Whether every address of `inner` is one of `self`'s.
    pub fn contains(&self, inner: &Cidr) -> bool {
        if self.addr.is_ipv4() != inner.addr.is_ipv4() || self.prefix > inner.prefix {
            return false;
        }
        // The prefix counts from the top of the 128 bits either way (IPv4 sits there).
        let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(self.prefix)) };
        (self.bits() & mask) == (inner.bits() & mask)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl std::str::FromStr for Cidr {
    type Err = String;

    /// `10.0.0.0/8`, `2001:db8::/32`: the address's host bits must be zero, as the apiserver
    /// requires of an ipBlock.
    fn from_str(text: &str) -> Result<Self, String> {
        let (addr, prefix) =
            text.split_once('/').ok_or_else(|| format!("{text:?} is not a range (address/prefix, e.g. 10.0.0.0/8)"))?;
        let addr: IpAddr = addr.parse().map_err(|e| format!("{text:?}: the address: {e}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix.parse().map_err(|_| format!("{text:?}: the prefix must be a number 0..={max}"))?;
        if prefix > max {
            return Err(format!("{text:?}: the prefix must be at most {max}"));
        }
        let bits = Self { addr, prefix }.bits();
        let host = if prefix == 0 { u128::MAX } else { u128::MAX >> prefix };
        if prefix < 128 && bits & host != 0 {
            return Err(format!(
                "{text:?}: the address has bits set past the prefix (a range starts at its first address)"
            ));
        }
        if prefix == 0 {
            return Err(format!("{text:?}: a range of every address would leave shells no egress at all"));
        }
        Ok(Self { addr, prefix })
    }
}

/// The labels on the operator's policies (and the watch's selector, [`owned_selector`]).
pub fn policy_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (names::LABEL_NAME.to_owned(), names::LABEL_NAME_VALUE.to_owned()),
        (names::LABEL_MANAGED_BY.to_owned(), names::LABEL_MANAGED_BY_VALUE.to_owned()),
        ("app.kubernetes.io/component".to_owned(), COMPONENT.to_owned()),
    ])
}

/// The label selector that finds the operator's policies.
pub fn owned_selector() -> String {
    policy_labels().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// Whether `policy` is the operator's: it carries every one of [`policy_labels`]. Nothing else is
/// written or deleted (a policy of an editor's that shares the name is left alone).
pub fn is_ours(policy: &NetworkPolicy) -> bool {
    let labels = policy.metadata.labels.as_ref();
    policy_labels().iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The selector of every shell pod: the labels the controller gives them
/// ([`crate::labels::labels`]), whatever the instance.
fn shell_pods() -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([
            (names::LABEL_NAME.to_owned(), names::LABEL_NAME_VALUE.to_owned()),
            (names::LABEL_MANAGED_BY.to_owned(), names::LABEL_MANAGED_BY_VALUE.to_owned()),
        ])),
        match_expressions: None,
    }
}

fn selector(labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector { match_labels: Some(labels), match_expressions: None }
}

fn namespace_named(name: &str) -> LabelSelector {
    selector(BTreeMap::from([("kubernetes.io/metadata.name".to_owned(), name.to_owned())]))
}

fn port(protocol: &str, number: i32) -> NetworkPolicyPort {
    NetworkPolicyPort { protocol: Some(protocol.to_owned()), port: Some(IntOrString::Int(number)), end_port: None }
}

/// Every address of one family but `denied` and those of `extra` of that family.
fn public_block(all: &str, denied: &[&str], extra: &[Cidr], v4: bool) -> NetworkPolicyPeer {
    let mut except: Vec<String> = denied.iter().map(|c| (*c).to_owned()).collect();
    for cidr in extra.iter().filter(|c| c.addr.is_ipv4() == v4).map(Cidr::to_string) {
        if !except.contains(&cidr) {
            except.push(cidr);
        }
    }
    NetworkPolicyPeer {
        ip_block: Some(IPBlock { cidr: all.to_owned(), except: Some(except) }),
        ..NetworkPolicyPeer::default()
    }
}

/// The name of the policy over the shells of the class `class`.
pub fn class_policy_name(class: &str) -> String {
    // A shortened label value holds `_`, which object names may not.
    format!("{POLICY_NAME}-{}", crate::labels::class_value(class).replace('_', "-"))
}

/// The policies `namespace` (opened to shells) should hold, and what of the classes' networks
/// was not opened, each naming the class, the field and the rule.
pub fn desired(namespace: &str, settings: &Settings, classes: &[ClassView<'_>]) -> (Vec<NetworkPolicy>, Vec<String>) {
    // In one order whatever order the classes come in: else the namespace's policy would differ
    // from one reconcile to the next, and each write would bring the next.
    let mut classes = classes.to_vec();
    classes.sort_by(|a, b| a.name.cmp(b.name));
    let classes = classes.as_slice();
    let mut base = shell_pods();
    if !classes.is_empty() {
        base.match_expressions = Some(vec![LabelSelectorRequirement {
            key: names::LABEL_CLASS.to_owned(),
            operator: "NotIn".to_owned(),
            values: Some(classes.iter().map(|c| crate::labels::class_value(c.name)).collect()),
        }]);
    }
    let mut policies =
        vec![policy(namespace, POLICY_NAME, base, ingress(settings, &[]), egress(settings, true, Vec::new()))];
    let mut refused = Vec::new();
    for class in classes {
        let mut pods = shell_pods();
        if let Some(labels) = pods.match_labels.as_mut() {
            labels.insert(names::LABEL_CLASS.to_owned(), crate::labels::class_value(class.name));
        }
        let from = class.network.ingress_from_namespaces.as_deref().unwrap_or_default();
        let (rules, not_opened) = class_egress(class, settings);
        refused.extend(not_opened);
        let public = class.network.public_egress != Some(false);
        let name = class_policy_name(class.name);
        policies.push(policy(namespace, &name, pods, ingress(settings, from), egress(settings, public, rules)));
    }
    (policies, refused)
}

fn policy(
    namespace: &str,
    name: &str,
    pods: LabelSelector,
    ingress: Vec<NetworkPolicyIngressRule>,
    egress: Vec<NetworkPolicyEgressRule>,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(policy_labels()),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(pods),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(ingress),
            egress: Some(egress),
        }),
    }
}

/// In from the gateway, and from every pod of the namespaces `from`.
fn ingress(settings: &Settings, from: &[String]) -> Vec<NetworkPolicyIngressRule> {
    let gateway = NetworkPolicyPeer {
        namespace_selector: Some(namespace_named(&settings.gateway_namespace)),
        pod_selector: Some(selector(gateway_labels())),
        ..NetworkPolicyPeer::default()
    };
    let mut peers = vec![gateway];
    peers.extend(
        from.iter().map(|ns| NetworkPolicyPeer {
            namespace_selector: Some(namespace_named(ns)),
            ..NetworkPolicyPeer::default()
        }),
    );
    vec![NetworkPolicyIngressRule { from: Some(peers), ports: None }]
}

/// Out to DNS, to public addresses if `public`, and by `more`.
fn egress(settings: &Settings, public: bool, more: Vec<NetworkPolicyEgressRule>) -> Vec<NetworkPolicyEgressRule> {
    let dns = NetworkPolicyPeer {
        namespace_selector: Some(namespace_named("kube-system")),
        pod_selector: Some(selector(BTreeMap::from([("k8s-app".to_owned(), "kube-dns".to_owned())]))),
        ..NetworkPolicyPeer::default()
    };
    let mut to = vec![dns];
    to.extend(settings.dns.iter().map(|c| NetworkPolicyPeer {
        ip_block: Some(IPBlock { cidr: c.to_string(), except: None }),
        ..NetworkPolicyPeer::default()
    }));
    let mut rules = vec![NetworkPolicyEgressRule { to: Some(to), ports: Some(vec![port("UDP", 53), port("TCP", 53)]) }];
    if public {
        rules.push(NetworkPolicyEgressRule {
            to: Some(vec![
                public_block("0.0.0.0/0", &DENIED_V4, &settings.egress_except, true),
                public_block("::/0", &DENIED_V6, &settings.egress_except, false),
            ]),
            ports: None,
        });
    }
    rules.extend(more);
    rules
}

/// The class's `egress` as rules, each range held to `--class-egress-allowed`; what was not
/// opened, said. A rule left with no range is dropped whole (a rule with no peers would open
/// every address).
fn class_egress(class: &ClassView<'_>, settings: &Settings) -> (Vec<NetworkPolicyEgressRule>, Vec<String>) {
    let metadata = Cidr { addr: IpAddr::from([169, 254, 169, 254]), prefix: 32 };
    let metadata_named = settings.class_egress_allowed.contains(&metadata);
    let (mut rules, mut refused) = (Vec::new(), Vec::new());
    for (i, rule) in class.network.egress.iter().flatten().enumerate() {
        let mut peers = Vec::new();
        for (j, text) in rule.cidrs.iter().enumerate() {
            let field = format!("class {}: spec.network.egress[{i}].cidrs[{j}]", class.name);
            match opened(text, settings, metadata, metadata_named) {
                Ok(block) => peers.push(NetworkPolicyPeer { ip_block: Some(block), ..NetworkPolicyPeer::default() }),
                Err(why) => refused.push(format!("{field}: {why}")),
            }
        }
        if peers.is_empty() {
            continue;
        }
        let ports = rule.ports.as_ref().map(|ports| {
            ports.iter().map(|p| port(p.protocol.as_deref().unwrap_or("TCP"), p.port)).collect::<Vec<_>>()
        });
        rules.push(NetworkPolicyEgressRule { to: Some(peers), ports });
    }
    (rules, refused)
}

/// The ipBlock a class's range `text` opens, or why it opens nothing.
fn opened(text: &str, settings: &Settings, metadata: Cidr, metadata_named: bool) -> Result<IPBlock, String> {
    let cidr: Cidr = text.parse()?;
    if !settings.class_egress_allowed.iter().any(|a| a.contains(&cidr)) {
        let allowed: Vec<String> = settings.class_egress_allowed.iter().map(Cidr::to_string).collect();
        return Err(format!(
            "{cidr} is not within what the operator lets classes open (--class-egress-allowed: [{}])",
            allowed.join(", ")
        ));
    }
    let holds_metadata = cidr.contains(&metadata) && !metadata_named;
    if holds_metadata && cidr.prefix == 32 {
        return Err(format!(
            "{cidr} is the cloud metadata address, opened only when --class-egress-allowed names {METADATA}"
        ));
    }
    Ok(IPBlock { cidr: cidr.to_string(), except: holds_metadata.then(|| vec![METADATA.to_owned()]) })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn settings(except: &[&str]) -> Settings {
        Settings {
            gateway_namespace: "myownshell-system".to_owned(),
            egress_except: except.iter().map(|c| c.parse().unwrap()).collect(),
            dns: Vec::new(),
            class_egress_allowed: Vec::new(),
        }
    }

    fn one(namespace: &str, settings: &Settings) -> Value {
        let (all, refused) = desired(namespace, settings, &[]);
        assert!(refused.is_empty());
        assert_eq!(all.len(), 1);
        serde_json::to_value(&all[0]).unwrap()
    }

    #[test]
    fn selects_every_shell_pod_and_is_labelled_ours() {
        let p = one("team", &settings(&[]));
        assert_eq!(p["metadata"]["name"], json!(POLICY_NAME));
        assert_eq!(p["metadata"]["namespace"], json!("team"));
        assert_eq!(
            p["spec"]["podSelector"],
            json!({"matchLabels": {"app.kubernetes.io/managed-by": "myownshell-operator", "app.kubernetes.io/name": "myownshell"}})
        );
        assert_eq!(p["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        let policy: NetworkPolicy = serde_json::from_value(p).unwrap();
        assert!(is_ours(&policy));
        assert_eq!(
            owned_selector(),
            "app.kubernetes.io/component=network-isolation,app.kubernetes.io/managed-by=myownshell-operator,app.kubernetes.io/name=myownshell"
        );
    }

    #[test]
    fn ingress_only_from_the_gateway_in_the_operators_namespace() {
        let p = one("team", &settings(&[]));
        assert_eq!(
            p["spec"]["ingress"],
            json!([{"from": [{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "myownshell-system"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/component": "gateway", "app.kubernetes.io/name": "myownshell"}}
            }]}])
        );
    }

    #[test]
    fn egress_to_dns_and_public_addresses_only() {
        // (flag ranges, IPv4 except, IPv6 except)
        let cases: [(&[&str], Vec<&str>, Vec<&str>); 3] = [
            (&[], DENIED_V4.to_vec(), DENIED_V6.to_vec()),
            (
                &["203.0.113.0/24", "2001:db8::/32"],
                [&DENIED_V4[..], &["203.0.113.0/24"]].concat(),
                [&DENIED_V6[..], &["2001:db8::/32"]].concat(),
            ),
            (&["10.0.0.0/8"], DENIED_V4.to_vec(), DENIED_V6.to_vec()),
        ];
        for (flag, v4, v6) in cases {
            let p = one("team", &settings(flag));
            let egress = &p["spec"]["egress"];
            assert_eq!(egress.as_array().unwrap().len(), 2, "{flag:?}");
            assert_eq!(
                egress[0],
                json!({"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                               "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                       "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}),
                "{flag:?}"
            );
            assert_eq!(
                egress[1],
                json!({"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": v4}}, {"ipBlock": {"cidr": "::/0", "except": v6}}]}),
                "{flag:?}"
            );
        }
        assert!(DENIED_V4.contains(&"169.254.0.0/16"), "the metadata address 169.254.169.254 is never reached");
    }

    #[test]
    fn ranges_parse_as_the_apiserver_takes_them() {
        let cases = [
            ("10.0.0.0/8", Ok("10.0.0.0/8")),
            ("203.0.113.10/32", Ok("203.0.113.10/32")),
            ("2001:db8::/32", Ok("2001:db8::/32")),
            ("10.0.0.1/8", Err("bits set past the prefix")),
            ("10.0.0.0", Err("is not a range")),
            ("10.0.0.0/33", Err("at most 32")),
            ("::/129", Err("at most 128")),
            ("0.0.0.0/0", Err("no egress at all")),
            ("ten/8", Err("the address")),
            ("10.0.0.0/x", Err("must be a number")),
        ];
        for (text, want) in cases {
            let got = text.parse::<Cidr>().map(|c| c.to_string());
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_policy_without_every_label_is_not_ours() {
        let mut p = desired("team", &settings(&[]), &[]).0.remove(0);
        assert!(is_ours(&p));
        p.metadata.labels.as_mut().unwrap().remove(names::LABEL_MANAGED_BY);
        assert!(!is_ours(&p), "an editor's policy of the same name");
        p.metadata.labels = None;
        assert!(!is_ours(&p));
    }

    fn network(value: Value) -> ClassNetwork {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_class_with_a_network_has_its_own_policy_and_its_shells_leave_the_namespaces() {
        let (lab, quiet) = (
            network(
                json!({"ingressFromNamespaces": ["proxy"], "egress": [{"cidrs": ["10.20.0.0/16"], "ports": [{"port": 5432}]}]}),
            ),
            network(json!({"publicEgress": false})),
        );
        let mut settings = settings(&[]);
        settings.class_egress_allowed = vec!["10.20.0.0/16".parse().unwrap()];
        let classes = [ClassView { name: "lab", network: &lab }, ClassView { name: "quiet", network: &quiet }];
        let (all, refused) = desired("team", &settings, &classes);
        assert!(refused.is_empty(), "{refused:?}");
        let all: Vec<Value> = all.iter().map(|p| serde_json::to_value(p).unwrap()).collect();
        let names: Vec<&str> = all.iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["myownshell-shells", "myownshell-shells-lab", "myownshell-shells-quiet"]);
        assert_eq!(
            all[0]["spec"]["podSelector"]["matchExpressions"],
            json!([{"key": "myownshell.io/class", "operator": "NotIn", "values": ["lab", "quiet"]}]),
            "a class's shells are out of the namespace's policy (policies add up: else no class could narrow)"
        );
        assert_eq!(all[1]["spec"]["podSelector"]["matchLabels"]["myownshell.io/class"], json!("lab"));
        assert_eq!(
            all[1]["spec"]["ingress"][0]["from"][1],
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "proxy"}}})
        );
        let lab_egress = all[1]["spec"]["egress"].as_array().unwrap();
        assert_eq!(lab_egress.len(), 3, "DNS, public, the class's: {lab_egress:?}");
        assert_eq!(
            lab_egress[2],
            json!({"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}], "ports": [{"protocol": "TCP", "port": 5432}]})
        );
        let quiet_egress = all[2]["spec"]["egress"].as_array().unwrap();
        assert_eq!(quiet_egress.len(), 1, "publicEgress false: DNS only: {quiet_egress:?}");
        assert!(all.iter().all(|p| serde_json::from_value::<NetworkPolicy>(p.clone()).is_ok_and(|p| is_ours(&p))));
    }

    #[test]
    fn a_class_opens_only_what_the_operator_allows_and_the_metadata_address_only_by_name() {
        // (allowed by the flag, the class's range, the ipBlock opened or the refusal's words)
        let cases: [(&[&str], &str, Result<Value, &str>); 8] = [
            (&[], "10.20.0.0/16", Err("not within what the operator lets classes open (--class-egress-allowed: [])")),
            (&["10.0.0.0/8"], "10.20.0.0/16", Ok(json!({"cidr": "10.20.0.0/16"}))),
            (&["10.0.0.0/8"], "192.168.1.0/24", Err("not within")),
            (&["10.20.0.0/16"], "10.0.0.0/8", Err("not within")),
            (
                &["169.254.0.0/16"],
                "169.254.0.0/16",
                Ok(json!({"cidr": "169.254.0.0/16", "except": ["169.254.169.254/32"]})),
            ),
            (&["169.254.0.0/16"], "169.254.169.254/32", Err("the cloud metadata address")),
            (&["169.254.169.254/32"], "169.254.169.254/32", Ok(json!({"cidr": "169.254.169.254/32"}))),
            (&["2001:db8::/32"], "2001:db8:1::/48", Ok(json!({"cidr": "2001:db8:1::/48"}))),
        ];
        for (allowed, range, want) in cases {
            let mut settings = settings(&[]);
            settings.class_egress_allowed = allowed.iter().map(|c| c.parse().unwrap()).collect();
            let net = network(json!({"egress": [{"cidrs": [range]}]}));
            let (all, refused) = desired("team", &settings, &[ClassView { name: "lab", network: &net }]);
            let egress = serde_json::to_value(&all[1]).unwrap()["spec"]["egress"].clone();
            match want {
                Ok(block) => {
                    assert!(refused.is_empty(), "{allowed:?} {range}: {refused:?}");
                    assert_eq!(egress[2]["to"], json!([{"ipBlock": block}]), "{allowed:?} {range}");
                }
                Err(words) => {
                    assert_eq!(
                        egress.as_array().unwrap().len(),
                        2,
                        "{allowed:?} {range}: a rule with no range is dropped whole"
                    );
                    assert_eq!(refused.len(), 1, "{allowed:?} {range}: {refused:?}");
                    assert!(refused[0].starts_with("class lab: spec.network.egress[0].cidrs[0]: "), "{refused:?}");
                    assert!(refused[0].contains(words), "{allowed:?} {range}: {refused:?}");
                }
            }
        }
    }

    #[test]
    fn more_dns_servers_only_on_port_53() {
        let mut settings = settings(&[]);
        settings.dns = vec!["169.254.20.10/32".parse().unwrap()];
        let p = one("team", &settings);
        let dns = &p["spec"]["egress"][0];
        assert_eq!(dns["to"][1], json!({"ipBlock": {"cidr": "169.254.20.10/32"}}));
        assert_eq!(dns["ports"], json!([{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]));
        assert_eq!(
            p["spec"]["egress"][1]["to"][0]["ipBlock"]["except"],
            json!(DENIED_V4),
            "still out of reach otherwise"
        );
    }

    #[test]
    fn the_classes_order_changes_nothing() {
        let net = network(json!({"publicEgress": false}));
        let (a, b) = (ClassView { name: "a", network: &net }, ClassView { name: "b", network: &net });
        assert_eq!(desired("team", &settings(&[]), &[a, b]).0, desired("team", &settings(&[]), &[b, a]).0);
    }

    #[test]
    fn long_class_names_make_valid_policy_names() {
        let long = "c".repeat(100);
        let name = class_policy_name(&long);
        assert!(name.len() <= 253 && !name.contains('_'), "{name}");
        assert_eq!(class_policy_name("lab"), "myownshell-shells-lab");
    }
}
