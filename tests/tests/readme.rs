//! The README's flag reference is each binary's real `--help` (regenerate with `cargo xtask docs`),
//! and the README leads with the two set-up commands.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use myownshell_tests::assets::{workspace_binary, workspace_root};
use myownshell_tests::readme::{DOCUMENTED_BINARIES, help_text, with_flags};

fn readme() -> String {
    std::fs::read_to_string(workspace_root().join("README.md")).unwrap()
}

#[test]
fn flag_reference_matches_every_binary() {
    let current = readme();
    let mut stale = Vec::new();
    for binary in DOCUMENTED_BINARIES {
        let help = help_text(&workspace_binary(binary).unwrap()).unwrap();
        let expected =
            with_flags(&current, binary, &help).unwrap_or_else(|| panic!("README lacks the {binary} markers"));
        if expected != current {
            stale.push(binary);
        }
    }
    assert!(stale.is_empty(), "README flags are stale for {stale:?}: run `cargo xtask docs`");
}

#[test]
fn the_readme_starts_with_the_two_setup_commands() {
    let text = readme();
    let first_block = text.split("```sh").nth(1).and_then(|b| b.split("```").next()).unwrap_or_default();
    let commands: Vec<&str> =
        first_block.lines().filter_map(|l| l.split('#').next()).map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(commands, ["cargo xtask dev", "cargo xtask test"]);
    let ci = std::fs::read_to_string(workspace_root().join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == "exec cargo xtask test"), ".ci/run must run the README's test command");
}
