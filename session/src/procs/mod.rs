//! Processes: the holder reaps every child and orphan (`reaper`: it is pid 1 of the shell's
//! container, or a child subreaper when it is not), finds a session's processes by session id in
//! `/proc` (`stat`), and ends them: SIGHUP, a short grace, SIGKILL, and proof that none is left
//! (`end`).
//!
//! Must not: wait for a child anywhere else. One `waitpid(-1)` owns every exit status; a second
//! waiter (tokio::process, `std::process::Child::wait`) would steal statuses from it or lose its
//! own, which is why sessions are spawned with `std::process` and never waited on directly.

pub mod end;
pub mod reaper;
pub mod stat;
