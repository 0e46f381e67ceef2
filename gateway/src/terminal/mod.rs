//! Terminals: one exec each (`session`), the recent screen kept for a reattaching page
//! (`scrollback`), and the open ones with their limits (`registry`).
//!
//! Must not: decide who may open a terminal (the apiserver and the connect gate do, asked as
//! the user), or hand a terminal to anyone but the user who opened it.

pub mod registry;
pub mod scrollback;
pub mod session;
