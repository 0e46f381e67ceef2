//! A real control plane (etcd + kube-apiserver) on free 127.0.0.1 ports, like
//! controller-runtime's envtest: RBAC on, service-account tokens real, the CRD installed.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use kube::{Client, Config};
use myownshell_certs::pki::{CertificateAuthority, CertifiedKeyPem, LeafSpec, generate_signing_key};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use secrecy::SecretString;

use crate::assets::{self, Assets, ETCD_VERSION, KUBERNETES_VERSION};
use crate::kubectl::Kubectl;
use crate::ports::free_port;
use crate::process::{ManagedProcess, ProcessSpec, log_tail};
use crate::wait::eventually;

const CERT_VALIDITY: Duration = Duration::from_secs(7 * 86_400);
const START_TIMEOUT: Duration = Duration::from_secs(90);
const STOP_GRACE: Duration = Duration::from_secs(10);
/// The admin identity: `system:masters` bypasses RBAC, like envtest's admin user.
pub const ADMIN_USER: &str = "myownshell-envtest-admin";
/// Field manager the harness uses for its own server-side applies.
const HARNESS_MANAGER: &str = "myownshell-envtest";

/// Why the control plane, or a process a test starts against it, could not be started or used.
/// Each message stands on its own in a test failure: callers print it as it is.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The etcd or kube-apiserver binary was not found; the message says where it was looked
    /// for and how to get it (see [`assets::locate`]).
    #[error("{0}")]
    Assets(String),
    /// A file or directory could not be read or written, no free port was found, or a child
    /// process could not be started or stopped.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `starting etcd` or `writing <path>`.
        context: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Generating the control plane's CAs, certificates or service-account signing key failed.
    #[error("certificates: {0}")]
    Pki(#[from] myownshell_certs::pki::PkiError),
    /// A client could not be built, or an apiserver call failed (installing the CRDs, or a test
    /// helper's, e.g. creating webhook configurations).
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    /// Anything else that keeps things from coming up: kube-apiserver not ready in time (the
    /// message holds the tail of both logs), a CRD that does not parse or never becomes
    /// Established, a kubeconfig that cannot be serialized. Test helpers starting other
    /// processes (the webhook's, in the tests crate) report their own failures with it too.
    #[error("{0}")]
    Start(String),
}

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let context = context.into();
    move |source| HarnessError::Io { context, source }
}

/// PEM material of one control plane.
#[derive(Debug)]
struct Pki {
    serving_ca: CertificateAuthority,
    client_ca: CertificateAuthority,
    admin: CertifiedKeyPem,
}

/// Files of one run, under `target/envtest/run-<pid>-<n>/` (kept for post-mortems).
#[derive(Debug, Clone)]
pub struct Layout {
    /// The run directory. Tests put their own processes' logs here too, so a failed run leaves
    /// everything in one place.
    pub dir: PathBuf,
}

impl Layout {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    /// etcd's `--data-dir` (`etcd-data/`): the cluster's whole state, kept across apiserver
    /// restarts.
    pub fn etcd_data(&self) -> PathBuf {
        self.path("etcd-data")
    }
    /// `etcd.log`: etcd's stdout and stderr (warnings and errors only).
    pub fn etcd_log(&self) -> PathBuf {
        self.path("etcd.log")
    }
    /// `kube-apiserver.log`: kube-apiserver's stdout and stderr, appended to by every
    /// [`ControlPlane::start_apiserver`].
    pub fn apiserver_log(&self) -> PathBuf {
        self.path("kube-apiserver.log")
    }
    /// `kubeconfig`: the admin kubeconfig (owner-only, it holds the admin's key), the file
    /// [`ControlPlane::kubeconfig_path`] names.
    pub fn kubeconfig(&self) -> PathBuf {
        self.path("kubeconfig")
    }
}

