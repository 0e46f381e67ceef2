//! `kubectl myownshell` (the `kubectl-myownshell` binary on `PATH`, whose entry is `main.rs`):
//! list your shells, connect to one, list its sessions, start, stop, extend or update them.
//! The modules are a library so that the session client (`attach`) can be tested against a real
//! holder from `tests/`.

pub mod args;
pub mod attach;
pub mod classes;
pub mod client;
pub mod connect;
pub mod credential;
pub mod direct;
pub mod gateway;
pub mod lifecycle;
pub mod ls;
pub mod pod;
pub mod sessions;
pub mod table;
pub mod whoami;
