//! The binary's diagnostics: lines on stderr, named for it (the holder's stderr is the shell
//! container's log, shared with the wrapped command's).

/// Write `text` as one line.
pub fn line(text: &str) {
    eprintln!("myownshell-session: {text}");
}
