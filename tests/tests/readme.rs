//! The README leads with the two set-up commands, and CI runs the second. (That its flag
//! reference is each binary's real `--help` is tested next to its generator, in xtask.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use myownshell_envtest::assets::workspace_root;

fn readme() -> String {
    std::fs::read_to_string(workspace_root().join("README.md")).unwrap()
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