/// How a control plane is laid out. The default is the API-only plane of most tests: bound to
/// 127.0.0.1, no node, RBAC only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The address kube-apiserver binds to and advertises (the `kubernetes` Service's endpoint).
    /// A cluster with nodes binds to the host's end of the cluster network, which pods reach.
    pub address: Ipv4Addr,
    /// `--service-cluster-ip-range`. Its first address is the `kubernetes` Service's ClusterIP,
    /// which the serving certificate names, so pods can verify the apiserver through it.
    pub service_cidr: Ipv4Net,
    /// A kubelet will join: Node authorization and NodeRestriction, the ServiceAccount
    /// admission plugin (pods get token volumes; a controller-manager creates the `default`
    /// ServiceAccounts it needs), a client certificate for calling kubelets (exec, logs), and
    /// endpoint routing to webhook and aggregated Services (see [`crate::node`] for why).
    pub node: bool,
    /// More kube-apiserver flags, after the harness's own (e.g. how fast a cluster of several
    /// nodes evicts the pods of a lost one, see [`crate::node::lifecycle`]).
    pub apiserver_args: Vec<String>,
}

/// An IPv4 network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Net {
    /// The network address.
    pub network: Ipv4Addr,
    /// The prefix length.
    pub prefix: u8,
}

impl Ipv4Net {
    /// The `n`th address of the network (`nth(1)` is the first usable one).
    pub fn nth(&self, n: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + n)
    }
}

impl std::fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            address: Ipv4Addr::LOCALHOST,
            service_cidr: Ipv4Net { network: Ipv4Addr::new(10, 0, 0, 0), prefix: 24 },
            node: false,
            apiserver_args: Vec::new(),
        }
    }
}

/// Ports and files kube-apiserver is started with.
#[derive(Debug, Clone)]
pub(crate) struct ApiserverConfig {
    /// `--secure-port` on 127.0.0.1; kept, so a restarted apiserver has the same URL.
    pub port: u16,
    /// etcd's client URL, `http://127.0.0.1:PORT`.
    pub etcd_url: String,
    /// Where the serving certificate and key, the client CA and the service-account key pair
    /// were written at start.
    pub pki_dir: PathBuf,
    /// Address, service range and whether a node joins.
    pub options: Options,
}

/// The kube-apiserver command line (a pure function so it can be read and tested).
pub(crate) fn apiserver_args(cfg: &ApiserverConfig) -> Vec<String> {
    let pki = |f: &str| cfg.pki_dir.join(f).display().to_string();
    let address = cfg.options.address;
    let issuer = format!("https://{address}:{}", cfg.port);
    let mut args = vec![
        format!("--etcd-servers={}", cfg.etcd_url),
        format!("--bind-address={address}"),
        format!("--advertise-address={address}"),
        format!("--secure-port={}", cfg.port),
        format!("--cert-dir={}", cfg.pki_dir.display()),
        format!("--tls-cert-file={}", pki("apiserver.crt")),
        format!("--tls-private-key-file={}", pki("apiserver.key")),
        format!("--client-ca-file={}", pki("client-ca.crt")),
        // Real bound service-account tokens: TokenRequest signs with this key, TokenReview
        // verifies with it, and the default audience is the issuer.
        format!("--service-account-issuer={issuer}"),
        format!("--service-account-key-file={}", pki("sa.pub")),
        format!("--service-account-signing-key-file={}", pki("sa.key")),
        format!("--api-audiences={issuer}"),
        format!("--admission-control-config-file={}", pki(ADMISSION_CONFIG)),
        format!("--service-cluster-ip-range={}", cfg.options.service_cidr),
        "--allow-privileged=true".into(),
        "--profiling=false".into(),
        "--v=1".into(),
    ];
    if cfg.options.node {
        args.extend([
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            format!("--kubelet-client-certificate={}", pki("kubelet-client.crt")),
            format!("--kubelet-client-key={}", pki("kubelet-client.key")),
            format!("--kubelet-certificate-authority={}", pki("serving-ca.crt")),
            "--kubelet-preferred-address-types=InternalIP".into(),
            // The apiserver runs on the host, outside the node's network namespace where
            // kube-proxy makes ClusterIPs work: it calls webhook Services at their endpoints.
            "--enable-aggregator-routing=true".into(),
        ]);
    } else {
        args.extend([
            "--authorization-mode=RBAC".into(),
            // No controller-manager runs here, so nothing would create the `default`
            // ServiceAccount that this plugin insists on (envtest disables it likewise).
            "--disable-admission-plugins=ServiceAccount".into(),
        ]);
    }
    args.extend(cfg.options.apiserver_args.iter().cloned());
    args
}

