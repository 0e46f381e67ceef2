//! Shells' network isolation: the NetworkPolicies that select shell pods in every namespace
//! opened to shells (issue 42), as a pure function of the namespace and the operator's flags
//! ([`desired`]), and the loop that keeps them there, puts them back when edited or deleted, and
//! deletes them where a namespace is closed ([`isolate`]), and what it tells of others' policies
//! that open shells anyway ([`foreign`]: made before their namespace was opened, or by an
//! administrator).
//!
//! Must not write or delete a NetworkPolicy that is not the operator's (labelled as its own,
//! [`desired::is_ours`]), nor decide anything about a shell: a shell runs whatever its policies.
//! What keeps editors' own policies from opening shells again is the apiserver's
//! (`config/policy/shell_network.yaml`), not this folder's.

pub mod desired;
pub mod foreign;
pub mod isolate;
