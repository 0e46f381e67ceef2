//! NetworkPolicy enforced on the harness's nodes (`myownshell_envtest::node::network_policy`):
//! kube-router's policy controller in each node admits and refuses pod traffic as the policies
//! say, within and across nodes and through a ClusterIP, follows their changes, keeps its rules
//! inside the nodes, and leaves nothing behind.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use myownshell_envtest::node::{self, network_policy};
use myownshell_envtest::{Kubectl, eventually};
use myownshell_tests::doors::{Cell, Door, Person, table};
use myownshell_tests::webhooks::{InstalledWebhooks, Target, WebhookOptions, WebhookProcess};

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long a policy created or deleted may take to be enforced: kube-router's watch, a full
/// sync of the node's filter table.
const ENFORCED_TIMEOUT: Duration = Duration::from_secs(60);

/// The probe image's archive (busybox's httpd and curl), built as the node suite builds it: once
/// per test binary, since the tests here run at once and would build it in the same folder.
fn probe_archive() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let images = myownshell_envtest::assets::target_dir().join("images");
            let archive = images.join("probe-network-policy.tar");
            node::images::build_probe(&archive, &images.join("probe-network-policy-work")).unwrap();
            archive
        })
        .clone()
}

/// A pod of the probe image on `node` (no scheduler involved) running `script`.
fn pod(name: &str, node: &str, script: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","labels":{{"app":"{name}"}}}},"spec":{{"nodeName":"{node}","terminationGracePeriodSeconds":1,"containers":[{{"name":"c","image":"{image}","command":["sh","-c","{script}"]}}]}}}}"#,
        image = node::images::PROBE_IMAGE
    )
}

/// A NetworkPolicy `name` over every pod of its namespace.
fn policy(name: &str, spec: &str) -> String {
    format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{{"name":"{name}"}},"spec":{{"podSelector":{{}},{spec}}}}}"#
    )
}

/// A client pod and where it is.
struct Client {
    ns: String,
    name: String,
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.ns, self.name)
    }
}

/// What one `curl` from a client saw.
#[derive(Debug)]
enum Seen {
    /// The server answered with this body.
    Answered(String),
    /// The connection failed: curl's own words (exit 7, refused; 28, timed out).
    Refused(String),
}

/// `curl http://<target>/` from `client`; an error only when kubectl or curl failed otherwise
/// (the pod not there, a bad command), which says nothing about the network.
async fn curl(kubectl: &Kubectl, client: &Client, target: &str) -> Result<Seen, String> {
    let url = format!("http://{target}/");
    let out = kubectl.run(&["exec", "-n", &client.ns, &client.name, "--", "curl", "-sS", "-m", "3", &url]).await?;
    let said = out.stderr.trim();
    if out.success {
        Ok(Seen::Answered(out.stdout.trim().to_owned()))
    } else if said.contains("curl: (7)") || said.contains("curl: (28)") {
        Ok(Seen::Refused(said.lines().find(|l| l.starts_with("curl:")).unwrap_or(said).to_owned()))
    } else {
        Err(format!("{client}: {}{said}", out.stdout))
    }
}

/// Poll until every one of `clients` gets the server's answer (`expected`) at `target`; the time
/// it took.
async fn all_reach(kubectl: &Kubectl, clients: &[&Client], target: &str, expected: &str) -> Duration {
    let started = Instant::now();
    for client in clients {
        eventually(&format!("{client} reaches {target}"), ENFORCED_TIMEOUT, || async {
            match curl(kubectl, client, target).await? {
                Seen::Answered(body) if body == expected => Ok(()),
                other => Err(format!("saw {other:?}")),
            }
        })
        .await
        .unwrap();
    }
    started.elapsed()
}

/// Poll until every one of `clients` is refused at `target`; the time it took, and what curl
/// said last.
async fn all_refused(kubectl: &Kubectl, clients: &[&Client], target: &str) -> (Duration, String) {
    let started = Instant::now();
    let mut said = String::new();
    for client in clients {
        said = eventually(&format!("{client} refused at {target}"), ENFORCED_TIMEOUT, || async {
            match curl(kubectl, client, target).await? {
                Seen::Refused(said) => Ok(said),
                other => Err(format!("saw {other:?}")),
            }
        })
        .await
        .unwrap();
    }
    (started.elapsed(), said)
}

