//! The shell's life as decisions: when it runs and when it stops ([`lifetime`]), when a
//! changed pod template may restart its pods ([`rollout`]), and whether its class leaves room for
//! it to start ([`slots`]).
//!
//! Both are pure functions of the spec, the status and the time, with table tests; they decide
//! and never write (the [`crate::write`] folder carries out what they decide). Nothing here keeps
//! state between reconciles but the slot ledger, which only remembers the starts this controller
//! let through since its Deployments show them: every deadline is computed again from stored
//! times, and every count from what runs, so a restart of the controller loses no stop and adds
//! none, and lets no start past a cap.

pub mod lifetime;
pub mod rollout;
pub mod slots;
