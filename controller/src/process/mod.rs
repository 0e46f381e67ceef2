//! The controller as a process: its flags ([`args`]), the loop that runs it with its servers,
//! watches and orderly shutdown ([`run`]), leader election among replicas ([`leader`]), and the
//! image the session holder comes from ([`own_image`]).
//!
//! Owns everything that starts, stops or waits. Must not hold reconcile logic: `run` wires the
//! [`crate::cache`] watches and the [`crate::reconcile`] function into kube's `Controller`, and a
//! behaviour that a unit test cannot reach without starting the process belongs elsewhere.

pub mod args;
pub mod leader;
pub mod own_image;
pub mod run;
