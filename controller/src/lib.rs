//! The MyOwnShell controller: reconciles each `MyOwnShell` into a Deployment, reports status and
//! conditions, cleans up through the finalizer, and runs as one elected leader among replicas.
//!
//! The folders read like the controller's architecture (ARCHITECTURE.md has the map):
//! - at the root, one reconcile of one shell ([`reconcile`]) with what it shares ([`context`])
//!   and its one error type ([`error`]); the Deployment a shell asks for ([`deployment`]), the
//!   session holder in its pods ([`holder`]), its labels ([`labels`]) and the rule of what is ours to write ([`ownership`]); the Events
//!   publisher ([`events`]) and [`metrics`];
//! - [`cache`]: the watches and what they keep, the read-your-writes memos;
//! - [`life`]: lifetime and rollout decisions (pure);
//! - [`health`]: the pods' and nodes' health and the diagnosis of a shell that cannot run;
//! - [`home`]: the persistent home's claim (`spec.home`): whose it is, what status says of it,
//!   and its writes;
//! - [`network`]: the NetworkPolicies that isolate shell pods, per namespace opened to shells;
//! - [`write`]: the Deployment apply, the status, what is told in Events, cleanup on delete;
//! - [`process`]: flags, the run loop, leader election.
//!
//! Pure logic (the Deployment, the status, labels, lifetimes, rollouts, diagnoses, leader
//! decisions) lives in plain functions with table-driven tests; API calls sit in `reconcile`,
//! `write`, `events` and `process`.

#![warn(missing_docs)]

pub mod cache;
pub mod context;
pub mod deployment;
pub mod error;
pub mod events;
pub mod health;
pub mod holder;
pub mod home;
pub mod labels;
pub mod life;
pub mod metrics;
pub mod network;
pub mod ownership;
pub mod process;
pub mod reconcile;
mod resource_as;
pub mod starts;
pub mod write;

pub use process::args::Args;
pub use process::run::{RunError, run, run_with_client};
