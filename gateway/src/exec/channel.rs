//! The `v5.channel.k8s.io` exec protocol, as pure functions: every WebSocket message is binary,
//! its first byte the stream it belongs to. The gateway forwards bytes and never parses what a
//! program prints; it reads only the error stream, which carries the exit status as a
//! `metav1.Status`.
//!
//! kube's `AttachedProcess` speaks the same protocol behind `AsyncRead`/`AsyncWrite` pipes with
//! their own buffers and tasks; a gateway relaying frames between two WebSockets needs none of
//! that, so it reads the frames itself (one small match) and copies each payload once.

use serde::Deserialize;

/// Bytes typed into the program.
pub const STDIN: u8 = 0;
/// What the program prints (with a TTY, stderr comes here too).
pub const STDOUT: u8 = 1;
/// What the program prints to stderr without a TTY.
pub const STDERR: u8 = 2;
/// The exec's end, as a `metav1.Status`.
pub const ERROR: u8 = 3;
/// Terminal size changes, as `{"Width":…,"Height":…}`.
pub const RESIZE: u8 = 4;
/// v5 only: the client closed one of its streams (the payload is the stream's byte).
pub const CLOSE: u8 = 255;

/// One frame from the apiserver, read.
#[derive(Debug, PartialEq, Eq)]
pub enum FromPod<'a> {
    /// What the program wrote to stdout (with a TTY, its stderr too).
    Output(&'a [u8]),
    /// What the program wrote to stderr (only without a TTY).
    Stderr(&'a [u8]),
    /// The program ended with this code (0 on success).
    Exited(i32),
    /// The exec failed before or around the program (the Status's message).
    Failed(String),
    /// A frame of no stream the gateway reads (an empty one, a stream it never opened).
    Ignored,
}

/// The frame that types `bytes`.
pub fn stdin(bytes: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(bytes.len() + 1);
    frame.push(STDIN);
    frame.extend_from_slice(bytes);
    frame
}

/// The frame that sets the terminal's size.
pub fn resize(cols: u16, rows: u16) -> Vec<u8> {
    let mut frame = vec![RESIZE];
    frame.extend_from_slice(format!("{{\"Width\":{cols},\"Height\":{rows}}}").as_bytes());
    frame
}

/// The frame that closes stdin (v5): the program reads end of file.
pub fn close_stdin() -> Vec<u8> {
    vec![CLOSE, STDIN]
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    causes: Vec<Cause>,
}

#[derive(Deserialize)]
struct Cause {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

/// Read one frame from the apiserver.
pub fn from_pod(frame: &[u8]) -> FromPod<'_> {
    match frame.split_first() {
        Some((&STDOUT, output)) if !output.is_empty() => FromPod::Output(output),
        Some((&STDERR, output)) if !output.is_empty() => FromPod::Stderr(output),
        Some((&ERROR, status)) => exit_of(status),
        _ => FromPod::Ignored,
    }
}

/// The exit code a Status on the error stream gives: `Success` is 0; `NonZeroExitCode` carries
/// the code in its `ExitCode` cause, as the kubelet writes it.
fn exit_of(status: &[u8]) -> FromPod<'_> {
    let Ok(status) = serde_json::from_slice::<Status>(status) else {
        return FromPod::Failed(format!("unreadable exec status: {}", String::from_utf8_lossy(status)));
    };
    if status.status == "Success" {
        return FromPod::Exited(0);
    }
    if status.reason == "NonZeroExitCode" {
        let code = status.details.iter().flat_map(|d| &d.causes).find(|c| c.reason == "ExitCode");
        if let Some(code) = code.and_then(|c| c.message.parse().ok()) {
            return FromPod::Exited(code);
        }
    }
    FromPod::Failed(status.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_from_the_pod() {
        let nonzero = br#"{"status":"Failure","reason":"NonZeroExitCode","message":"command terminated with non-zero exit code: 3","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        let cases: &[(&str, Vec<u8>, FromPod<'_>)] = &[
            ("stdout", b"\x01hi".to_vec(), FromPod::Output(b"hi")),
            ("stderr", b"\x02oops".to_vec(), FromPod::Stderr(b"oops")),
            ("empty stdout", b"\x01".to_vec(), FromPod::Ignored),
            ("empty frame", Vec::new(), FromPod::Ignored),
            ("resize echoed", b"\x04{}".to_vec(), FromPod::Ignored),
            (
                "success",
                br#"{"metadata":{},"status":"Success"}"#.iter().fold(vec![3], |mut v, b| {
                    v.push(*b);
                    v
                }),
                FromPod::Exited(0),
            ),
            ("exit code", [&[3u8][..], nonzero].concat(), FromPod::Exited(3)),
            (
                "failure",
                [&[3u8][..], br#"{"status":"Failure","message":"container not found"}"#].concat(),
                FromPod::Failed("container not found".into()),
            ),
            ("not JSON", b"\x03garbage".to_vec(), FromPod::Failed("unreadable exec status: garbage".into())),
        ];
        for (name, frame, want) in cases {
            assert_eq!(&from_pod(frame), want, "{name}");
        }
    }

    #[test]
    fn frames_to_the_pod() {
        assert_eq!(stdin(b"ls\r"), b"\x00ls\r");
        assert_eq!(resize(80, 24), b"\x04{\"Width\":80,\"Height\":24}");
        assert_eq!(close_stdin(), [255, 0]);
    }
}
