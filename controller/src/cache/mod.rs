//! What the controller knows without asking the apiserver: its watches and what they keep.
//!
//! Owns the watch streams of shells and Deployments and the reflector stores they fill
//! ([`watch`]), what an object is pruned to before it is kept ([`prune`], [`cached_deployment`],
//! [`cached_shell`], both [`packed`]),
//! the signal that a store holds its first list ([`synced`]), the read-your-writes memos that
//! cover the time between a write and its echo ([`memo`]), the small shared maps ([`object_map`],
//! [`pending_events`]), the namespaces being deleted ([`namespaces`]) and those opened to shells
//! ([`open_namespaces`]), and the shell classes ([`classes`]). The pod and node
//! indexes are the [`crate::health`] folder's, fed by the watches started here.
//!
//! Must not write to the apiserver or decide anything about a shell: a cache that acted would be
//! a second reconcile with none of its ownership checks. Everything here is read by reconcile
//! and written only from watch events or the memos reconcile hands it.

pub mod cached_deployment;
pub mod cached_shell;
pub mod classes;
pub mod memo;
pub mod namespaces;
pub mod object_map;
pub mod open_namespaces;
pub mod packed;
pub mod pending_events;
pub mod prune;
pub mod synced;
pub mod watch;
