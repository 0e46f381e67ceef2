//! How an attach ends, and what is said and returned for it, pure.

use myownshell_runtime::time::format_duration;

use super::options::Options;

/// Said when the shell's pod has no session holder and `connect` falls back to a plain exec.
pub const NO_HOLDER: &str = "this shell's pod has no session holder yet (it gets one at its next restart, \
     kubectl myownshell update): the terminal ends when the connection does";

/// How an attach ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The session's command exited with this code.
    Exited(i32),
    /// The person detached; the session goes on.
    Detached { id: String },
    /// The session was ended, and why.
    Ended { id: String, why: String },
    /// What was asked was refused (no such session, the cap, no access).
    Refused(String),
    /// The shell's pod has no session holder.
    NoHolder(String),
    /// The connection dropped and could not be taken up again within the grace.
    Lost { id: String, why: String },
    /// A signal (SIGTERM, SIGHUP, SIGINT) stopped the client; the session goes on.
    Signal { id: String, signal: i32 },
    /// Anything else, before a session was joined or on the way.
    Failed(String),
}

/// The line to print (on stderr, once the terminal is itself again) and the exit code.
pub fn farewell(ending: &Ending, options: &Options) -> (Option<String>, u8) {
    let back = |id: &str| options.come_back_to(id);
    match ending {
        Ending::Exited(code) => (None, u8::try_from(*code).unwrap_or(1)),
        Ending::Detached { id } if id.is_empty() => (Some("detached".to_owned()), 0),
        Ending::Detached { id } => (Some(format!("detached from session {id}: {} to come back", back(id))), 0),
        Ending::Ended { id, why } => (Some(format!("session {id} ended: {why}")), 1),
        Ending::Refused(why) => (Some(format!("error: {why}")), 1),
        Ending::NoHolder(_) => (Some(format!("error: {NO_HOLDER}")), 1),
        Ending::Lost { id, why } => (
            Some(format!(
                "error: could not reattach to session {id} within {} ({why}); it may still be running: {} to \
                 come back",
                format_duration(options.grace),
                back(id)
            )),
            1,
        ),
        Ending::Signal { id, signal } => (
            Some(format!("stopped by signal {signal}: detached from session {id}: {} to come back", back(id))),
            u8::try_from(128 + signal).unwrap_or(1),
        ),
        Ending::Failed(why) => (Some(format!("error: {why}")), 1),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn what_is_said_and_returned_for_each_ending() {
        let options = Options {
            shell: "web".into(),
            come_back: "kubectl myownshell connect web".into(),
            detach_keys: vec![0x10, 0x11],
            grace: Duration::from_secs(60),
            screen: true,
        };
        let id = || "ab12".to_owned();
        let cases: &[(Ending, Option<&str>, u8)] = &[
            (Ending::Exited(0), None, 0),
            (Ending::Exited(7), None, 7),
            (Ending::Exited(130), None, 130),
            (Ending::Exited(-1), None, 1),
            (Ending::Exited(300), None, 1),
            (
                Ending::Detached { id: id() },
                Some("detached from session ab12: kubectl myownshell connect web --session ab12 to come back"),
                0,
            ),
            (Ending::Detached { id: String::new() }, Some("detached"), 0),
            (Ending::Ended { id: id(), why: "killed by bob".into() }, Some("session ab12 ended: killed by bob"), 1),
            (Ending::Refused("no session x".into()), Some("error: no session x"), 1),
            (
                Ending::Lost { id: id(), why: "connection refused".into() },
                Some(
                    "error: could not reattach to session ab12 within 1m (connection refused); it may still be \
                     running: kubectl myownshell connect web --session ab12 to come back",
                ),
                1,
            ),
            (
                Ending::Signal { id: id(), signal: 15 },
                Some(
                    "stopped by signal 15: detached from session ab12: kubectl myownshell connect web --session \
                     ab12 to come back",
                ),
                143,
            ),
            (Ending::Failed("broken".into()), Some("error: broken"), 1),
        ];
        for (ending, line, code) in cases {
            let (said, returned) = farewell(ending, &options);
            assert_eq!((said.as_deref(), returned), (*line, *code), "{ending:?}");
        }
        assert!(farewell(&Ending::NoHolder(String::new()), &options).0.unwrap().contains("no session holder yet"));
    }
}
