//! The MyOwnShell admission webhook: defaulting, validation and who may connect to a shell as
//! pure functions ([`admission`], [`access`], with [`image`] references; quantities are read by
//! [`myownshell_api::quantity`], shared with the controller), what it knows of every shell
//! ([`shell_index`]), who asks ([`user`]), the record of connections ([`connections`]), a thin HTTP layer
//! ([`server`]), metrics ([`metrics`]), flags ([`args`]) and the process around them ([`run`]).
//! Certificates come from the `myownshell-certs` crate.

#![warn(missing_docs)]

pub mod access;
pub mod admission;
pub mod args;
pub mod connections;
pub mod image;
pub mod metrics;
pub mod run;
pub mod server;
pub mod shell_index;
pub mod user;
