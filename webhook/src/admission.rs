//! The MyOwnShell webhooks' rules as pure functions: a decoded review in ([`crate::review`]), a
//! response out. No I/O, no state, so `dryRun` requests behave exactly like real ones and every
//! rule is a table test. The one reading of the clock (how far `spec.lifetime.extendedUntil` may
//! reach) is taken in `validation::validate` and handed to the pure rule (`lifetime::check`),
//! which the tests call at a fixed time.
//!
//! - [`defaulting`]: the mutating webhook (defaults, the finalizer and the owner as a JSON Patch);
//! - [`validation`]: the validating webhook (rules, ratcheting on update, warnings), with
//!   `resources` and `resource_names` holding `spec.resources` to the apiserver's own rules,
//!   `image` reading image references, `sharing` holding `spec.sharedWith` to its rules,
//!   `lifetime` holding `spec.lifetime` to its (and defaulting it from the flags), `home`
//!   holding `spec.home` to its (and defaulting it), and
//!   `ownership` saying who may change a spec;
//! - [`policy`]: the operator's bounds from the flags, which every rule reads.
//!
//! Must not decide who may connect to a shell (that is [`crate::connect`]'s, which this only
//! asks whether a user is an owner or an admin, and whose shell index names the shell a
//! `kubectl scale` is for), and must not read or write anything but the review and that index.

mod approvals;
pub mod defaulting;
mod home;
pub mod image;
mod lifetime;
mod ownership;
pub mod policy;
pub mod problem;
mod resource_names;
mod resources;
mod sharing;
pub mod validation;

pub use defaulting::mutate;
pub use policy::Policy;
pub use problem::Problem;
pub use validation::{check_size, check_spec, validate, warnings};