/// The etcd command line.
pub(crate) fn etcd_args(data_dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    vec![
        format!("--data-dir={}", data_dir.display()),
        "--name=envtest".into(),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=envtest={peer}"),
        // Test data is thrown away; fsync would only slow every write down.
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ]
}

/// One running control plane. Children die with the process (see [`crate::process`]).
#[derive(Debug)]
pub struct ControlPlane {
    layout: Layout,
    assets: Assets,
    pki: Pki,
    apiserver_config: ApiserverConfig,
    url: String,
    etcd: Mutex<ManagedProcess>,
    apiserver: Mutex<Option<ManagedProcess>>,
    startup: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test must not poison the shared control plane for the others.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn pem_to_der(pem: &str) -> Result<Vec<u8>, HarnessError> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map(|der| der.to_vec())
        .map_err(|e| HarnessError::Start(format!("bad PEM certificate: {e}")))
}

impl ControlPlane {
    /// Start etcd and kube-apiserver, wait for `/readyz`, write a kubeconfig, install the CRD.
    pub async fn start() -> Result<Self, HarnessError> {
        Self::start_with(assets::locate().map_err(HarnessError::Assets)?).await
    }

    /// [`ControlPlane::start`] with explicitly given binaries.
    pub async fn start_with(assets: Assets) -> Result<Self, HarnessError> {
        Self::start_in(assets, Options::default(), new_run_dir()?).await
    }

    /// A control plane laid out as `options` say, with its files in `run_dir` (made by the
    /// caller, e.g. [`crate::node::Cluster`], which puts the node's files next to it).
    pub async fn start_in(assets: Assets, options: Options, run_dir: PathBuf) -> Result<Self, HarnessError> {
        let started = Instant::now();
        let layout = Layout { dir: run_dir };
        let pki_dir = layout.path("pki");
        std::fs::create_dir_all(&pki_dir).map_err(io_err("creating the pki directory"))?;
        let pki = write_pki(&pki_dir, &options)?;

        let (etcd_port, etcd_peer) =
            (free_port().map_err(io_err("free port"))?, free_port().map_err(io_err("free port"))?);
        let etcd = ManagedProcess::spawn(ProcessSpec::new("etcd", &assets.etcd, layout.etcd_log()).args(etcd_args(
            &layout.etcd_data(),
            etcd_port,
            etcd_peer,
        )))
        .map_err(io_err("starting etcd"))?;

        let port = free_port().map_err(io_err("free port"))?;
        let url = format!("https://{}:{port}", options.address);
        let apiserver_config =
            ApiserverConfig { port, etcd_url: format!("http://127.0.0.1:{etcd_port}"), pki_dir, options };
        let mut cp = Self {
            layout,
            assets,
            pki,
            apiserver_config,
            url,
            etcd: Mutex::new(etcd),
            apiserver: Mutex::new(None),
            startup: Duration::ZERO,
        };
        cp.write_kubeconfig()?;
        cp.start_apiserver().await?;
        cp.install_crds().await?;
        cp.startup = started.elapsed();
        Ok(cp)
    }

    /// (Re)start kube-apiserver on the same port and etcd, and wait until it is ready.
    pub async fn start_apiserver(&self) -> Result<(), HarnessError> {
        let spec = ProcessSpec::new("kube-apiserver", &self.assets.kube_apiserver, self.layout.apiserver_log())
            .args(apiserver_args(&self.apiserver_config));
        let process = ManagedProcess::spawn(spec).map_err(io_err("starting kube-apiserver"))?;
        *lock(&self.apiserver) = Some(process);
        self.wait_ready().await
    }

    /// Stop kube-apiserver (SIGTERM, then SIGKILL), leaving etcd and all data in place.
    pub fn stop_apiserver(&self) -> Result<(), HarnessError> {
        if let Some(mut process) = lock(&self.apiserver).take() {
            process.stop(STOP_GRACE).map_err(io_err("stopping kube-apiserver"))?;
        }
        Ok(())
    }

