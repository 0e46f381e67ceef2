//! The direct way to a session: this plugin's own exec (the kube client's WebSocket, as the
//! user, so the connect gate decides it) of `myownshell-session attach --framed` in the shell's
//! container, without a TTY, speaking the holder's frames over its stdin and stdout. A pod that
//! predates the holder is told apart by how the exec fails: the binary is not there.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Api;
use kube::api::AttachParams;
use myownshell_session::protocol::{Hello, VERSION};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::attach::framed;
use crate::attach::{Down, Joined, Link, OpenError, Request, Transport};

/// The shell's container in its pod.
pub const CONTAINER: &str = "shell";

/// Bytes of the exec's stderr kept to say why it ended.
const STDERR_KEPT: usize = 4 * 1024;

/// Sessions in one pod, reached as one user.
pub struct Direct {
    pub pods: Api<Pod>,
    pub pod: String,
    /// The user named in the hello (the apiserver's name for the caller).
    pub user: String,
}

impl Transport for Direct {
    async fn open(&mut self, request: &Request) -> Result<(Link, Joined), OpenError> {
        let hello = Hello {
            version: VERSION,
            user: self.user.clone(),
            session: request.which.clone(),
            read_only: request.read_only,
            size: request.size,
        };
        let argv = myownshell_session::exec::attach(&hello);
        let mut process = self.pods.exec(&self.pod, argv, &params(true)).await.map_err(open_error)?;
        let (Some(stdin), Some(stdout), Some(stderr), Some(status)) =
            (process.stdin(), process.stdout(), process.stderr(), process.take_status())
        else {
            return Err(OpenError::Failed("the exec gave no stdin, stdout or stderr".into()));
        };
        let stderr = tokio::spawn(kept(stderr));
        let end = move |seen: bool, error: Option<String>| async move {
            // The exec's task ends with the process: kept until the status is read.
            let _process = process;
            let status = status.await;
            let stderr = stderr.await.unwrap_or_default();
            ended(seen, status.as_ref(), &stderr, error)
        };
        framed::spawn(stdout, stdin, end).joined().await
    }
}

/// The exec's parameters: the shell's container, stdout and stderr, stdin if `stdin`, no TTY;
/// buffers that hold a whole frame.
pub fn params(stdin: bool) -> AttachParams {
    let frame = myownshell_session::protocol::MAX_DATA + 5;
    AttachParams::default()
        .container(CONTAINER)
        .stdin(stdin)
        .stdout(true)
        .stderr(true)
        .tty(false)
        .max_stdin_buf_size(frame)
        .max_stdout_buf_size(frame)
        .max_stderr_buf_size(STDERR_KEPT)
}

/// Why an exec could not be opened: the apiserver's or the gate's refusal is final.
pub fn open_error(e: kube::Error) -> OpenError {
    match e {
        kube::Error::Api(status) if matches!(status.code, 401 | 403 | 404) => OpenError::Refused(status.message),
        other => OpenError::Failed(format!("opening the exec: {other}")),
    }
}

/// The last bytes of `stream`, as text.
pub async fn kept(mut stream: impl AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        let over = kept.len().saturating_sub(STDERR_KEPT);
        kept.drain(..over);
    }
    String::from_utf8_lossy(&kept).trim().to_owned()
}

/// What the end of an exec's output is: a pod without a holder (no frame came, and the binary
/// is not there), else a dropped connection, with why.
pub fn ended(seen: bool, status: Option<&Status>, stderr: &str, error: Option<String>) -> Down {
    let said = status.and_then(|s| s.message.clone()).unwrap_or_default();
    if !seen && no_holder(status) {
        return Down::NoHolder(said);
    }
    let why = [error.unwrap_or_default(), stderr.to_owned(), said]
        .into_iter()
        .find(|w| !w.is_empty())
        .unwrap_or_else(|| "the exec ended".to_owned());
    Down::Dropped(why)
}

/// Whether an exec's status says its command is not there: the runtime could not start it
/// (`no such file or directory`), or it ended with a shell's 126 or 127.
pub fn no_holder(status: Option<&Status>) -> bool {
    let Some(status) = status else { return false };
    let code = exit_code(status);
    let message = status.message.as_deref().unwrap_or_default().to_lowercase();
    matches!(code, Some(126 | 127))
        || (code.is_none()
            && status.status.as_deref() == Some("Failure")
            && message.contains("no such file or directory"))
}

/// The exit code a failed exec's status carries (`NonZeroExitCode`, cause `ExitCode`).
pub fn exit_code(status: &Status) -> Option<i32> {
    let causes = status.details.as_ref()?.causes.as_ref()?;
    causes.iter().find(|c| c.reason.as_deref() == Some("ExitCode"))?.message.as_deref()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> Status {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_pod_without_a_holder_is_told_from_a_dropped_connection() {
        let missing = concat!(
            r#"{"status":"Failure","reason":"InternalError","code":500,"message":"Internal error occurred: "#,
            r#"error executing command in container: failed to exec in container: failed to start exec \"x\": "#,
            r#"OCI runtime exec failed: exec failed: unable to start container process: exec: "#,
            r#"\"/opt/myownshell/myownshell-session\": stat /opt/myownshell/myownshell-session: "#,
            r#"no such file or directory: unknown"}"#
        );
        let code = |n: u8| {
            format!(
                r#"{{"status":"Failure","reason":"NonZeroExitCode","message":"command terminated with non-zero exit code: {n}",
                    "details":{{"causes":[{{"reason":"ExitCode","message":"{n}"}}]}}}}"#
            )
        };
        let success = r#"{"status":"Success","metadata":{}}"#;
        // (what, a frame came, the status, the stderr, what the end is)
        let cases: Vec<(&str, bool, Option<Status>, &str, &str)> = vec![
            ("the runtime found no binary", false, Some(status(missing)), "", "no holder"),
            ("a shell's not found", false, Some(status(&code(127))), "", "no holder"),
            ("not executable", false, Some(status(&code(126))), "", "no holder"),
            (
                "the holder is not running: the attach says why",
                false,
                Some(status(&code(1))),
                "reaching the session holder at /run/myownshell/session.sock: No such file or directory",
                "dropped: reaching the session holder",
            ),
            ("frames came, then the status", true, Some(status(missing)), "", "dropped: Internal error"),
            ("a clean end (after a detach)", true, Some(status(success)), "", "dropped: the exec ended"),
            ("the connection broke: no status", false, None, "", "dropped: the exec ended"),
        ];
        for (what, seen, status, stderr, expected) in cases {
            let end = ended(seen, status.as_ref(), stderr, None);
            let found = match &end {
                Down::NoHolder(_) => expected == "no holder",
                Down::Dropped(why) => expected.strip_prefix("dropped: ").is_some_and(|w| why.starts_with(w)),
                _ => false,
            };
            assert!(found, "{what}: {end:?}");
        }
        let broke = ended(false, None, "", Some("reading from the holder: reset".into()));
        assert_eq!(broke, Down::Dropped("reading from the holder: reset".into()));
    }

    #[test]
    fn refusals_are_final_and_the_rest_worth_another_try() {
        let api = |code| {
            kube::Error::Api(
                kube::core::Status { code, message: format!("said {code}"), ..kube::core::Status::default() }.boxed(),
            )
        };
        assert_eq!(open_error(api(403)), OpenError::Refused("said 403".into()));
        assert_eq!(open_error(api(404)), OpenError::Refused("said 404".into()));
        assert!(matches!(open_error(api(500)), OpenError::Failed(_)));
        assert!(matches!(open_error(api(503)), OpenError::Failed(_)));
    }
}
