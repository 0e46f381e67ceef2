//! `/proc/PID/stat`, read for the three fields the holder needs: state, process group and
//! session. A process's session id is inherited by everything it starts (background jobs,
//! pipelines, daemons that do not call `setsid` themselves), so it finds all of a session's
//! processes even after its leader is gone: the kernel never reuses a pid that is still some
//! live process's session id.

use std::path::Path;

/// What the holder reads of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    /// `R`, `S`, `D`, `Z` (exited, not yet reaped), `T`, …
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

impl Stat {
    /// Whether it is still running code (a zombie has exited and only awaits its reaper).
    pub fn alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parse one `stat` line. The command name is in parentheses and may itself hold spaces and
/// parentheses, so the fields after it are found from the last `)`.
pub fn parse(line: &str) -> Option<Stat> {
    let (head, tail) = line.rsplit_once(')')?;
    let pid = head.split_once(" (")?.0.trim().parse().ok()?;
    let mut fields = tail.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let mut number = || fields.next()?.parse::<i32>().ok();
    Some(Stat { pid, state, ppid: number()?, pgrp: number()?, session: number()? })
}

/// Every process under `proc_dir` (normally `/proc`) that can be read now. Processes that exit
/// while being read are skipped, not errors.
pub fn all(proc_dir: &Path) -> std::io::Result<Vec<Stat>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(proc_dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        if let Some(stat) = std::fs::read_to_string(entry.path().join("stat")).ok().as_deref().and_then(parse) {
            found.push(stat);
        }
    }
    Ok(found)
}

/// The live processes of session `session`.
pub fn of_session(session: i32) -> std::io::Result<Vec<i32>> {
    Ok(all(Path::new("/proc"))?.into_iter().filter(|s| s.session == session && s.alive()).map(|s| s.pid).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_whatever_the_command_name() {
        // (what, line, parsed)
        let stat = |pid, state, ppid, pgrp, session| Some(Stat { pid, state, ppid, pgrp, session });
        let cases: &[(&str, &str, Option<Stat>)] = &[
            ("plain", "42 (sh) S 1 42 42 34816 42 4194560 0 0", stat(42, 'S', 1, 42, 42)),
            ("spaces and parens in the name", "7 (a (b) c) R 6 5 4 0 -1", stat(7, 'R', 6, 5, 4)),
            ("a zombie", "9 (sleep) Z 1 8 8 0", stat(9, 'Z', 1, 8, 8)),
            ("a name ending in a paren", "3 (x)) S 2 3 1 0", stat(3, 'S', 2, 3, 1)),
            ("cut short", "5 (sh) S 1 5", None),
            ("no name", "5 S 1 5 5", None),
            ("empty", "", None),
            ("not numbers", "x (sh) S a b c", None),
        ];
        for (what, line, expected) in cases {
            assert_eq!(&parse(line), expected, "{what}");
        }
    }

    #[test]
    fn this_process_is_found_in_its_own_session() {
        // The session is read from `/proc/self/stat`, not `getsid`: under a sandbox whose session
        // leader lives outside this pid namespace the kernel reports session 0, which `rustix`
        // refuses to hold as a pid (seen in CI).
        let me = std::process::id() as i32;
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        let session = parse(&own).unwrap().session;
        assert!(of_session(session).unwrap().contains(&me));
        let mine = all(Path::new("/proc")).unwrap().into_iter().find(|s| s.pid == me).unwrap();
        assert!(mine.alive());
        assert_eq!(mine.session, session);
    }
}