    async fn wait_ready(&self) -> Result<(), HarnessError> {
        let client = self.client()?;
        let result = eventually("kube-apiserver /readyz", START_TIMEOUT, || {
            let client = client.clone();
            async move {
                if let Some(exit) = self.exited_child() {
                    // Not worth polling further; surface it through the same error path.
                    return Ok(Err(exit));
                }
                let request = http::Request::get("/readyz").body(Vec::new()).map_err(|e| e.to_string())?;
                client.request_text(request).await.map(|_| Ok(())).map_err(|e| e.to_string())
            }
        })
        .await;
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(exit)) | Err(exit) => Err(HarnessError::Start(format!(
                "kube-apiserver did not become ready: {exit}\n--- etcd log ({}) ---\n{}\n--- kube-apiserver log ({}) ---\n{}",
                self.layout.etcd_log().display(),
                log_tail(&self.layout.etcd_log(), 15),
                self.layout.apiserver_log().display(),
                log_tail(&self.layout.apiserver_log(), 30),
            ))),
        }
    }

    /// A description of a child that has exited, if any.
    fn exited_child(&self) -> Option<String> {
        if let Some(status) = lock(&self.etcd).exit_status() {
            return Some(format!("etcd exited ({status})"));
        }
        lock(&self.apiserver)
            .as_mut()
            .and_then(|p| p.exit_status())
            .map(|status| format!("kube-apiserver exited ({status})"))
    }

    fn write_kubeconfig(&self) -> Result<(), HarnessError> {
        write_kubeconfig(&self.layout.kubeconfig(), &self.kubeconfig())
    }

    /// An admin kubeconfig (client certificate in `system:masters`).
    pub fn kubeconfig(&self) -> Kubeconfig {
        let name = "envtest".to_owned();
        Kubeconfig {
            clusters: vec![NamedCluster {
                name: name.clone(),
                cluster: Some(Cluster {
                    server: Some(self.url.clone()),
                    certificate_authority_data: Some(BASE64.encode(self.pki.serving_ca.cert_pem())),
                    ..Cluster::default()
                }),
                ..NamedCluster::default()
            }],
            auth_infos: vec![NamedAuthInfo {
                name: name.clone(),
                auth_info: Some(AuthInfo {
                    client_certificate_data: Some(BASE64.encode(&self.pki.admin.cert_pem)),
                    client_key_data: Some(SecretString::from(BASE64.encode(&self.pki.admin.key_pem))),
                    ..AuthInfo::default()
                }),
                ..NamedAuthInfo::default()
            }],
            contexts: vec![NamedContext {
                name: name.clone(),
                context: Some(Context { cluster: name.clone(), user: Some(name.clone()), ..Context::default() }),
                ..NamedContext::default()
            }],
            current_context: Some(name),
            ..Kubeconfig::default()
        }
    }

    /// A kubeconfig for this control plane that authenticates with a bearer token (e.g. a
    /// ServiceAccount's), for running a binary as that identity.
    pub fn kubeconfig_for_token(&self, token: &str) -> Kubeconfig {
        let mut kubeconfig = self.kubeconfig();
        for named in &mut kubeconfig.auth_infos {
            named.auth_info =
                Some(AuthInfo { token: Some(SecretString::from(token.to_owned())), ..AuthInfo::default() });
        }
        kubeconfig
    }

    fn base_config(&self) -> Result<Config, HarnessError> {
        let uri = self.url.parse().map_err(|e| HarnessError::Start(format!("bad apiserver url {}: {e}", self.url)))?;
        let mut config = Config::new(uri);
        config.root_cert = Some(vec![pem_to_der(self.pki.serving_ca.cert_pem())?]);
        config.connect_timeout = Some(Duration::from_secs(5));
        // Counted from the request's last write, as the binaries' clients count theirs: counted
        // from when a pooled connection went idle, a connection idle for nearly 30 s was handed
        // to a request whose timeout then fired at once, and 4, later 2, of the controller
        // bench's start patches failed (`SendRequest`) in 2 of 7 runs of `cargo xtask bench
        // controller --objects 1000 --churn-seconds 0 --stops 500 --stop-rate 100`.
        Ok(myownshell_runtime::client::with_read_timeout(config, Some(READ_TIMEOUT)))
    }

    /// A client acting as the cluster admin. Needs a tokio runtime (each test has its own).
    pub fn client(&self) -> Result<Client, HarnessError> {
        let mut config = self.base_config()?;
        config.auth_info.client_certificate_data = Some(BASE64.encode(&self.pki.admin.cert_pem));
        config.auth_info.client_key_data = Some(SecretString::from(BASE64.encode(&self.pki.admin.key_pem)));
        Ok(Client::try_from(config)?)
    }

    /// A client that authenticates with a bearer token (e.g. a ServiceAccount's).
    pub fn client_with_token(&self, token: &str) -> Result<Client, HarnessError> {
        let mut config = self.base_config()?;
        config.auth_info.token = Some(SecretString::from(token.to_owned()));
        Ok(Client::try_from(config)?)
    }

    /// A client certificate for `user` in `groups`, from the apiserver's client CA.
    fn client_certificate(&self, user: &str, groups: &[&str]) -> Result<CertifiedKeyPem, HarnessError> {
        let groups = groups.iter().map(|g| (*g).to_owned()).collect();
        Ok(self.pki.client_ca.issue(&LeafSpec::client(user, groups, CERT_VALIDITY))?)
    }

    /// A client with a client certificate for `user` in `groups`, issued by the apiserver's client CA.
    pub fn client_as_user(&self, user: &str, groups: &[&str]) -> Result<Client, HarnessError> {
        let cert = self.client_certificate(user, groups)?;
        let mut config = self.base_config()?;
        config.auth_info.client_certificate_data = Some(BASE64.encode(&cert.cert_pem));
        config.auth_info.client_key_data = Some(SecretString::from(BASE64.encode(&cert.key_pem)));
        Ok(Client::try_from(config)?)
    }

    /// Install (or put back) the CRDs of `config/crd/bases` and wait until they are Established.
    pub async fn install_crds(&self) -> Result<(), HarnessError> {
        let dir = assets::workspace_root().join("config/crd/bases");
        let client = self.client()?;
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let entries = std::fs::read_dir(&dir).map_err(io_err(format!("reading {}", dir.display())))?;
        let mut names = Vec::new();
        for entry in entries {
            let path = entry.map_err(io_err("listing CRDs"))?.path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(io_err(format!("reading {}", path.display())))?;
            let crd: CustomResourceDefinition = serde_saphyr::from_str(&text)
                .map_err(|e| HarnessError::Start(format!("{} is not a CRD: {e}", path.display())))?;
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.patch(&name, &PatchParams::apply(HARNESS_MANAGER).force(), &Patch::Apply(&crd)).await?;
            names.push(name);
        }
        for name in names {
            eventually(&format!("CRD {name} to be Established"), START_TIMEOUT, || {
                let api = api.clone();
                let name = name.clone();
                async move {
                    let crd = api.get(&name).await.map_err(|e| e.to_string())?;
                    let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                    match conditions.iter().find(|c| c.type_ == "Established") {
                        Some(c) if c.status == "True" => Ok(()),
                        other => Err(format!("{other:?}")),
                    }
                }
            })
            .await
            .map_err(HarnessError::Start)?;
        }
        Ok(())
    }

    /// Process ids of etcd and (if running) kube-apiserver.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = vec![lock(&self.etcd).pid()];
        pids.extend(lock(&self.apiserver).as_ref().map(ManagedProcess::pid));
        pids
    }

    /// The apiserver's base URL, `https://ADDRESS:PORT` (also the service-account issuer).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The apiserver's port on 127.0.0.1; the same after [`ControlPlane::stop_apiserver`] and
    /// [`ControlPlane::start_apiserver`].
    pub fn port(&self) -> u16 {
        self.apiserver_config.port
    }

    /// The CA that signed the apiserver's serving certificate; a node's kubelet serves with a
    /// certificate of the same CA, which the apiserver is told to trust.
    pub fn serving_ca(&self) -> &CertificateAuthority {
        &self.pki.serving_ca
    }

    /// The CA the apiserver (and a kubelet) accept client certificates of.
    pub fn client_ca(&self) -> &CertificateAuthority {
        &self.pki.client_ca
    }

    /// Where the control plane's certificates and keys are (`pki/` in the run directory):
    /// `serving-ca.crt`, `client-ca.crt`, `sa.key`, `sa.pub`, …
    pub fn pki_dir(&self) -> &Path {
        &self.apiserver_config.pki_dir
    }

    /// The CA of the client certificate the apiserver presents to admission webhooks that ask for
    /// one (a webhook's `--apiserver-client-ca-file`).
    pub fn webhook_client_ca_file(&self) -> PathBuf {
        self.pki_dir().join(WEBHOOK_CLIENT_CA)
    }

    /// Address and service range the apiserver was started with.
    pub fn options(&self) -> &Options {
        &self.apiserver_config.options
    }

    /// A kubeconfig for a client certificate of `user` in `groups` (for a component such as a
    /// kubelet or kube-scheduler, run as its own identity).
    pub fn kubeconfig_for_user(&self, user: &str, groups: &[&str]) -> Result<Kubeconfig, HarnessError> {
        let cert = self.client_certificate(user, groups)?;
        let mut kubeconfig = self.kubeconfig();
        for named in &mut kubeconfig.auth_infos {
            named.auth_info = Some(AuthInfo {
                client_certificate_data: Some(BASE64.encode(&cert.cert_pem)),
                client_key_data: Some(SecretString::from(BASE64.encode(&cert.key_pem))),
                ..AuthInfo::default()
            });
        }
        Ok(kubeconfig)
    }

    /// PEM of the CA that signed the apiserver's serving certificate.
    pub fn ca_pem(&self) -> &str {
        self.pki.serving_ca.cert_pem()
    }

    /// The service-account issuer (also the default token audience).
    pub fn service_account_issuer(&self) -> String {
        self.url.clone()
    }

    /// The file holding [`ControlPlane::kubeconfig`], for processes a test starts as the admin
    /// (`--kubeconfig` or `KUBECONFIG`).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.layout.kubeconfig()
    }

    /// `kubectl` as the admin.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(self.layout.kubeconfig())
    }

    /// The run directory and the files in it, e.g. to put a test's own logs next to the
    /// control plane's.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// How long [`ControlPlane::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// One line describing this control plane.
    pub fn summary(&self) -> String {
        format!(
            "control plane ready in {:.1?}: kube-apiserver v{KUBERNETES_VERSION} at {}, etcd v{ETCD_VERSION}; logs in {}",
            self.startup,
            self.url,
            self.layout.dir.display()
        )
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // apiserver first, so it does not log a storm of etcd errors.
        if let Some(mut p) = lock(&self.apiserver).take() {
            let _ = p.stop(STOP_GRACE);
        }
        let _ = lock(&self.etcd).stop(STOP_GRACE);
    }
}

