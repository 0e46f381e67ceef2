//! The `kubectl-myownshell` binary, run as its users run it, against a test control plane.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use myownshell_envtest::assets::workspace_binary;

/// What one run of the plugin printed and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    /// The exit code (`-1` if killed by a signal).
    pub code: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Run `kubectl-myownshell --kubeconfig KUBECONFIG -n NAMESPACE ARGS…` to its end.
pub fn run(kubeconfig: &Path, namespace: &str, args: &[&str]) -> Result<Output, String> {
    let binary = workspace_binary("kubectl-myownshell")?;
    let out = Command::new(&binary)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["-n", namespace])
        .args(args)
        .output()
        .map_err(|e| format!("running {}: {e}", binary.display()))?;
    Ok(Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// [`run`], which must succeed: its output, or what it said.
pub fn ok(kubeconfig: &Path, namespace: &str, args: &[&str]) -> Result<String, String> {
    let out = run(kubeconfig, namespace, args)?;
    if out.code == 0 {
        Ok(out.stdout)
    } else {
        Err(format!("kubectl myownshell {} exited {}: {}{}", args.join(" "), out.code, out.stdout, out.stderr))
    }
}

/// [`run`] with `stdin` written to the plugin's standard input, then closed (a pipe, not a
/// terminal).
pub fn run_with_stdin(kubeconfig: &Path, namespace: &str, args: &[&str], stdin: &str) -> Result<Output, String> {
    let binary = workspace_binary("kubectl-myownshell")?;
    let mut child = Command::new(&binary)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["-n", namespace])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {}: {e}", binary.display()))?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).map_err(|e| format!("writing the plugin's stdin: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("waiting for {}: {e}", binary.display()))?;
    Ok(Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
