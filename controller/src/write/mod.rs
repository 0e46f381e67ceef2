//! Everything a reconcile writes: the Deployment, server-side applied only when it differs
//! ([`apply_deployment`]); the status and conditions, computed as a pure function ([`status`]);
//! what each status write changes, for the debug log ([`status_changes`]);
//! what a reconcile tells in Events ([`announce`], published by [`crate::events`]); and the
//! cleanup of a deleted shell ([`cleanup`]: its Deployment deleted, its pods awaited, then the
//! finalizer released); a stopped shell's Deployment deleted ([`stop_deployment`]), a burst's
//! deletes sent before its stops' records ([`deletes_in_flight`]); and the
//! standing sweep of whatever outlived its shell ([`sweep`], which reads through [`sweep_list`]).
//!
//! Must not write or delete what is not ours (every Deployment write and delete goes through
//! [`crate::ownership`]'s rule, with a uid precondition on delete; the sweep deletes only what is
//! labelled as the operator's and as a shell's, which the admission policies let nobody else
//! make, and only once that shell is gone), must not write what has not
//! changed (a restart over 10,000 converged shells writes nothing), and must not decide lifetimes
//! or rollouts: it carries out what [`crate::life`] decided.

pub mod announce;
pub mod apply_deployment;
pub mod cleanup;
pub mod deletes_in_flight;
pub mod status;
pub mod status_changes;
pub mod stop_deployment;
pub mod sweep;
pub mod sweep_list;
