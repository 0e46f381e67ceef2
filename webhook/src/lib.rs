//! The MyOwnShell admission webhook: defaulting and validation as pure functions
//! ([`admission`], with [`image`] references; quantities are read by
//! [`myownshell_api::quantity`], shared with the controller), a thin HTTP layer
//! ([`server`]), metrics ([`metrics`]), flags ([`args`]) and the process around them ([`run`]).
//! Certificates come from the `myownshell-certs` crate.

#![warn(missing_docs)]

pub mod admission;
pub mod args;
pub mod image;
pub mod metrics;
pub mod run;
pub mod server;
