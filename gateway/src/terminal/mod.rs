//! Terminals: one exec each (`session`), in one of two kinds: held in the shell's pod by its
//! session holder (`held`: the session outlives the page, the exec and the gateway; any replica
//! reattaches), or, for a pod from before the holder, a plain `sh` that lives in this process
//! for a grace period; the recent screen kept for a reattaching page (`scrollback`), and the
//! open ones with their limits (`registry`).
//!
//! Must not: decide who may open a terminal (the apiserver and the connect gate do, asked as
//! the user), or hand a terminal to anyone but the user who opened it (a held session only to
//! its creator, or to those the shell is shared with when its owner created it).

pub mod held;
pub mod registry;
pub mod scrollback;
pub mod session;
