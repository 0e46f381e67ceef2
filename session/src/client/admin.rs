//! `list` (a table, or JSON for the gateway and the plugin) and `kill`.

use std::path::Path;

use super::connect;
use crate::duration;
use myownshell_session::protocol::{Attendee, ClientMessage, HolderMessage, KillRequest, SessionInfo};

/// Print the sessions.
pub async fn list(dir: &Path, json: bool) -> Result<i32, String> {
    let sessions = match connect::ask(dir, &ClientMessage::List).await? {
        HolderMessage::Sessions(sessions) => sessions,
        other => return Err(format!("the holder answered a list with {other:?}")),
    };
    if json {
        let text = serde_json::to_string_pretty(&sessions).map_err(|e| format!("writing JSON: {e}"))?;
        println!("{text}");
    } else {
        print!("{}", table(&sessions, duration::now()));
    }
    Ok(0)
}

/// End a session; returns once its processes are gone.
pub async fn kill(dir: &Path, id: &str) -> Result<i32, String> {
    match connect::ask(dir, &ClientMessage::Kill(KillRequest { id: id.to_owned() })).await? {
        HolderMessage::Notice(text) => {
            println!("{text}");
            Ok(0)
        }
        HolderMessage::Refused(why) => Err(why),
        other => Err(format!("the holder answered a kill with {other:?}")),
    }
}

/// The sessions as a table, ages counted at `now`.
pub fn table(sessions: &[SessionInfo], now: u64) -> String {
    let ago = |t: Option<u64>| t.map_or_else(|| "-".to_owned(), |t| duration::age(now.saturating_sub(t)));
    let mut rows =
        vec![["ID", "USER", "AGE", "ATTACHED", "INPUT", "OUTPUT", "PID", "OTHERS-TYPE", "COMMAND"].map(str::to_owned)];
    for s in sessions {
        rows.push([
            s.id.clone(),
            s.user.clone(),
            duration::age(now.saturating_sub(s.created)),
            attached(&s.attached),
            ago(s.last_input),
            ago(s.last_output),
            s.pid.to_string(),
            if s.allow_drive { "yes" } else { "no" }.to_owned(),
            s.command.join(" "),
        ]);
    }
    let widths: Vec<usize> = (0..9).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn attached(attendees: &[Attendee]) -> String {
    if attendees.is_empty() {
        return "-".into();
    }
    let who = |a: &Attendee| match (a.read_only, a.driving) {
        (true, _) => format!("{} (read-only)", a.user),
        (false, true) => format!("{} (driving)", a.user),
        (false, false) => a.user.clone(),
    };
    attendees.iter().map(who).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_every_field() {
        let sessions = [
            SessionInfo {
                id: "ab12cd34".into(),
                user: "alice".into(),
                created: 1000,
                attached: vec![
                    Attendee { user: "alice".into(), read_only: false, driving: true },
                    Attendee { user: "bob".into(), read_only: true, driving: false },
                ],
                last_input: Some(1290),
                last_output: None,
                command: vec!["/bin/sh".into()],
                pid: 42,
                allow_drive: false,
            },
            SessionInfo {
                id: "ffff0000".into(),
                user: "carol".into(),
                created: 1299,
                command: vec!["top".into()],
                pid: 7,
                allow_drive: true,
                ..Default::default()
            },
        ];
        let table = table(&sessions, 1300);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("ID        USER   AGE"), "{table}");
        assert!(
            lines[1].contains("ab12cd34")
                && lines[1].contains("5m0s")
                && lines[1].contains("alice (driving), bob (read-only)"),
            "{table}"
        );
        assert!(lines[1].contains("10s") && lines[1].contains(" - ") && lines[1].ends_with("/bin/sh"), "{table}");
        assert!(lines[2].contains("carol") && lines[2].contains("yes") && lines[2].ends_with("top"), "{table}");
    }
}
