//! What `extend` writes, for `kubectl myownshell extend` and the gateway's extend button alike:
//! a merge patch of the shell's spec (so, like any spec change, only its owner may make it).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::MyOwnShell;

/// How far `extend` pushes the stop back when no duration is given and the shell has no idle
/// timeout.
pub const DEFAULT_EXTENSION: Duration = Duration::from_secs(3600);

/// No lifetime stop before `until`.
pub fn extend_patch(until: &Time) -> Value {
    json!({"spec": {"lifetime": {"extendedUntil": until}}})
}

/// The shell's idle timeout as written, which `extend` pushes the stop back by by default.
pub fn idle_timeout(shell: &MyOwnShell) -> Option<&str> {
    shell.spec.lifetime.as_ref()?.idle_timeout.as_deref()
}
