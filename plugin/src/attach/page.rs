//! The gateway's page protocol v2, pure: the query that says which session
//! (`GET /api/terminal/{namespace}/{shell}?session=ID|new=1&readOnly=1&cols=C&rows=R`), what the
//! client sends (keystrokes as binary messages, the rest as JSON text), and what the gateway's
//! messages are to the client. A socket that closes without `exit`, `closed`, `refused` or
//! `detached` is a dropped connection, taken up again with `session=ID` (a gateway going away says
//! a notice and closes the socket: the session is the holder's, and goes on); so is `closed` for
//! the reason `execEnded` (the exec to the pod ended, not the session).

use myownshell_session::protocol::{Attendee, Which};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::transport::{Down, Joined, Request, Up};

/// The query of the terminal's URL for `request` (without the `?`). The gateway runs a new
/// session's default command: a command of its own is not asked for.
pub fn query(request: &Request) -> String {
    let mut pairs = Vec::new();
    match &request.which {
        Which::Attach { id } => pairs.push(format!("session={}", encode(id))),
        Which::New { .. } => pairs.push("new=1".to_owned()),
        Which::AttachOrNew { .. } => {}
    }
    if request.read_only {
        pairs.push("readOnly=1".to_owned());
    }
    if let Some(size) = request.size {
        pairs.push(format!("cols={}&rows={}", size.cols, size.rows));
    }
    pairs.join("&")
}