/// Write a kubeconfig file readable by its owner only (it holds credentials).
pub fn write_kubeconfig(path: &Path, kubeconfig: &Kubeconfig) -> Result<(), HarnessError> {
    let yaml = serde_saphyr::to_string(kubeconfig)
        .map_err(|e| HarnessError::Start(format!("serializing the kubeconfig: {e}")))?;
    write_private(path, &yaml)
}

/// Write `contents` to `path`, readable by its owner only (keys, tokens, kubeconfigs).
pub fn write_private(path: &Path, contents: &str) -> Result<(), HarnessError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err(format!("writing {}", path.display())))?;
    file.write_all(contents.as_bytes()).map_err(io_err(format!("writing {}", path.display())))
}

fn write_pki(dir: &Path, options: &Options) -> Result<Pki, HarnessError> {
    let serving_ca = CertificateAuthority::generate("myownshell-envtest-serving-ca", CERT_VALIDITY)?;
    let client_ca = CertificateAuthority::generate("myownshell-envtest-client-ca", CERT_VALIDITY)?;
    let mut ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V4(options.address)];
    // Pods reach the apiserver through the `kubernetes` Service's ClusterIP.
    ips.push(IpAddr::V4(options.service_cidr.nth(1)));
    ips.dedup();
    let serving = serving_ca.issue(&LeafSpec::server(
        "kube-apiserver",
        vec!["localhost".into(), "kubernetes".into(), "kubernetes.default".into(), "kubernetes.default.svc".into()],
        ips,
        CERT_VALIDITY,
    ))?;
    if options.node {
        // kubeadm's apiserver-kubelet-client: what the apiserver shows a kubelet for exec and logs.
        let kubelet_client = client_ca.issue(&LeafSpec::client(
            "kube-apiserver-kubelet-client",
            vec!["system:masters".into()],
            CERT_VALIDITY,
        ))?;
        write_private(&dir.join("kubelet-client.crt"), &kubelet_client.cert_pem)?;
        write_private(&dir.join("kubelet-client.key"), &kubelet_client.key_pem)?;
    }
    write_webhook_client(dir)?;
    let admin = client_ca.issue(&LeafSpec::client(ADMIN_USER, vec!["system:masters".into()], CERT_VALIDITY))?;
    let (sa_key, sa_pub) = generate_signing_key()?;
    for (name, contents) in [
        ("serving-ca.crt", serving_ca.cert_pem()),
        ("apiserver.crt", serving.cert_pem.as_str()),
        ("apiserver.key", serving.key_pem.as_str()),
        ("client-ca.crt", client_ca.cert_pem()),
        ("sa.key", sa_key.as_str()),
        ("sa.pub", sa_pub.as_str()),
    ] {
        write_private(&dir.join(name), contents)?;
    }
    Ok(Pki { serving_ca, client_ca, admin })
}

