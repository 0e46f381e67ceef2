//! Shell classes (`MyOwnShellClass`) at admission: which class a new shell gets (the default,
//! [`index`]), what the class fills in ([`defaults`]), the rules it sets on the spec and on the
//! class itself ([`rules`], image patterns in [`myownshell_api::image_pattern`]), and whether the requester may use it
//! ([`usage`]: RBAC's `use` verb, asked by SubjectAccessReview).
//!
//! The operator's flags ([`crate::admission::Policy`]) stay the outer bounds: their rules run as
//! before, and a class's run beside them, so a class can tighten a bound, never widen it.
//!
//! Must not: decide who may connect to a shell ([`crate::connect`]), or count running shells
//! (the controller does, one decision at a time, so concurrent creates cannot race past a cap).

pub mod defaults;
pub mod index;
pub mod rules;
pub mod usage;

pub use index::ClassIndex;
