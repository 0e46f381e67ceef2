//! The holder (`serve`): the process (`serve`), its socket (`socket`) and connections
//! (`listener`, `connection`, with `hello` checking a hello), the sessions (`registry`), one
//! session's task (`session`) with its PTY (`pty`), its clients and their queues (`members`),
//! its output path (`output`, deciding frames with `coalesce`, replaying with `scrollback`), and
//! who may do what in it (`roles`).
//!
//! Must not: wait for a child itself (`crate::procs::reaper` owns every exit status), trust a
//! client's announced sizes before checking them, or hold a lock across an await.

pub mod coalesce;
pub mod connection;
pub mod hello;
pub mod listener;
pub mod members;
pub mod output;
pub mod pty;
pub mod registry;
pub mod roles;
pub mod scrollback;
pub mod serve;
pub mod session;
pub mod socket;
