//! The bounds the operator sets for every shell with the webhook's flags, read by every rule of
//! [`crate::admission`] (and by the lifetime defaulting). Its own module because the mutating and
//! validating rules both read it, and neither should depend on the other for it.

use std::time::Duration;

/// The operator's admission settings (`--max-size`, `--allowed-registries`, `--admin-groups`,
/// `--max-run-time`, `--default-idle-timeout`, `--home-default-size`, `--home-max-size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Largest `spec.size` admitted.
    pub max_size: i32,
    /// Registries or repository prefixes images may come from; empty means any.
    pub allowed_registries: Vec<String>,
    /// Groups whose members may change any shell's spec, besides its owner.
    pub admin_groups: Vec<String>,
    /// The longest `spec.lifetime.maxRunTime` admitted, and the one a spec without it gets.
    pub max_run_time: Option<Duration>,
    /// The `spec.lifetime.idleTimeout` a spec without one gets.
    pub default_idle_timeout: Option<Duration>,
    /// The `spec.home.size` a home without one gets (a quantity, checked when the flags are
    /// read).
    pub home_default_size: String,
    /// The largest `spec.home.size` admitted (a quantity, checked when the flags are read).
    pub home_max_size: String,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_size: 50,
            allowed_registries: Vec::new(),
            admin_groups: vec!["system:masters".to_owned()],
            max_run_time: None,
            default_idle_timeout: None,
            home_default_size: myownshell_api::defaults::HOME_SIZE.to_owned(),
            home_max_size: "10Gi".to_owned(),
        }
    }
}
