//! Why a shell's pods cannot run, said within seconds: what the kubelet and the scheduler wrote
//! into each pod ([`pods`], indexed by shell), which nodes are not ready ([`nodes`]), and the
//! diagnosis made of both at a given time ([`diagnose`], pure, table-tested).
//!
//! Owns the slim pod and node types the pod and node watches decode into. Must not write
//! anything, nor keep more of a pod or a node than the diagnosis reads (10,000 shells' pods are
//! held in memory): the status and Events that tell users are the [`crate::write`] folder's.

pub mod diagnose;
pub mod nodes;
pub mod pods;
