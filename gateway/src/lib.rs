//! `myownshell-gateway`: the browser door to MyOwnShell.
//!
//! A user opens the gateway's page, signs in with a token the cluster authenticates
//! (`signin`), picks a shell, and gets a terminal (xterm.js) in one of its pods (`web`). The
//! exec is made **as the user** (impersonation, `exec`), so the connect gate decides it, the
//! record of connections names them and the audit log shows them, never the gateway. A terminal
//! survives a closed tab or a network blip for a grace period, with its recent screen
//! (`terminal`). A terminal in use counts as a connection to its shell, and a coming stop is
//! shown in it (`activity`); a user who may no longer connect loses their terminals (`access`). Sessions are recorded where a shell or the gateway's flags ask
//! (`recording`).
//!
//! The gateway's service account can impersonate users, so whoever controls the gateway's
//! process can act as anyone in the cluster: `config/gateway/` grants it nothing else, and the
//! README says what to guard.

#![warn(missing_docs)]

pub mod access;
pub mod activity;
pub mod args;
pub mod exec;
pub mod gateway;
pub mod ids;
pub mod recording;
pub mod run;
pub mod signin;
pub mod terminal;
pub mod web;
