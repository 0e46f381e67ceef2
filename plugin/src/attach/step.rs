//! What the client does with each message, and what it says when it joins a session, pure:
//! output shown, a line said, a reattach, or the end.

use myownshell_runtime::time::format_age;
use myownshell_session::protocol::{Attendee, Which};

use super::ending::Ending;
use super::transport::{Down, Joined};

/// What clears a screen for a replay: the cursor home, the screen erased.
pub const CLEAR: &[u8] = b"\x1b[H\x1b[2J";

/// What the client knows of the session it is attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The shell, for hints.
    pub shell: String,
    /// The session's id.
    pub id: String,
    /// Who is attached, as last told.
    pub attached: Vec<Attendee>,
    /// The detach keys were pressed: the connection's end is the detach's.
    pub detaching: bool,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write to the terminal.
    Show(Vec<u8>),
    /// Say a line on stderr.
    Say(String),
    /// Take the session up again: the connection dropped, for this reason.
    Reattach(String),
    /// The end.
    Finish(Ending),
    Nothing,
}

impl View {
    pub fn new(shell: &str, joined: &Joined) -> Self {
        View { shell: shell.to_owned(), id: joined.id.clone(), attached: joined.attached.clone(), detaching: false }
    }

    /// The session joined again, after a reattach.
    pub fn rejoin(&mut self, joined: &Joined) {
        self.attached = joined.attached.clone();
    }
}

/// What to do with `down`.
pub fn react(view: &mut View, down: Down) -> Step {
    let id = view.id.clone();
    match down {
        Down::Output(bytes) => Step::Show(bytes),
        // Who drives changes with every keystroke of another: only comings and goings are said.
        Down::Presence { attached, .. } if people(&attached) == people(&view.attached) => {
            view.attached = attached;
            Step::Nothing
        }
        Down::Presence { attached, .. } => {
            view.attached = attached;
            Step::Say(format!("attached to session {id} now: {}", who(&view.attached)))
        }
        Down::Notice(text) => Step::Say(text),
        Down::Stopping { message, can_extend: true } => {
            Step::Say(format!("{message} (kubectl myownshell extend {} pushes the stop back)", view.shell))
        }
        Down::Stopping { message, can_extend: false } => Step::Say(message),
        Down::Exited(code) => Step::Finish(Ending::Exited(code)),
        Down::Ended(why) => Step::Finish(Ending::Ended { id, why }),
        Down::Refused(why) => Step::Finish(Ending::Refused(why)),
        Down::Detached => Step::Finish(Ending::Detached { id }),
        Down::Dropped(_) | Down::NoHolder(_) if view.detaching => Step::Finish(Ending::Detached { id }),
        // A gateway that names no session: there is nothing to reattach to.
        Down::Dropped(why) | Down::NoHolder(why) if id.is_empty() => {
            Step::Finish(Ending::Failed(format!("the connection broke: {why}")))
        }
        Down::Dropped(why) | Down::NoHolder(why) => Step::Reattach(why),
        Down::Joined(joined) => {
            view.rejoin(&joined);
            Step::Nothing
        }
        Down::Nothing => Step::Nothing,
    }
}

/// Who is attached and how, whoever drives.
fn people(attendees: &[Attendee]) -> Vec<(&str, bool)> {
    let mut people: Vec<(&str, bool)> = attendees.iter().map(|a| (a.user.as_str(), a.read_only)).collect();
    people.sort_unstable();
    people
}

/// Who is attached, in a few words: `alice (driving), bob (read-only)`, or `nobody`.
pub fn who(attendees: &[Attendee]) -> String {
    if attendees.is_empty() {
        return "nobody".to_owned();
    }
    let one = |a: &Attendee| match (a.read_only, a.driving) {
        (true, _) => format!("{} (read-only)", a.user),
        (false, true) => format!("{} (driving)", a.user),
        (false, false) => a.user.clone(),
    };
    attendees.iter().map(one).collect::<Vec<_>>().join(", ")
}

/// How a session was joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join<'a> {
    /// The first time, having asked for this.
    First(&'a Which),
    /// Again, after the connection dropped.
    Again,
}

