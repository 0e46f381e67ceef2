//! The shell's life as decisions: when it runs and when it stops ([`lifetime`]), and when a
//! changed pod template may restart its pods ([`rollout`]).
//!
//! Both are pure functions of the spec, the status and the time, with table tests; they decide
//! and never write (the [`crate::write`] folder carries out what they decide). Nothing here keeps
//! state between reconciles: every deadline is computed again from stored times, so a restart
//! of the controller loses no stop and adds none.

pub mod lifetime;
pub mod rollout;
