//! The README's generated parts: the marked blocks that `cargo xtask docs` fills with each
//! binary's clap `--help`, the table of condition and Event reasons, and the oauth2-proxy recipe.

use std::path::Path;

use myownshell_api::names::reasons::{self, Use};

/// Binaries whose flags the README documents.
pub const DOCUMENTED_BINARIES: [&str; 4] =
    ["myownshell-controller", "myownshell-webhook", "myownshell-gateway", "myownshell-rbac-proxy"];

/// `readme` with the text between `<!-- {name}:start -->` and `<!-- {name}:end -->` replaced
/// by `block`; `None` if the markers are missing.
fn with_block(readme: &str, name: &str, block: &str) -> Option<String> {
    let (start, end) = (format!("<!-- {name}:start -->"), format!("<!-- {name}:end -->"));
    let begin = readme.find(&start)? + start.len();
    let finish = begin + readme[begin..].find(&end)?;
    Some(format!("{}\n{}{}", &readme[..begin], block, &readme[finish..]))
}

/// `readme` with the block for `binary` replaced by `help` in a code fence; `None` if the
/// markers are missing.
pub fn with_flags(readme: &str, binary: &str, help: &str) -> Option<String> {
    with_block(readme, &format!("flags:{binary}"), &format!("```text\n{}\n```\n", help.trim_end()))
}

/// `readme` with the reasons table (`<!-- reasons:start/end -->`) made from
/// `myownshell_api::names::reasons::ALL`; `None` if the markers are missing.
pub fn with_reasons(readme: &str) -> Option<String> {
    with_block(readme, "reasons", &reasons_table())
}

/// `readme` with the table of doors (`<!-- doors:start/end -->`) made from `doors_yaml`
/// (`docs/doors.yaml`); `Err` if the markers are missing or the file does not read.
pub fn with_doors(readme: &str, doors_yaml: &str) -> Result<String, String> {
    let table = crate::doors::table(doors_yaml)?;
    with_block(readme, "doors", &table).ok_or_else(|| "README.md has no <!-- doors:start/end --> markers".to_owned())
}

/// `readme` with the oauth2-proxy recipe (`<!-- oauth2-proxy:start/end -->`): the command line
/// the e2e runs in front of the gateway, made by the same code
/// (`myownshell_envtest::oidc::oauth2_proxy::recipe`); `None` if the markers are missing.
pub fn with_oauth2_proxy(readme: &str) -> Option<String> {
    let recipe = myownshell_envtest::oidc::oauth2_proxy::recipe();
    with_block(readme, "oauth2-proxy", &format!("```sh\n{recipe}```\n"))
}

/// Every reason as a Markdown table: the reason, where it appears, what it means.
pub fn reasons_table() -> String {
    let mut table = String::from("| reason | where | meaning |\n| --- | --- | --- |\n");
    for reason in reasons::ALL {
        let uses: Vec<String> = reason
            .uses
            .iter()
            .map(|u| match u {
                Use::Condition(c) => format!("`{c}`"),
                Use::NormalEvent => "Normal Event".to_owned(),
                Use::WarningEvent => "Warning Event".to_owned(),
                Use::Failure => "`Degraded=True`, Warning Event".to_owned(),
                Use::Stop => "`status.stopped.reason`".to_owned(),
                Use::PodFailure => "`Degraded=True`, `Available=False`, Warning Event".to_owned(),
                Use::Transition => "`lifetime_transitions_total{transition}`".to_owned(),
            })
            .collect();
        let meaning = reason.meaning.split_whitespace().collect::<Vec<_>>().join(" ");
        table.push_str(&format!("| `{}` | {} | {} |\n", reason.name, uses.join(", "), meaning));
    }
    table
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

    #[test]
    fn the_reasons_table_has_a_row_per_reason() {
        let table = reasons_table();
        assert_eq!(table.lines().count(), reasons::ALL.len() + 2);
        assert!(
            table.contains("| `ShellsReady` | `Available=True` | Every requested shell pod is ready. |"),
            "{table}"
        );
        let readme = "<!-- reasons:start -->\n<!-- reasons:end -->\n";
        assert_eq!(with_reasons(readme), Some(format!("<!-- reasons:start -->\n{table}<!-- reasons:end -->\n")));
    }
}
