//! The MyOwnShell admission webhook. Its folders read like its architecture (ARCHITECTURE.md has
//! the map):
//! - [`review`]: the AdmissionReview on the wire (request, spec, who asks, response);
//! - [`admission`]: the spec rules as pure functions (defaulting, validation, the operator's
//!   bounds), with image references; quantities are read by [`myownshell_api::quantity`], shared
//!   with the controller;
//! - [`classes`]: shell classes at admission (the default class, what a class fills in and
//!   holds a spec to, whether the requester may `use` it);
//! - [`connect`]: the connect gate (who may connect to a shell), what it knows of every shell,
//!   and the record of connections;
//! - [`dispatch`]: one review from bytes to answer, for whichever webhook it came to;
//! - [`earlier_pods`]: a new shell inherits no pod (the one review that asks the apiserver);
//! - [`follow`]: a watch into an index (the shells', the classes');
//! - the process: a thin HTTP layer ([`server`]), metrics ([`metrics`]), flags ([`args`]),
//!   the process around them ([`run`]; when a stopping webhook may stop answering is `myownshell_runtime::drain`). Certificates come from the `myownshell-certs` crate.

#![warn(missing_docs)]

pub mod admission;
pub mod args;
pub mod classes;
pub mod connect;
pub mod dispatch;
pub mod earlier_pods;
pub mod follow;
pub mod metrics;
pub mod review;
pub mod run;
pub mod server;

#[cfg(test)]
mod tests;
