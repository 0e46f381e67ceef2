//! Which pod a new terminal opens in: read the shell and its pods as the user (so a user who
//! may not see them gets the apiserver's refusal, not the gateway's view), then follow
//! [`myownshell_api::connect::wait_for`], the rule `kubectl myownshell connect` follows.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{ListParams, ObjectList};
use kube::core::Request;
use myownshell_api::MyOwnShell;
use myownshell_api::connect::{Wait, wait_for};

use super::as_user::AsUser;

/// Why no pod was found.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The apiserver refused a read (its message).
    #[error("{0}")]
    Api(String),
    /// The apiserver could not answer now (unreachable, overloaded, a 5xx): trying again may
    /// find the pod.
    #[error("{0}")]
    Unavailable(String),
    /// The shell is stopped or paused: what `connect` says, and how to start it.
    #[error("{0}")]
    Stopped(String),
    /// No pod became ready in time: what it was waiting for.
    #[error("gave up after {0}s: {1}")]
    Timeout(u64, String),
}

fn api_error(e: kube::Error) -> TargetError {
    match e {
        kube::Error::Api(status)
            if http::StatusCode::from_u16(status.code).is_ok_and(super::upgrade::answers_later) =>
        {
            TargetError::Unavailable(status.message)
        }
        kube::Error::Api(status) => TargetError::Api(status.message),
        other => TargetError::Unavailable(other.to_string()),
    }
}

/// The pod found for a new terminal, and what the shell says of its terminals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The pod to open the terminal in.
    pub pod: String,
    /// The shell's uid.
    pub uid: Option<String>,
    /// Whether the shell asks for its sessions to be recorded (`spec.recordSessions`).
    pub record: bool,
    /// The shell's owner (whose held sessions those it is shared with may join).
    pub owner: Option<String>,
}

/// What one look found: where it waits, and the shell's uid, recording wish and owner.
type Look = (Wait, Option<String>, bool, Option<String>);

/// One look: the shell and its pods now, and the shell's uid, recording wish and owner.
async fn look(user: &AsUser, namespace: &str, name: &str) -> Result<Look, TargetError> {
    let shells = Request::new(MyOwnShell::url_path(&(), Some(namespace)));
    let get = shells.get(name, &Default::default()).map_err(|e| TargetError::Api(e.to_string()))?;
    let shell: MyOwnShell = user.request(get).await.map_err(api_error)?;
    let selector = shell.status.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
    let pods = if selector.is_empty() {
        Vec::new()
    } else {
        let list = Request::new(Pod::url_path(&(), Some(namespace)))
            .list(&ListParams::default().labels(&selector))
            .map_err(|e| TargetError::Api(e.to_string()))?;
        user.request::<ObjectList<Pod>>(list).await.map_err(api_error)?.items
    };
    let record = shell.spec.record_sessions == Some(true);
    Ok((wait_for(&shell, &pods), shell.metadata.uid.clone(), record, shell.spec.owner.clone()))
}

/// The pod to open a terminal in, waiting up to `timeout` for a ready pod; `waiting` is sent
/// each new line of what it waits for.
pub async fn find(
    user: &AsUser,
    namespace: &str,
    name: &str,
    timeout: Duration,
    waiting: tokio::sync::mpsc::UnboundedSender<String>,
) -> Result<Found, TargetError> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let (wait, uid, record, owner) = look(user, namespace, name).await?;
        match wait {
            Wait::Ready(pod) => return Ok(Found { pod, uid, record, owner }),
            Wait::Stopped(why) => return Err(TargetError::Stopped(why)),
            Wait::Waiting(line) => {
                if line != last {
                    let _ = waiting.send(line.clone());
                    last = line;
                }
            }
        }
        if started.elapsed() >= timeout {
            return Err(TargetError::Timeout(timeout.as_secs(), last));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