/// Percent-encoding of a query value: anything but letters, digits and `-._~`.
fn encode(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The WebSocket message for what the client sends.
pub fn to_message(up: &Up) -> Message {
    match up {
        Up::Input(bytes) => Message::binary(bytes.clone()),
        Up::Resize(size) => Message::text(json!({"type": "resize", "cols": size.cols, "rows": size.rows}).to_string()),
        Up::Eof => Message::text(json!({"type": "eof"}).to_string()),
        Up::Detach => Message::text(json!({"type": "detach"}).to_string()),
    }
}

/// What a text message of the gateway is to the client (a message it cannot read, or of a
/// type it does not know, is nothing).
pub fn to_down(text: &str) -> Down {
    let message: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let words = message["message"].as_str().unwrap_or_default().to_owned();
    match message["type"].as_str().unwrap_or_default() {
        "attached" => Down::Joined(joined(&message)),
        "presence" => Down::Presence { attached: attendees(&message), allow_drive: flag(&message, "allowDrive") },
        "notice" | "error" => Down::Notice(words),
        "stopping" => Down::Stopping { message: words, can_extend: flag(&message, "canExtend") },
        "exit" => Down::Exited(message["code"].as_i64().and_then(|c| i32::try_from(c).ok()).unwrap_or(1)),
        // The exec to the pod ended, not the session: the session is the holder's and goes on.
        "closed" if message["reason"] == "execEnded" => Down::Dropped(closed_words(words, "execEnded")),
        "closed" => Down::Ended(closed_words(words, message["reason"].as_str().unwrap_or_default())),
        "detached" => Down::Detached,
        "refused" => Down::Refused(words),
        // Not opened this time (an apiserver or a holder that could not answer yet), or a
        // stopping gateway's turn to move this terminal: the session is the holder's, so the
        // client reattaches (through another replica) rather than stopping.
        "unavailable" | "handover" => Down::Dropped(words),
        // A gateway before v2: another page took the terminal over.
        "replaced" => Down::Ended("the terminal was opened elsewhere".to_owned()),
        _ => Down::Nothing,
    }
}

fn flag(message: &Value, field: &str) -> bool {
    message[field].as_bool().unwrap_or(false)
}

fn attendees(message: &Value) -> Vec<Attendee> {
    serde_json::from_value(message["attached"].clone()).unwrap_or_default()
}

fn joined(message: &Value) -> Joined {
    Joined {
        id: message["session"].as_str().unwrap_or_default().to_owned(),
        resumed: flag(message, "resumed"),
        read_only: flag(message, "readOnly"),
        created: message["created"].as_u64(),
        pid: message["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
        attached: attendees(message),
        allow_drive: flag(message, "allowDrive"),
    }
}

/// Why the gateway closed a session: its words, else its reason's.
fn closed_words(words: String, reason: &str) -> String {
    if !words.is_empty() {
        return words;
    }
    match reason {
        "idleTtl" => "nobody was attached to it for its detached timeout",
        "killed" => "it was ended",
        "podStopping" => "the shell's pod is stopping",
        "accessLost" => "you may no longer connect to this shell",
        "gateway" => "the gateway closed it",
        "execEnded" => "the connection to the session ended",
        _ => "the gateway ended it",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use myownshell_session::protocol::Size;

    use super::*;

    #[test]
    fn the_query_names_the_session() {
        let size = Some(Size { cols: 120, rows: 40 });
        let request = |which, read_only, size| Request { which, read_only, size };
        let cases = [
            (request(Which::AttachOrNew { command: None }, false, None), ""),
            (request(Which::AttachOrNew { command: None }, false, size), "cols=120&rows=40"),
            (request(Which::New { command: None }, false, size), "new=1&cols=120&rows=40"),
            (request(Which::Attach { id: "ab12cd34".into() }, true, None), "session=ab12cd34&readOnly=1"),
            (request(Which::Attach { id: "a b&c".into() }, false, None), "session=a%20b%26c"),
        ];
        for (request, expected) in cases {
            assert_eq!(query(&request), expected, "{request:?}");
        }
    }

    #[test]
    fn what_the_client_sends() {
        let text = |message: Message| message.into_text().unwrap().to_string();
        assert_eq!(to_message(&Up::Input(b"ls\r".to_vec())), Message::binary(b"ls\r".to_vec()));
        let resize: Value = serde_json::from_str(&text(to_message(&Up::Resize(Size { cols: 9, rows: 3 })))).unwrap();
        assert_eq!(resize, json!({"type": "resize", "cols": 9, "rows": 3}));
        assert_eq!(text(to_message(&Up::Eof)), r#"{"type":"eof"}"#);
        assert_eq!(text(to_message(&Up::Detach)), r#"{"type":"detach"}"#);
    }

    #[test]
    fn what_each_gateway_message_is_to_the_client() {
        let bob = Attendee { user: "bob".into(), read_only: true, driving: false };
        let cases: Vec<(&str, Down)> = vec![
            (
                r#"{"type":"attached","protocol":2,"session":"ab12","pod":"web-0","resumed":true,"readOnly":true,
                   "allowDrive":true,"created":1800000000,"pid":42,
                   "attached":[{"user":"bob","readOnly":true,"driving":false}]}"#,
                Down::Joined(Joined {
                    id: "ab12".into(),
                    created: Some(1_800_000_000),
                    pid: Some(42),
                    resumed: true,
                    read_only: true,
                    allow_drive: true,
                    attached: vec![bob.clone()],
                }),
            ),
            (
                r#"{"type":"attached","held":false,"terminal":"t1","pod":"web-0","resumed":false}"#,
                Down::Joined(Joined::default()),
            ),
            (
                r#"{"type":"presence","attached":[{"user":"bob","readOnly":true}],"allowDrive":false}"#,
                Down::Presence { attached: vec![bob], allow_drive: false },
            ),
            (r#"{"type":"notice","message":"recorded"}"#, Down::Notice("recorded".into())),
            (r#"{"type":"error","message":"exec broke"}"#, Down::Notice("exec broke".into())),
            (
                r#"{"type":"stopping","message":"stops in 5m","canExtend":true}"#,
                Down::Stopping { message: "stops in 5m".into(), can_extend: true },
            ),
            (r#"{"type":"exit","code":7}"#, Down::Exited(7)),
            (r#"{"type":"exit"}"#, Down::Exited(1)),
            (r#"{"type":"closed","message":"killed by bob","reason":"killed"}"#, Down::Ended("killed by bob".into())),
            (
                r#"{"type":"closed","reason":"accessLost"}"#,
                Down::Ended("you may no longer connect to this shell".into()),
            ),
            (r#"{"type":"closed","reason":"podStopping"}"#, Down::Ended("the shell's pod is stopping".into())),
            (r#"{"type":"closed","reason":"idleTtl"}"#, Down::Ended(closed_words(String::new(), "idleTtl"))),
            (
                r#"{"type":"closed","message":"the connection to the session holder ended","reason":"execEnded"}"#,
                Down::Dropped("the connection to the session holder ended".into()),
            ),
            (
                r#"{"type":"closed","message":"a recorded session does not go on unrecorded","reason":"gateway"}"#,
                Down::Ended("a recorded session does not go on unrecorded".into()),
            ),
            (r#"{"type":"detached"}"#, Down::Detached),
            (r#"{"type":"refused","message":"no session x"}"#, Down::Refused("no session x".into())),
            (
                r#"{"type":"unavailable","message":"the session holder did not answer"}"#,
                Down::Dropped("the session holder did not answer".into()),
            ),
            (
                r#"{"type":"handover","message":"the gateway is restarting"}"#,
                Down::Dropped("the gateway is restarting".into()),
            ),
            (r#"{"type":"replaced"}"#, Down::Ended("the terminal was opened elsewhere".into())),
            (r#"{"type":"later","x":1}"#, Down::Nothing),
            ("not json", Down::Nothing),
        ];
        for (text, expected) in cases {
            assert_eq!(to_down(text), expected, "{text}");
        }
    }
}
