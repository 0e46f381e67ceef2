//! What `start`, `stop` and `extend` write, for `kubectl myownshell` and the gateway's page
//! alike: merge patches of the shell's spec (so, like any spec change, only its owner may make
//! them).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::MyOwnShell;

/// How far `extend` pushes the stop back when no duration is given and the shell has no idle
/// timeout.
pub const DEFAULT_EXTENSION: Duration = Duration::from_secs(3600);

/// `start`: run again, its lifetime's clocks restarted at `now`.
pub fn start_patch(now: &Time) -> Value {
    json!({"spec": {"stopped": false, "lifetime": {"restartedAt": now}}})
}

/// `stop`: no pods, from now on (the shell, its home and its size stay).
pub fn stop_patch() -> Value {
    json!({"spec": {"stopped": true}})
}

/// No lifetime stop before `until`.
pub fn extend_patch(until: &Time) -> Value {
    json!({"spec": {"lifetime": {"extendedUntil": until}}})
}

/// The shell's idle timeout as written, which `extend` pushes the stop back by by default.
pub fn idle_timeout(shell: &MyOwnShell) -> Option<&str> {
    shell.spec.lifetime.as_ref()?.idle_timeout.as_deref()
}
