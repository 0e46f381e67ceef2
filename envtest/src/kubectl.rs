//! The real `kubectl` (`$KUBECTL`, else `/usr/bin/kubectl`, else the one on `PATH`), pointed at a
//! kubeconfig file.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

/// The kubectl binary the tests and `cargo xtask dev` use.
pub fn kubectl_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KUBECTL").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let system = Path::new("/usr/bin/kubectl");
    if system.exists() { system.to_path_buf() } else { PathBuf::from("kubectl") }
}

/// Go's garbage collector target for the tests' kubectl runs, unless `GOGC` is set: a kubectl
/// run lives a tenth of a second and collects garbage it will never need the room of. The tests
/// run kubectl about 2,700 times in `cargo xtask test`; `kubectl get ns` took 89 ms of CPU a run
/// with 400 against 108 ms with Go's default 100 (80 runs each, against a test apiserver,
/// 2026-11-30), its peak memory 51 MB against 47 MB.
const KUBECTL_GOGC: &str = "400";

/// What a kubectl run printed.
#[derive(Debug, Clone)]
pub struct KubectlOutput {
    /// Whether kubectl exited with status 0.
    pub success: bool,
    /// Its standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// Its standard error: the reason, when `success` is false.
    pub stderr: String,
}

impl KubectlOutput {
    /// `Ok(stdout)` if kubectl succeeded, else an error holding everything it printed.
    pub fn ok(self) -> Result<String, String> {
        if self.success { Ok(self.stdout) } else { Err(format!("kubectl failed: {}{}", self.stderr, self.stdout)) }
    }
}

/// `kubectl` ([`kubectl_binary`]) with a fixed kubeconfig, and its cache beside that file
/// ([`Kubectl::env`]): a test cluster's discovery is cached with the cluster and removed with it, not kept in
/// `~/.kube/cache` (1.2 GB of 441 test clusters' discovery there before), where a later cluster
/// given the same port would have read another cluster's kinds. The test cluster's admin one
/// comes from [`ControlPlane::kubectl`](crate::ControlPlane::kubectl).
#[derive(Debug, Clone)]
pub struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl runs that use the kubeconfig file at `kubeconfig` (it is not read until the first
    /// run).
    pub fn new(kubeconfig: impl Into<PathBuf>) -> Self {
        Self { kubeconfig: kubeconfig.into() }
    }

    /// Where kubectl keeps its discovery and HTTP cache: `kubectl-cache` beside the kubeconfig.
    pub fn cache_dir(&self) -> PathBuf {
        self.kubeconfig.parent().unwrap_or(Path::new(".")).join("kubectl-cache")
    }

    /// The environment a kubectl of this cluster runs in: its kubeconfig (`KUBECONFIG`), its
    /// cache ([`Self::cache_dir`], `KUBECACHEDIR`) and [`KUBECTL_GOGC`] unless `GOGC` is set. For
    /// every kubectl the tests start, [`Self::run_with_stdin`]'s or one they hold open
    /// themselves (`kubectl exec`, `kubectl port-forward`, the plugin's own kubectl).
    pub fn env(&self) -> [(&'static str, std::ffi::OsString); 3] {
        [
            ("KUBECONFIG", self.kubeconfig.clone().into()),
            ("KUBECACHEDIR", self.cache_dir().into()),
            ("GOGC", std::env::var_os("GOGC").unwrap_or_else(|| KUBECTL_GOGC.into())),
        ]
    }

    /// Run kubectl with `args`, feeding `stdin` if given.
    pub async fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Result<KubectlOutput, String> {
        let binary = kubectl_binary();
        let mut child = tokio::process::Command::new(&binary)
            .envs(self.env())
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e} (install kubectl or set KUBECTL)", binary.display()))?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes()).await.map_err(|e| format!("writing kubectl stdin: {e}"))?;
        }
        let out = child.wait_with_output().await.map_err(|e| format!("waiting for kubectl: {e}"))?;
        Ok(KubectlOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Run kubectl with `args` and no stdin. `Err` only if kubectl could not be run at all; a
    /// command that fails is an `Ok` with `success` false (see [`KubectlOutput::ok`]).
    pub async fn run(&self, args: &[&str]) -> Result<KubectlOutput, String> {
        self.run_with_stdin(args, None).await
    }

    /// `kubectl apply -n NS -f -` with `manifest` on stdin.
    pub async fn apply(&self, namespace: &str, manifest: &str) -> Result<KubectlOutput, String> {
        self.run_with_stdin(&["apply", "-n", namespace, "-f", "-"], Some(manifest)).await
    }
}
