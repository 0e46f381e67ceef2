//! A shell's persistent home (`spec.home`): one PersistentVolumeClaim named after the shell,
//! owned by it, mounted as `$HOME` by its one pod.
//!
//! - [`claim`]: the claim a shell asks for, and whose an existing claim is (pure);
//! - [`cached`]: the watch of the shells' claims (by label), kept as the little status needs;
//! - [`assess`]: what the claim's state means for the shell: `status.home`, `HomeReady`, and
//!   whether a problem with it is the shell's `Degraded` reason (pure);
//! - [`mount`]: the claim in the shell's pod as `$HOME`, seeded once, rolled by `Recreate`
//!   (pure; `crate::deployment` calls it);
//! - [`write`]: creating, adopting, growing, releasing and deleting claims.
//!
//! Must not write a claim that [`claim::Ownership`] does not call ours, nor mount one.

pub mod assess;
pub mod cached;
pub mod claim;
pub mod mount;
pub mod write;
