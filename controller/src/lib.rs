//! The MyOwnShell controller: reconciles each `MyOwnShell` into a Deployment, reports status and
//! conditions, cleans up through the finalizer, and runs as one elected leader among replicas.
//!
//! Pure logic (the Deployment, the status, labels, leader decisions, backoff) lives in plain
//! functions with table-driven tests; API calls sit in `reconcile`, `leader` and `run`.

#![warn(missing_docs)]

pub mod announce;
pub mod apply_deployment;
pub mod args;
pub mod cached_deployment;
pub mod cleanup;
pub mod context;
pub mod deployment;
pub mod error;
pub mod events;
pub mod health;
pub mod labels;
pub mod leader;
pub mod lifetime;
pub mod memo;
pub mod metrics;
pub mod namespaces;
pub mod nodes;
pub mod object_map;
pub mod ownership;
pub mod pending_events;
pub mod pods;
pub mod prune;
pub mod reconcile;
mod resource_as;
pub mod rollout;
pub mod run;
pub mod status;
pub mod synced;
pub mod watch;

pub use args::Args;
pub use run::{RunError, run, run_with_client};