/// The apiserver's identity towards admission webhooks, as a cluster administrator configures it
/// (kube-apiserver's `--admission-control-config-file`): a client certificate from a CA of its own
/// (`webhook-client-ca.crt`, [`ControlPlane::webhook_client_ca_file`]), presented to every webhook
/// that asks for one (the kubeconfig's user `*`). A webhook that does not ask never sees it.
fn write_webhook_client(dir: &Path) -> Result<(), HarnessError> {
    let ca = CertificateAuthority::generate("myownshell-envtest-webhook-client-ca", CERT_VALIDITY)?;
    let leaf = ca.issue(&LeafSpec::client("kube-apiserver-webhook-client", vec![], CERT_VALIDITY))?;
    write_private(&dir.join(WEBHOOK_CLIENT_CA), ca.cert_pem())?;
    write_private(&dir.join("webhook-client.crt"), &leaf.cert_pem)?;
    write_private(&dir.join("webhook-client.key"), &leaf.key_pem)?;
    let path = |f: &str| dir.join(f).display().to_string();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nusers:\n  - name: \"*\"\n    user:\n      client-certificate: {}\n      client-key: {}\n",
        path("webhook-client.crt"),
        path("webhook-client.key")
    );
    write_private(&dir.join("webhook-client.kubeconfig"), &kubeconfig)?;
    let plugin = |name: &str| {
        format!(
            "  - name: {name}\n    configuration:\n      apiVersion: apiserver.config.k8s.io/v1\n      \
             kind: WebhookAdmissionConfiguration\n      kubeConfigFile: {}\n",
            path("webhook-client.kubeconfig")
        )
    };
    let admission = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
        plugin("ValidatingAdmissionWebhook"),
        plugin("MutatingAdmissionWebhook")
    );
    write_private(&dir.join(ADMISSION_CONFIG), &admission)
}

