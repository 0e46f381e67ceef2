//! The README's flag reference: the marked blocks that `cargo xtask docs` fills with each
//! binary's clap `--help`.

use std::path::Path;

/// Binaries whose flags the README documents.
pub const DOCUMENTED_BINARIES: [&str; 3] = ["myownshell-controller", "myownshell-webhook", "myownshell-rbac-proxy"];

fn markers(binary: &str) -> (String, String) {
    (format!("<!-- flags:{binary}:start -->"), format!("<!-- flags:{binary}:end -->"))
}

/// `readme` with the block for `binary` replaced by `help` in a code fence; `None` if the
/// markers are missing.
pub fn with_flags(readme: &str, binary: &str, help: &str) -> Option<String> {
    let (start, end) = markers(binary);
    let begin = readme.find(&start)? + start.len();
    let finish = begin + readme[begin..].find(&end)?;
    let block = format!("\n```text\n{}\n```\n", help.trim_end());
    Some(format!("{}{block}{}", &readme[..begin], &readme[finish..]))
}

/// `<binary> --help`, with nothing that depends on the machine.
pub fn help_text(binary: &Path) -> Result<String, String> {
    let out = std::process::Command::new(binary)
        .arg("--help")
        .env("COLUMNS", "100")
        .env_remove("POD_NAMESPACE")
        .output()
        .map_err(|e| format!("running {} --help: {e}", binary.display()))?;
    if !out.status.success() {
        return Err(format!("{} --help failed: {}", binary.display(), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_the_marked_block() {
        let readme = "a\n<!-- flags:x:start -->\nold\n<!-- flags:x:end -->\nb\n";
        let out = with_flags(readme, "x", "Usage: x\n").unwrap_or_default();
        assert_eq!(out, "a\n<!-- flags:x:start -->\n```text\nUsage: x\n```\n<!-- flags:x:end -->\nb\n");
        assert_eq!(with_flags(&out, "x", "Usage: x\n").as_deref(), Some(out.as_str()), "idempotent");
        assert!(with_flags(readme, "y", "").is_none());
    }
}
