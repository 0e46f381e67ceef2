//! A command run to its end in a shell's pod as the user (an exec with no stdin and no TTY),
//! its stdout collected within a bound: what the page's list of a shell's sessions is made of
//! (`myownshell-session list --json`).

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::AttachParams;
use tokio_tungstenite::tungstenite::Message;

use super::as_user::AsUser;
use super::channel::{self, FromPod};
use super::upgrade::UpgradeError;

/// Why a run gave no output.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The apiserver or the connect gate refused the exec (its status code), in their words.
    #[error("{1}")]
    Refused(http::StatusCode, String),
    /// The command could not run, or failed: why.
    #[error("{0}")]
    Failed(String),
}

/// Run `command` in container `container` of `pod` as `user`; its stdout, at most `limit` bytes.
pub async fn output(
    user: &AsUser,
    (namespace, pod, container): (&str, &str, &str),
    command: Vec<String>,
    limit: usize,
) -> Result<Vec<u8>, RunError> {
    let params = AttachParams::default().stdin(false).stdout(true).stderr(true).container(container);
    let exec = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
        .exec(pod, command, &params)
        .map_err(|e| RunError::Failed(e.to_string()))?;
    let mut socket = user.connect(exec).await.map_err(|e| match e {
        UpgradeError::Refused(code, why) => RunError::Refused(code, why),
        UpgradeError::Failed(why) => RunError::Failed(why),
    })?;
    let (mut out, mut err) = (Vec::new(), String::new());
    while let Some(message) = socket.next().await {
        let frame = match message {
            Ok(Message::Binary(frame)) => frame,
            Ok(Message::Close(_)) => break,
            Ok(_) => continue,
            Err(e) => return Err(RunError::Failed(format!("the connection to the pod broke: {e}"))),
        };
        match channel::from_pod(&frame) {
            FromPod::Output(bytes) if out.len() + bytes.len() <= limit => out.extend_from_slice(bytes),
            FromPod::Output(_) => return Err(RunError::Failed(format!("more than {limit} bytes of output"))),
            FromPod::Stderr(text) if err.len() < 4096 => err.push_str(&String::from_utf8_lossy(text)),
            FromPod::Exited(0) => return Ok(out),
            FromPod::Exited(code) => return Err(RunError::Failed(format!("exited with code {code}: {}", err.trim()))),
            FromPod::Failed(why) => return Err(RunError::Failed(format!("{why} {}", err.trim()).trim().to_owned())),
            FromPod::Stderr(_) | FromPod::Ignored => {}
        }
    }
    Err(RunError::Failed("the pod closed the connection".into()))
}