/// The CA of the apiserver's client certificate towards webhooks, in the pki directory.
const WEBHOOK_CLIENT_CA: &str = "webhook-client-ca.crt";
/// The apiserver's `--admission-control-config-file`, in the pki directory.
const ADMISSION_CONFIG: &str = "admission.yaml";

/// Runs kept under `target/envtest/` for post-mortems; older ones of dead processes are pruned.
const RUNS_KEPT: usize = 8;

/// A new run directory `target/envtest/run-<pid>-<n>/`; runs of dead processes beyond the newest
/// few are pruned first.
pub fn new_run_dir() -> Result<PathBuf, HarnessError> {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let root = assets::target_dir().join("envtest");
    std::fs::create_dir_all(&root).map_err(io_err(format!("creating {}", root.display())))?;
    prune_runs(&root);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = root.join(format!("run-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
    Ok(dir)
}

/// Remove the oldest run directories whose process is gone, keeping the newest [`RUNS_KEPT`]
/// without their nodes' images (a test binary's shared cluster is never dropped, so nothing
/// else removes them: 0.9 GiB a node).
fn prune_runs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    let mut dead: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid: u32 = name.strip_prefix("run-")?.split('-').next()?.parse().ok()?;
            let alive = Path::new(&format!("/proc/{pid}")).exists();
            let modified = e.metadata().and_then(|m| m.modified()).ok()?;
            (!alive).then(|| (modified, e.path()))
        })
        .collect();
    dead.sort();
    let excess = dead.len().saturating_sub(RUNS_KEPT);
    for (n, (_, path)) in dead.into_iter().enumerate() {
        if n < excess {
            let _ = std::fs::remove_dir_all(path);
        } else {
            discard_node_images(&path);
        }
    }
}

