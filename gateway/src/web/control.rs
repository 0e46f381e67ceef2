//! The page's control messages (text frames on the terminal's WebSocket), read as a pure
//! function: `{"type":"resize","cols":N,"rows":N}`; `{"type":"eof"}` from a client whose input
//! ended (`kubectl myownshell connect` reading a pipe); for a held session `{"type":"detach"}`
//! (leave it running), `{"type":"end"}` (end it) and `{"type":"allowDrive","allow":B}` (let
//! others type: its creator's to say, the holder checks). Anything else gets a clear answer
//! naming what was expected; nothing a page sends can panic the gateway or reach the pod
//! unchecked.

use serde::Deserialize;

/// The largest terminal a page may ask for, each way.
pub const MAX_SIZE: u16 = 1000;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum FromPage {
    Resize {
        cols: u16,
        rows: u16,
    },
    Eof {},
    Detach {},
    End {},
    #[serde(rename = "allowDrive")]
    AllowDrive {
        allow: bool,
    },
}

/// What a control message asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Set the terminal's size (columns, rows).
    Resize(u16, u16),
    /// The client's input ended (a pipe, not a terminal): close the program's stdin.
    Eof,
    /// Leave the held session running, and this terminal.
    Detach,
    /// End the held session.
    End,
    /// Let others type in the held session, or stop them.
    AllowDrive(bool),
}

/// Read one control message; the error is what to tell the page.
pub fn read(text: &str) -> Result<Control, String> {
    match serde_json::from_str::<FromPage>(text) {
        Ok(FromPage::Resize { cols, rows }) if (1..=MAX_SIZE).contains(&cols) && (1..=MAX_SIZE).contains(&rows) => {
            Ok(Control::Resize(cols, rows))
        }
        Ok(FromPage::Resize { cols, rows }) => {
            Err(format!("resize: cols and rows must be between 1 and {MAX_SIZE}, got {cols}x{rows}"))
        }
        Ok(FromPage::Eof {}) => Ok(Control::Eof),
        Ok(FromPage::Detach {}) => Ok(Control::Detach),
        Ok(FromPage::End {}) => Ok(Control::End),
        Ok(FromPage::AllowDrive { allow }) => Ok(Control::AllowDrive(allow)),
        Err(e) => Err(format!(
            "unreadable control message ({e}); expected {{\"type\":\"resize\",\"cols\":N,\"rows\":N}}, {{\"type\":\"eof\"}}, {{\"type\":\"detach\"}}, {{\"type\":\"end\"}} or {{\"type\":\"allowDrive\",\"allow\":B}}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages() {
        let cases: &[(&str, &str, Result<Control, &str>)] = &[
            ("a resize", r#"{"type":"resize","cols":80,"rows":24}"#, Ok(Control::Resize(80, 24))),
            ("the end of input", r#"{"type":"eof"}"#, Ok(Control::Eof)),
            ("detach", r#"{"type":"detach"}"#, Ok(Control::Detach)),
            ("end", r#"{"type":"end"}"#, Ok(Control::End)),
            ("allow others to type", r#"{"type":"allowDrive","allow":true}"#, Ok(Control::AllowDrive(true))),
            ("allow, not a bool", r#"{"type":"allowDrive","allow":"yes"}"#, Err("unreadable control message")),
            ("the largest", r#"{"type":"resize","cols":1000,"rows":1000}"#, Ok(Control::Resize(1000, 1000))),
            ("zero", r#"{"type":"resize","cols":0,"rows":24}"#, Err("between 1 and 1000, got 0x24")),
            ("too big", r#"{"type":"resize","cols":80,"rows":5000}"#, Err("got 80x5000")),
            ("beyond u16", r#"{"type":"resize","cols":70000,"rows":24}"#, Err("unreadable control message")),
            ("negative", r#"{"type":"resize","cols":-1,"rows":24}"#, Err("unreadable control message")),
            ("missing rows", r#"{"type":"resize","cols":80}"#, Err("missing field `rows`")),
            ("unknown type", r#"{"type":"exec","command":"rm -rf /"}"#, Err("unknown variant `exec`")),
            ("extra field", r#"{"type":"resize","cols":80,"rows":24,"x":1}"#, Err("unknown field `x`")),
            ("not JSON", "\u{0}\u{ff}garbage", Err("unreadable control message")),
            ("empty", "", Err("unreadable control message")),
            ("an array", "[1,2]", Err("unreadable control message")),
        ];
        for (name, text, want) in cases {
            match (read(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{name}"),
                (Err(got), Err(words)) => assert!(got.contains(words), "{name}: {got}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