/// One look, for a client that a policy already in force refuses: still refused.
async fn still_refused(kubectl: &Kubectl, client: &Client, target: &str) {
    let seen = curl(kubectl, client, target).await.unwrap();
    assert!(matches!(seen, Seen::Refused(_)), "{client} at {target}: {seen:?}");
}

/// Two nodes enforcing NetworkPolicies. A server in one namespace on the first node; clients in
/// a second namespace on both nodes and one in a third. With no policy every client reaches the
/// server, by its address and through a ClusterIP; a default-deny of ingress in the server's
/// namespace refuses them all; a policy that admits the second namespace lets its clients in
/// again and still refuses the third's; a default-deny of egress in the second namespace refuses
/// its clients on both nodes, and deleting it lets them in again. The second node, lost and
/// back, enforces again. kube-router's chains and sets never appear on the host, and stopping
/// the cluster leaves nothing.
#[tokio::test]
async fn policies_admit_and_refuse_pod_traffic_on_both_nodes_and_leave_nothing() {
    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "before any cluster");
    let step = Instant::now();
    let options = node::ClusterOptions { nodes: 2, images: vec![probe_archive()], ..Default::default() };
    let mut cluster = node::Cluster::start(options).await.unwrap();
    eprintln!("network policy: cluster started in {:.1?}", step.elapsed());
    let step = Instant::now();
    cluster.enforce_network_policies().await.unwrap();
    eprintln!("network policy: kube-router synced on both nodes in {:.1?}: {}", step.elapsed(), cluster.summary());
    assert!(cluster.enforces_network_policies());
    let version = std::process::Command::new("iptables").arg("--version").output().unwrap();
    eprintln!("network policy: {}", String::from_utf8_lossy(&version.stdout).trim());
    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "kube-router's rules on the host");

    let names = cluster.node_names();
    let (first, second) = (names[0].as_str(), names[1].as_str());
    let client = cluster.control_plane().client().unwrap();
    let kubectl = cluster.control_plane().kubectl();
    let server_ns = myownshell_envtest::create_namespace(&client, "np-server").await.unwrap();
    let clients_ns = myownshell_envtest::create_namespace(&client, "np-clients").await.unwrap();
    let other_ns = myownshell_envtest::create_namespace(&client, "np-other").await.unwrap();
    let serve = "mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www";
    kubectl.apply(&server_ns, &pod("server", first, serve)).await.unwrap().ok().unwrap();
    let service = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"server"},"spec":{"selector":{"app":"server"},"ports":[{"port":80,"targetPort":8080}]}}"#;
    kubectl.apply(&server_ns, service).await.unwrap().ok().unwrap();
    let near = Client { ns: clients_ns.clone(), name: "near".into() };
    let far = Client { ns: clients_ns.clone(), name: "far".into() };
    let other = Client { ns: other_ns.clone(), name: "other".into() };
    for (c, on) in [(&near, first), (&far, second), (&other, second)] {
        kubectl.apply(&c.ns, &pod(&c.name, on, "exec sleep 3600")).await.unwrap().ok().unwrap();
    }
    for (ns, name) in [(&server_ns, "server"), (&clients_ns, "near"), (&clients_ns, "far"), (&other_ns, "other")] {
        wait_running(&kubectl, ns, name).await;
    }
    let jsonpath = ["get", "pod", "server", "-n", &server_ns, "-o", "jsonpath={.status.podIP}"];
    let server = format!("{}:8080", kubectl.run(&jsonpath).await.unwrap().ok().unwrap());
    let jsonpath = ["get", "service", "server", "-n", &server_ns, "-o", "jsonpath={.spec.clusterIP}"];
    let cluster_ip = format!("{}:80", kubectl.run(&jsonpath).await.unwrap().ok().unwrap());
    let everyone = [&near, &far, &other];

    // No policy: everyone gets in, by address and through the ClusterIP.
    let took = all_reach(&kubectl, &everyone, &server, "server").await;
    all_reach(&kubectl, &[&near], &cluster_ip, "server").await;
    eprintln!("network policy: no policy: {near}, {far} (other node), {other} reach {server} ({took:.1?})");

    // Default-deny of ingress in the server's namespace: everyone refused, the ClusterIP too.
    kubectl.apply(&server_ns, &policy("deny-ingress", r#""policyTypes":["Ingress"]"#)).await.unwrap().ok().unwrap();
    let (took, said) = all_refused(&kubectl, &everyone, &server).await;
    still_refused(&kubectl, &near, &cluster_ip).await;
    eprintln!("network policy: default-deny ingress enforced for all three in {took:.1?}: {said}");

    // Admit the clients' namespace: its clients get in again, the other namespace's does not.
    let admit = format!(
        r#""policyTypes":["Ingress"],"ingress":[{{"from":[{{"namespaceSelector":{{"matchLabels":{{"kubernetes.io/metadata.name":"{clients_ns}"}}}}}}],"ports":[{{"port":8080,"protocol":"TCP"}}]}}]"#
    );
    kubectl.apply(&server_ns, &policy("admit-clients", &admit)).await.unwrap().ok().unwrap();
    let took = all_reach(&kubectl, &[&near, &far], &server, "server").await;
    still_refused(&kubectl, &other, &server).await;
    eprintln!("network policy: {clients_ns} admitted in {took:.1?}; {other} still refused");

    // Default-deny of egress in the clients' namespace: refused on both nodes, at the source.
    kubectl.apply(&clients_ns, &policy("deny-egress", r#""policyTypes":["Egress"]"#)).await.unwrap().ok().unwrap();
    let (took, said) = all_refused(&kubectl, &[&near, &far], &server).await;
    eprintln!("network policy: default-deny egress enforced on both nodes in {took:.1?}: {said}");
    kubectl.run(&["delete", "networkpolicy", "deny-egress", "-n", &clients_ns]).await.unwrap().ok().unwrap();
    let took = all_reach(&kubectl, &[&near, &far], &server, "server").await;
    eprintln!("network policy: egress deny deleted, {clients_ns} reaches {server} again in {took:.1?}");

    // The second node loses power and comes back: its kube-router starts again with it
    // (`start_node` waits for its first sync), and enforces on a pod started there since.
    let step = Instant::now();
    cluster.kill_node(second).unwrap();
    cluster.start_node(second).await.unwrap();
    eprintln!("network policy: {second} killed, back and enforcing again in {:.1?}", step.elapsed());
    let back = Client { ns: clients_ns.clone(), name: "back".into() };
    kubectl.apply(&back.ns, &pod(&back.name, second, "exec sleep 3600")).await.unwrap().ok().unwrap();
    wait_running(&kubectl, &back.ns, &back.name).await;
    all_reach(&kubectl, &[&back], &server, "server").await;
    kubectl.apply(&clients_ns, &policy("deny-egress", r#""policyTypes":["Egress"]"#)).await.unwrap().ok().unwrap();
    let (took, said) = all_refused(&kubectl, &[&back], &server).await;
    eprintln!("network policy: {back} on the restarted {second} refused at the source in {took:.1?}: {said}");

    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "kube-router's rules on the host");
    let footprint = cluster.footprint();
    cluster.stop().unwrap();
    eventually("nothing of the cluster left", Duration::from_secs(30), || async {
        let left = footprint.leftovers();
        if left.is_empty() { Ok(()) } else { Err(left.join("; ")) }
    })
    .await
    .unwrap();
    assert_eq!(network_policy::host_traces().unwrap(), Vec::<String>::new(), "after the cluster");
}

/// Poll until pod `name` in `ns` is Running.
async fn wait_running(kubectl: &Kubectl, ns: &str, name: &str) {
    eventually(&format!("pod {ns}/{name} Running"), TIMEOUT, || async {
        let out = kubectl.run(&["get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}"]).await?;
        if out.stdout == "Running" { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();
}

/// The page a shell serves on 8080, and what the host's listeners answer.
const SHELL_PAGE: &str = "shell-page";
const OUTSIDE_PAGE: &str = "outside";
const METADATA_PAGE: &str = "metadata";
/// A documentation address (RFC 5737) standing for the internet, and the cloud metadata address:
/// both put on a device of the host for the test, reached from pods through the node's
/// default route.
const OUTSIDE: &str = "203.0.113.10";
const METADATA: &str = "169.254.169.254";
/// A private address on the host (a package mirror, say), which only a class opens.
const PRIVATE: &str = "192.168.77.10";
const PRIVATE_PAGE: &str = "private";

/// A device on the host holding `addresses`; deleted when dropped.
struct HostAddresses {
    link: String,
}

impl HostAddresses {
    fn add(addresses: &[&str]) -> Result<Self, String> {
        let link = format!("mosnp{}", std::process::id() % 1_000_000);
        let ip = |args: &[&str]| -> Result<(), String> {
            let out = std::process::Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
            }
        };
        // A veth pair with both ends on the host (this kernel has no dummy devices): deleting one
        // end deletes both.
        ip(&["link", "add", &link, "type", "veth", "peer", "name", &format!("{link}p")])?;
        let made = Self { link };
        for address in addresses {
            ip(&["addr", "add", &format!("{address}/32"), "dev", &made.link])?;
        }
        ip(&["link", "set", &format!("{}p", made.link), "up"])?;
        ip(&["link", "set", &made.link, "up"])?;
        Ok(made)
    }

    fn exists(link: &str) -> bool {
        std::process::Command::new("ip").args(["link", "show", link]).output().is_ok_and(|o| o.status.success())
    }
}

impl Drop for HostAddresses {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["link", "del", &self.link]).output();
    }
}

/// An HTTP listener on `address` (any port), answering every request with `body`.
async fn listen(address: &str, port: u16, body: &'static str) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind((address, port)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 1024];
                let _ = socket.read(&mut request).await;
                let answer = format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (port, task)
}

/// `GET /` of `target` (`address:port`) from the shell pod `pod` with busybox's `nc` (the shell
/// image's static `wget` cannot run): what it saw.
async fn fetch_from_shell(kubectl: &Kubectl, ns: &str, pod: &str, target: &str) -> Result<Seen, String> {
    let (address, port) = target.rsplit_once(':').ok_or(format!("{target} is not address:port"))?;
    let script = format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {address} {port}");
    let out = kubectl.run(&["exec", "-n", ns, pod, "-c", "shell", "--", "sh", "-c", &script]).await?;
    let said = out.stderr.trim();
    if out.success && out.stdout.starts_with("HTTP/") {
        let body = out.stdout.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        Ok(Seen::Answered(body.trim().to_owned()))
    } else if said.contains("can't connect") || said.contains("timed out") || (out.success && out.stdout.is_empty()) {
        Ok(Seen::Refused(said.lines().find(|l| l.starts_with("nc:")).unwrap_or(said).to_owned()))
    } else {
        Err(format!("{ns}/{pod}: {}{said}", out.stdout))
    }
}

/// Poll until the shell pod `pod` sees `want` (answered with that body, or refused when `None`).
async fn shell_sees(kubectl: &Kubectl, ns: &str, pod: &str, target: &str, want: Option<&str>) -> (Duration, String) {
    let started = Instant::now();
    let seen = eventually(&format!("shell {pod} at {target}: {want:?}"), ENFORCED_TIMEOUT, || async {
        match (fetch_from_shell(kubectl, ns, pod, target).await?, want) {
            (Seen::Answered(body), Some(w)) if body == w => Ok(body),
            (Seen::Refused(said), None) => Ok(said),
            (other, _) => Err(format!("saw {other:?}")),
        }
    })
    .await
    .unwrap();
    (started.elapsed(), seen)
}

/// A MyOwnShell `name` serving a page on 8080.
fn serving_shell(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"myownshell.io/v1alpha1","kind":"MyOwnShell","metadata":{{"name":"{name}"}},"spec":{{"size":1,"owner":"alice","command":["sh","-c","mkdir -p /tmp/www && echo {SHELL_PAGE} > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]}}}}"#
    )
}

/// The Running shell pod of `shell` in `ns`: (name, address).
async fn shell_pod(kubectl: &Kubectl, ns: &str, shell: &str) -> (String, String) {
    let selector = format!("app.kubernetes.io/instance={shell}");
    let jsonpath =
        "jsonpath={range .items[?(@.status.phase==\"Running\")]}{.metadata.name} {.status.podIP}{\"\\n\"}{end}";
    let line = eventually(&format!("shell {ns}/{shell}'s pod Running"), TIMEOUT, || async {
        let out = kubectl.run(&["get", "pods", "-n", ns, "-l", &selector, "-o", jsonpath]).await?;
        out.stdout.lines().next().map(str::to_owned).ok_or(format!("{}{}", out.stdout, out.stderr))
    })
    .await
    .unwrap();
    let (name, ip) = line.split_once(' ').unwrap();
    (name.to_owned(), ip.to_owned())
}

/// The uid of the operator's policy in `ns`, once it is there.
async fn operator_policy(kubectl: &Kubectl, ns: &str) -> String {
    eventually(&format!("the operator's NetworkPolicy in {ns}"), TIMEOUT, || async {
        let out = kubectl
            .run(&["get", "networkpolicy", "myownshell-shells", "-n", ns, "-o", "jsonpath={.metadata.uid}"])
            .await?;
        if out.success && !out.stdout.is_empty() { Ok(out.stdout) } else { Err(out.stderr) }
    })
    .await
    .unwrap()
}

/// Shells isolated by the operator's own NetworkPolicies, on a node that enforces them, with the
/// controller and the webhooks running: an editor's pod in the shell's namespace and a pod of another namespace
/// cannot open a connection to a shell's port; a pod labelled as the gateway in the operator's
/// namespace reaches every shell; a shell reaches an address outside (a documentation address
/// on the host standing for the internet) and neither the cloud metadata address nor another
/// shell; an editor's allow-all policy is refused at admission and nothing opens; a class's
/// `spec.network` opens a private address to its shells (within `--class-egress-allowed`), takes
/// public addresses away from them, and lets another namespace's pods in; a policy made before
/// its namespace was opened is left alone and told of in a Warning Event on it; the operator's
/// policy deleted or edited is put back, and is gone when the namespace is closed. Every device
/// the test adds to the host is removed, and the cluster leaves nothing.
#[tokio::test]
async fn the_operator_isolates_shells_and_an_editor_cannot_open_them() {
    use myownshell_tests::access::{install_policies, kubectl_as, namespace_editors};
    let step = Instant::now();
    let options = node::ClusterOptions { nodes: 1, images: vec![probe_archive()], ..Default::default() };
    let mut cluster = node::Cluster::start(options).await.unwrap();
    cluster.enforce_network_policies().await.unwrap();
    eprintln!("shell network: cluster enforcing NetworkPolicies in {:.1?}", step.elapsed());
    let on = cluster.node_names()[0].clone();
    let cp = cluster.control_plane();
    let (client, kubectl) = (cp.client().unwrap(), cp.kubectl());
    install_policies(&kubectl).await.unwrap();
    let shells_ns = myownshell_envtest::create_shell_namespace(&client, "sn-shells").await.unwrap();
    let system_ns = myownshell_envtest::create_namespace(&client, "sn-system").await.unwrap();
    let other_ns = myownshell_envtest::create_namespace(&client, "sn-other").await.unwrap();
    namespace_editors(&client, &shells_ns, &["carol"], &[]).await.unwrap();
    let gateway_flag = format!("--gateway-namespace={system_ns}");
    // The webhooks for the shells' namespace (defaults, the class's `use`, the connect gate), as
    // the API suites run them: a process the apiserver calls at 127.0.0.1.
    let port = myownshell_envtest::ports::free_port().unwrap();
    let base_url = format!("https://127.0.0.1:{port}");
    let target = Target { base_url, ca_bundle: None, namespace: shells_ns.clone() };
    let installed = InstalledWebhooks::install(&client, &shells_ns, &target).await.unwrap();
    let mut options = WebhookOptions::for_installed(&installed, &shells_ns, port);
    options.args = vec![format!("--apiserver-client-ca-file={}", cp.webhook_client_ca_file().display())];
    let mut webhook = WebhookProcess::spawn(cp, &options).unwrap();
    webhook.wait_ready(TIMEOUT).await.unwrap();
    let flags = ["--session-image=none", &gateway_flag, "--class-egress-allowed=192.168.77.0/24"];
    let controller = myownshell_tests::controller::ControllerProcess::start(cp, "shell-network", &flags).unwrap();
    let host = HostAddresses::add(&[OUTSIDE, METADATA, PRIVATE]).unwrap();
    let (port, outside_listener) = listen(OUTSIDE, 0, OUTSIDE_PAGE).await;
    let (_, metadata_listener) = listen(METADATA, port, METADATA_PAGE).await;
    let (_, private_listener) = listen(PRIVATE, port, PRIVATE_PAGE).await;

    let step = Instant::now();
    for shell in ["web", "peer"] {
        kubectl.apply(&shells_ns, &serving_shell(shell)).await.unwrap().ok().unwrap();
    }
    // The mutating webhook stamped the owner: the creator, not the "alice" the manifest claims.
    let owner = kubectl.run(&["get", "mos", "web", "-n", &shells_ns, "-o", "jsonpath={.spec.owner}"]).await.unwrap();
    assert!(!owner.stdout.is_empty() && owner.stdout != "alice", "the webhooks did not see the shell: {owner:?}");
    let uid = operator_policy(&kubectl, &shells_ns).await;
    let (web, web_ip) = shell_pod(&kubectl, &shells_ns, "web").await;
    let (peer, peer_ip) = shell_pod(&kubectl, &shells_ns, "peer").await;
    let editors = Client { ns: shells_ns.clone(), name: "carols".into() };
    let other = Client { ns: other_ns.clone(), name: "other".into() };
    let gateway = Client { ns: system_ns.clone(), name: "gateway".into() };
    for c in [&editors, &other] {
        kubectl.apply(&c.ns, &pod(&c.name, &on, "exec sleep 3600")).await.unwrap().ok().unwrap();
    }
    let gateway_pod = pod(&gateway.name, &on, "exec sleep 3600").replace(
        r#""labels":{"app":"gateway"}"#,
        r#""labels":{"app.kubernetes.io/name":"myownshell","app.kubernetes.io/component":"gateway"}"#,
    );
    kubectl.apply(&gateway.ns, &gateway_pod).await.unwrap().ok().unwrap();
    for c in [&editors, &other, &gateway] {
        wait_running(&kubectl, &c.ns, &c.name).await;
    }
    eprintln!(
        "shell network: two shells serving, the operator's policy {uid}, three clients in {:.1?}",
        step.elapsed()
    );

    // Into shells: only the gateway; the rows of docs/doors.yaml walked here, as their cells say.
    let web_port = format!("{web_ip}:8080");
    let peer_port = format!("{peer_ip}:8080");
    let took = all_reach(&kubectl, &[&gateway], &web_port, SHELL_PAGE).await;
    all_reach(&kubectl, &[&gateway], &peer_port, SHELL_PAGE).await;
    eprintln!("shell network: the gateway reaches both shells ({took:.1?})");
    let rows: Vec<Door> = table().unwrap().into_iter().filter(|d| d.walked == "network").collect();
    assert!(rows.iter().any(|d| d.door == "network"), "docs/doors.yaml's network row is walked here");
    for row in &rows {
        assert_eq!(
            row.door, "network",
            "docs/doors.yaml's row {} is walked here, and this test has no walk for it",
            row.door
        );
        for person in Person::ALL {
            let want = row.cell(person).unwrap_or_else(|e| panic!("docs/doors.yaml, row network: {e}"));
            let client = match (person, want) {
                (_, Cell::NotApplicable) => continue,
                (Person::Editor, _) => &editors,
                (Person::Pod, _) => &other,
                (other, _) => {
                    panic!("network, {}: only an editor's pod and another namespace's pod are walked", other.column())
                }
            };
            let seen = if want == Cell::Yes {
                all_reach(&kubectl, &[client], &web_port, SHELL_PAGE).await;
                "yes".to_owned()
            } else {
                let (_, said) = all_refused(&kubectl, &[client], &web_port).await;
                format!("no ({said})")
            };
            eprintln!("shell network: door network, {} ({client}): {seen}", person.column());
        }
    }

    // Out of a shell: the outside, not the metadata address, not another shell (which a pod that
    // is no shell's reaches: the refusals are the shells' policy's).
    all_reach(&kubectl, &[&other], &format!("{METADATA}:{port}"), METADATA_PAGE).await;
    let (took, _) = shell_sees(&kubectl, &shells_ns, &web, &format!("{OUTSIDE}:{port}"), Some(OUTSIDE_PAGE)).await;
    let (_, metadata_said) = shell_sees(&kubectl, &shells_ns, &web, &format!("{METADATA}:{port}"), None).await;
    let (_, peer_said) = shell_sees(&kubectl, &shells_ns, &web, &peer_port, None).await;
    eprintln!(
        "shell network: {web} reaches {OUTSIDE} ({took:.1?}); refused at {METADATA} ({metadata_said}) and at {peer} ({peer_said})"
    );

    // An editor's allow-all policy: refused at admission, and nothing opens.
    let allow_all = policy("allow-all", r#""policyTypes":["Ingress","Egress"],"ingress":[{}],"egress":[{}]"#);
    let args = ["apply", "-n", &shells_ns, "-f", "-"];
    let mut as_carol = myownshell_tests::access::as_user("carol", &["system:authenticated"]);
    as_carol.extend(args.iter().map(|a| (*a).to_string()));
    let as_carol: Vec<&str> = as_carol.iter().map(String::as_str).collect();
    let out = kubectl.run_with_stdin(&as_carol, Some(&allow_all)).await.unwrap();
    assert!(!out.success && out.stderr.contains("would open shells past the operator's isolation"), "{}", out.stderr);
    still_refused(&kubectl, &editors, &web_port).await;
    // Nor may she take the operator's policy away.
    let out = kubectl_as(
        &kubectl,
        "carol",
        &["system:authenticated"],
        &["delete", "networkpolicy", "myownshell-shells", "-n", &shells_ns],
    )
    .await;
    assert!(!out.success && out.stderr.contains("are the MyOwnShell operator's"), "{}", out.stderr);
    eprintln!("shell network: carol's allow-all policy refused at admission, and her pod still refused");

    // A class that narrows and widens: no public addresses, but the private address on its port,
    // and pods of the other namespace let in. Its shells are out of the namespace's policy.
    let step = Instant::now();
    let class = format!(
        r#"{{"apiVersion":"myownshell.io/v1alpha1","kind":"MyOwnShellClass","metadata":{{"name":"lab"}},"spec":{{"network":{{"publicEgress":false,"ingressFromNamespaces":["{other_ns}"],"egress":[{{"cidrs":["{PRIVATE}/32"],"ports":[{{"port":{port}}}]}}]}}}}}}"#
    );
    kubectl.apply("default", &class).await.unwrap().ok().unwrap();
    let lab_shell = serving_shell("lab").replace(r#""spec":{"size":1"#, r#""spec":{"className":"lab","size":1"#);
    kubectl.apply(&shells_ns, &lab_shell).await.unwrap().ok().unwrap();
    let (lab, lab_ip) = shell_pod(&kubectl, &shells_ns, "lab").await;
    let lab_port = format!("{lab_ip}:8080");
    let private = format!("{PRIVATE}:{port}");
    let (took, _) = shell_sees(&kubectl, &shells_ns, &lab, &private, Some(PRIVATE_PAGE)).await;
    let (_, outside_said) = shell_sees(&kubectl, &shells_ns, &lab, &format!("{OUTSIDE}:{port}"), None).await;
    let (_, web_said) = shell_sees(&kubectl, &shells_ns, &web, &private, None).await;
    all_reach(&kubectl, &[&other, &gateway], &lab_port, SHELL_PAGE).await;
    all_refused(&kubectl, &[&editors], &lab_port).await;
    eprintln!(
        "shell network: class lab: {lab} reaches {private} ({took:.1?}), refused outside ({outside_said}); {web} refused at \
         {private} ({web_said}); {other} and the gateway let in, {editors} refused ({:.1?} in all)",
        step.elapsed()
    );

    // An allow-all policy made before its namespace was opened (admission never saw it): the
    // operator does not touch it, and tells, on the policy, once the namespace is opened.
    let step = Instant::now();
    let late_ns = myownshell_envtest::create_namespace(&client, "sn-late").await.unwrap();
    kubectl.apply(&late_ns, &allow_all).await.unwrap().ok().unwrap();
    kubectl.run(&["label", "namespace", &late_ns, "myownshell.io/shells=enabled"]).await.unwrap().ok().unwrap();
    operator_policy(&kubectl, &late_ns).await;
    let told = eventually("a Warning Event on the allow-all policy", TIMEOUT, || async {
        let args = [
            "get",
            "events",
            "-n",
            &late_ns,
            "--field-selector",
            "reason=NetworkPolicyOpensShells",
            "-o",
            "jsonpath={range .items[*]}{.involvedObject.kind}/{.involvedObject.name}: {.message}{\"\\n\"}{end}",
        ];
        let out = kubectl.run(&args).await?;
        if out.stdout.contains("NetworkPolicy/allow-all") {
            Ok(out.stdout)
        } else {
            Err(format!("{}{}", out.stdout, out.stderr))
        }
    })
    .await
    .unwrap();
    let kept = kubectl.run(&["get", "networkpolicy", "allow-all", "-n", &late_ns, "-o", "name"]).await.unwrap();
    assert!(kept.success, "the operator left the allow-all policy alone: {}", kept.stderr);
    eprintln!(
        "shell network: a policy older than the namespace's opening, told in {:.1?}: {}",
        step.elapsed(),
        told.trim()
    );

    // The operator's policy deleted or edited (by an administrator): put back.
    let step = Instant::now();
    kubectl.run(&["delete", "networkpolicy", "myownshell-shells", "-n", &shells_ns]).await.unwrap().ok().unwrap();
    let back = eventually("the operator's policy put back", TIMEOUT, || async {
        let out = kubectl
            .run(&["get", "networkpolicy", "myownshell-shells", "-n", &shells_ns, "-o", "jsonpath={.metadata.uid}"])
            .await?;
        if out.success && !out.stdout.is_empty() && out.stdout != uid {
            Ok(out.stdout)
        } else {
            Err(format!("{}{}", out.stdout, out.stderr))
        }
    })
    .await
    .unwrap();
    let open = r#"{"spec":{"ingress":[{}]}}"#;
    kubectl
        .run(&["patch", "networkpolicy", "myownshell-shells", "-n", &shells_ns, "--type=merge", "-p", open])
        .await
        .unwrap()
        .ok()
        .unwrap();
    eventually("the operator's policy restored", TIMEOUT, || async {
        let out = kubectl
            .run(&[
                "get",
                "networkpolicy",
                "myownshell-shells",
                "-n",
                &shells_ns,
                "-o",
                "jsonpath={.spec.ingress[0].from[0].podSelector.matchLabels}",
            ])
            .await?;
        if out.stdout.contains("gateway") { Ok(()) } else { Err(out.stdout) }
    })
    .await
    .unwrap();
    still_refused(&kubectl, &editors, &web_port).await;
    eprintln!("shell network: deleted and put back as {back}, edited and restored, in {:.1?}", step.elapsed());

    // The namespace closed to shells: the operator's policy goes (and its shells stop).
    let step = Instant::now();
    kubectl.run(&["label", "namespace", &shells_ns, "myownshell.io/shells-"]).await.unwrap().ok().unwrap();
    eventually("the operator's policy gone with the namespace closed", TIMEOUT, || async {
        let out = kubectl.run(&["get", "networkpolicy", "-n", &shells_ns, "-o", "name"]).await?;
        if out.success && out.stdout.trim().is_empty() { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await
    .unwrap();
    eprintln!("shell network: namespace closed, the operator's policy deleted in {:.1?}", step.elapsed());

    outside_listener.abort();
    metadata_listener.abort();
    private_listener.abort();
    let link = host.link.clone();
    drop(host);
    assert!(!HostAddresses::exists(&link), "the host's device {link} is still there");
    drop(controller);
    drop(webhook);
    let footprint = cluster.footprint();
    cluster.stop().unwrap();
    eventually("nothing of the cluster left", Duration::from_secs(30), || async {
        let left = footprint.leftovers();
        if left.is_empty() { Ok(()) } else { Err(left.join("; ")) }
    })
    .await
    .unwrap();
}