/// Remove the images of every node of a run whose process is gone (`node/`, `node-2/`, …).
fn discard_node_images(run: &Path) {
    let Ok(entries) = std::fs::read_dir(run) else { return };
    for entry in entries.filter_map(Result::ok) {
        if entry.file_name().to_string_lossy().starts_with("node") && entry.path().is_dir() {
            let _ = std::fs::remove_dir_all(crate::node::config::containerd_root_in(&entry.path()));
        }
    }
}

/// The control plane shared by every test in this test binary, started on first use. If it
/// cannot start, every test that asks for it fails with the same reason: no test skips.
pub fn shared() -> &'static ControlPlane {
    static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    let result =
        SHARED.get_or_init(|| start_shared("control plane", ControlPlane::start, |cp: &ControlPlane| cp.summary()));
    match result {
        Ok(cp) => cp,
        Err(e) => panic!("envtest control plane unavailable: {e}"),
    }
}

/// A control plane started with `options()`, shared by every test of this test binary that
/// asks for the same `key` (e.g. one with an alpha feature gate on, which the others must not
/// see). Started on first use, and failing every test that asks when it cannot start, as
/// [`shared`] does.
pub fn shared_with(key: &'static str, options: fn() -> Options) -> &'static ControlPlane {
    type Planes = std::collections::HashMap<&'static str, &'static Result<ControlPlane, String>>;
    static PLANES: OnceLock<Mutex<Planes>> = OnceLock::new();
    let mut planes = lock(PLANES.get_or_init(Default::default));
    let result = *planes.entry(key).or_insert_with(|| {
        let start = move || async move {
            ControlPlane::start_in(assets::locate().map_err(HarnessError::Assets)?, options(), new_run_dir()?).await
        };
        // Kept for the test binary's life, as the shared plane is.
        Box::leak(Box::new(start_shared(key, start, |cp: &ControlPlane| cp.summary())))
    });
    drop(planes);
    match result {
        Ok(cp) => cp,
        Err(e) => panic!("envtest control plane {key} unavailable: {e}"),
    }
}

/// Start something every test of a test binary shares, on a thread with a tokio runtime of its
/// own (tests run inside their own runtimes, which end with them), and say how it went in one
/// line straight to stderr, past the test harness's output capture: once per test binary.
pub(crate) fn start_shared<T, Fut>(
    what: &str,
    start: impl FnOnce() -> Fut + Send + 'static,
    summary: impl Fn(&T) -> String,
) -> Result<T, String>
where
    T: Send + 'static,
    Fut: std::future::Future<Output = Result<T, HarnessError>>,
{
    let started = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        runtime.block_on(start()).map_err(|e| e.to_string())
    })
    .join()
    .unwrap_or_else(|_| Err(format!("the {what} start thread panicked")));
    use std::io::Write;
    let line = match &started {
        Ok(started) => format!("envtest: {}\n", summary(started)),
        Err(e) => format!("envtest: {what} failed to start: {e}\n"),
    };
    let _ = std::io::stderr().write_all(line.as_bytes());
    started
}

/// How long a harness client waits for a response's first byte.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