/// What is done when a session is joined: whether the screen is cleared for the replay that
/// follows (at a terminal, for a session that was there before), and the line said.
pub fn greet(joined: &Joined, join: Join<'_>, screen: bool, now: u64) -> (bool, Option<String>) {
    let id = &joined.id;
    let started = joined.created.map(|c| format!(" (started {} ago)", format_age(now.saturating_sub(c) as i64)));
    let started = started.unwrap_or_default();
    match join {
        Join::Again => (screen, Some(format!("reattached to session {id}"))),
        Join::First(_) if !joined.resumed => (false, None),
        Join::First(Which::AttachOrNew { .. }) => (screen, Some(format!("reattached to session {id}{started}"))),
        Join::First(_) => (screen, Some(format!("attached to session {id}{started}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> View {
        let alice = Attendee { user: "alice".into(), read_only: false, driving: true };
        View::new("web", &Joined { id: "ab12".into(), attached: vec![alice], ..Joined::default() })
    }

    #[test]
    fn what_the_client_does_with_each_message() {
        let alice = Attendee { user: "alice".into(), read_only: false, driving: true };
        let bob = Attendee { user: "bob".into(), read_only: true, driving: false };
        let finish = Step::Finish;
        // (what, message, what the client does)
        let cases = [
            ("output is shown", Down::Output(b"hi".to_vec()), Step::Show(b"hi".to_vec())),
            (
                "the same people: nothing said",
                Down::Presence { attached: vec![alice.clone()], allow_drive: false },
                Step::Nothing,
            ),
            (
                "another drives: nothing said",
                Down::Presence { attached: vec![Attendee { driving: false, ..alice.clone() }], allow_drive: true },
                Step::Nothing,
            ),
            (
                "someone joins",
                Down::Presence { attached: vec![alice.clone(), bob], allow_drive: false },
                Step::Say("attached to session ab12 now: alice (driving), bob (read-only)".into()),
            ),
            ("a notice", Down::Notice("read-only".into()), Step::Say("read-only".into())),
            (
                "a stop that can be pushed back",
                Down::Stopping { message: "stops in 5m".into(), can_extend: true },
                Step::Say("stops in 5m (kubectl myownshell extend web pushes the stop back)".into()),
            ),
            ("a stop", Down::Stopping { message: "stops".into(), can_extend: false }, Step::Say("stops".into())),
            ("exit code", Down::Exited(3), finish(Ending::Exited(3))),
            ("ended", Down::Ended("idle".into()), finish(Ending::Ended { id: "ab12".into(), why: "idle".into() })),
            ("refused", Down::Refused("no".into()), finish(Ending::Refused("no".into()))),
            ("the gateway's detach", Down::Detached, finish(Ending::Detached { id: "ab12".into() })),
            ("a drop: reattach", Down::Dropped("reset".into()), Step::Reattach("reset".into())),
            ("later messages", Down::Nothing, Step::Nothing),
        ];
        for (what, down, step) in cases {
            assert_eq!(react(&mut view(), down), step, "{what}");
        }
        let mut leaving = view();
        let bob = Attendee { user: "bob".into(), read_only: true, driving: false };
        react(&mut leaving, Down::Presence { attached: vec![alice, bob], allow_drive: false });
        assert_eq!(
            react(&mut leaving, Down::Presence { attached: vec![], allow_drive: false }),
            Step::Say("attached to session ab12 now: nobody".into())
        );
    }

    #[test]
    fn a_drop_while_detaching_or_without_an_id_is_the_end() {
        let mut detaching = View { detaching: true, ..view() };
        assert_eq!(
            react(&mut detaching, Down::Dropped("eof".into())),
            Step::Finish(Ending::Detached { id: "ab12".into() })
        );
        let mut unnamed = View { id: String::new(), ..view() };
        assert_eq!(
            react(&mut unnamed, Down::Dropped("reset".into())),
            Step::Finish(Ending::Failed("the connection broke: reset".into()))
        );
    }

    #[test]
    fn what_is_said_on_joining() {
        let joined = |resumed, created| Joined { id: "ab12".into(), resumed, created, ..Joined::default() };
        let or_new = Which::AttachOrNew { command: None };
        let new = Which::New { command: None };
        let by_id = Which::Attach { id: "ab12".into() };
        // (joined, how, at a terminal, cleared, line)
        let cases = [
            (joined(false, Some(0)), Join::First(&or_new), true, false, None),
            (joined(false, Some(0)), Join::First(&new), true, false, None),
            (
                joined(true, Some(700)),
                Join::First(&or_new),
                true,
                true,
                Some("reattached to session ab12 (started 5m0s ago)"),
            ),
            (joined(true, None), Join::First(&or_new), false, false, Some("reattached to session ab12")),
            (
                joined(true, Some(1000)),
                Join::First(&by_id),
                true,
                true,
                Some("attached to session ab12 (started 0s ago)"),
            ),
            (joined(true, Some(0)), Join::Again, true, true, Some("reattached to session ab12")),
            (joined(true, Some(0)), Join::Again, false, false, Some("reattached to session ab12")),
        ];
        for (joined, join, screen, clear, line) in cases {
            assert_eq!(greet(&joined, join, screen, 1000), (clear, line.map(str::to_owned)), "{join:?} {joined:?}");
        }
    }
}
