//! Defaults for unset spec fields. The mutating webhook writes them into the object; the
//! controller applies the same values when it builds a Deployment, so a cluster running without
//! the webhook still gets identical shells.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::ShellResources;

/// One shell pod unless asked otherwise.
pub const SIZE: i32 = 1;
/// A small, pinned image: a tag that moves would make two shells of one spec differ.
pub const IMAGE: &str = "busybox:1.37.0";
/// Printed by the default command once the shell pod is up; handy for `kubectl logs`.
pub const READY_LINE: &str = "myownshell ready";

/// Where a shell with `spec.home` finds its home (and `$HOME` points); the image's own
/// contents of this directory seed an empty home once.
pub const HOME_DIR: &str = "/home/shell";
/// The size of a home whose `spec.home.size` is unset (the webhook's `--home-default-size`
/// writes its own; this is for a cluster running without the webhook).
pub const HOME_SIZE: &str = "1Gi";

/// Print a ready line, then sleep forever (until the pod is stopped).
pub fn command() -> Vec<String> {
    vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        format!("echo '{READY_LINE}'; trap 'exit 0' TERM; while true; do sleep 3600 & wait $!; done"),
    ]
}

/// Small requests and limits: a shell is mostly idle.
pub fn resources() -> ShellResources {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])
    };
    ShellResources { requests: Some(quantities("10m", "16Mi")), limits: Some(quantities("200m", "64Mi")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_command_prints_the_ready_line_and_never_ends() {
        let cmd = command();
        assert_eq!(cmd[0], "/bin/sh");
        assert!(cmd[2].contains(READY_LINE));
        assert!(cmd[2].contains("while true"));
    }

    #[test]
    fn default_resources_have_requests_below_limits() {
        let r = resources();
        let (requests, limits) = (r.requests.unwrap_or_default(), r.limits.unwrap_or_default());
        assert_eq!(requests.keys().collect::<Vec<_>>(), limits.keys().collect::<Vec<_>>());
    }
}
