//! A hello checked before anything is done for it: a pure function whose refusals name the rule.

use myownshell_session::protocol::{Hello, MAX_COMMAND_JSON, MAX_USER, SIZE_RANGE, VERSION, Which};

/// The longest session id a hello may name (ids the holder makes are 8 characters).
const MAX_ID: usize = 64;

/// The most arguments in a session's command.
const MAX_ARGS: usize = 64;

/// `Ok` if the holder can act on `hello`, else the refusal.
pub fn check(hello: &Hello) -> Result<(), String> {
    if hello.version == 0 || hello.version > VERSION {
        return Err(format!(
            "protocol version {} is not one this holder speaks (1 to {VERSION}): the holder's binary is older than \
             the client's; restart the shell's pod to get the new one",
            hello.version
        ));
    }
    check_user(&hello.user)?;
    if let Some(size) = hello.size.filter(|s| !s.is_valid()) {
        return Err(format!(
            "a terminal of {}x{} is outside {}..={} columns and rows",
            size.cols,
            size.rows,
            SIZE_RANGE.start(),
            SIZE_RANGE.end()
        ));
    }
    match &hello.session {
        Which::Attach { id } if id.is_empty() || id.len() > MAX_ID || id.chars().any(char::is_control) => {
            Err(format!("{id:?} is not a session id"))
        }
        Which::New { command: Some(command) } | Which::AttachOrNew { command: Some(command) } => check_command(command),
        _ => Ok(()),
    }
}

fn check_user(user: &str) -> Result<(), String> {
    if user.is_empty() {
        return Err("the hello names no user".into());
    }
    if user.len() > MAX_USER {
        return Err(format!("a user name of {} bytes is over the limit of {MAX_USER}", user.len()));
    }
    if user.chars().any(char::is_control) {
        return Err(format!("the user name {user:?} holds control characters"));
    }
    Ok(())
}

fn check_command(command: &[String]) -> Result<(), String> {
    if command.first().is_none_or(String::is_empty) {
        return Err("the command is empty: leave it out for the shell".into());
    }
    if command.len() > MAX_ARGS {
        return Err(format!("a command of {} arguments is over the limit of {MAX_ARGS}", command.len()));
    }
    if command.iter().any(|arg| arg.contains('\0')) {
        return Err("a command argument holds a NUL byte".into());
    }
    let json = serde_json::to_vec(command).map_or(usize::MAX, |j| j.len());
    if json > MAX_COMMAND_JSON {
        return Err(format!("a command of {json} bytes (as JSON) is over the limit of {MAX_COMMAND_JSON}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use myownshell_session::protocol::Size;

    #[test]
    fn hellos_are_checked_with_named_rules() {
        let ok =
            Hello { version: VERSION, user: "alice".into(), session: Which::default(), read_only: false, size: None };
        let with = |f: &dyn Fn(&mut Hello)| {
            let mut h = ok.clone();
            f(&mut h);
            h
        };
        let command = |c: Vec<String>| Which::New { command: Some(c) };
        // (what, hello, None if fine or words of the refusal)
        let cases: Vec<(&str, Hello, Option<&str>)> = vec![
            ("fine", ok.clone(), None),
            ("a newer version", with(&|h| h.version = VERSION + 1), Some("protocol version 2")),
            ("version 0", with(&|h| h.version = 0), Some("protocol version 0")),
            ("no user", with(&|h| h.user.clear()), Some("no user")),
            ("a long user", with(&|h| h.user = "u".repeat(MAX_USER + 1)), Some("over the limit of 256")),
            ("a user with a newline", with(&|h| h.user = "a\nb".into()), Some("control")),
            ("a zero size", with(&|h| h.size = Some(Size { cols: 0, rows: 5 })), Some("0x5")),
            ("a huge size", with(&|h| h.size = Some(Size { cols: 80, rows: 1001 })), Some("1..=1000")),
            ("an empty id", with(&|h| h.session = Which::Attach { id: String::new() }), Some("not a session id")),
            ("an empty command", with(&|h| h.session = command(vec![])), Some("empty")),
            ("an empty program", with(&|h| h.session = command(vec![String::new()])), Some("empty")),
            ("a NUL", with(&|h| h.session = command(vec!["a\0".into()])), Some("NUL")),
            ("many arguments", with(&|h| h.session = command(vec!["a".into(); 65])), Some("65 arguments")),
            ("a long command", with(&|h| h.session = command(vec!["a".repeat(3000)])), Some("over the limit of 2048")),
            ("a command", with(&|h| h.session = command(vec!["top".into(), "-d".into(), "1".into()])), None),
        ];
        for (what, hello, refusal) in cases {
            match (check(&hello), refusal) {
                (Ok(()), None) => {}
                (Err(error), Some(words)) => assert!(error.contains(words), "{what}: {error}"),
                (result, _) => panic!("{what}: {result:?}"),
            }
        }
    }
}
