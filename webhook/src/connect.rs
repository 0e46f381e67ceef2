//! The connect gate: who may exec, attach, port-forward, proxy to or debug a shell's pods.
//!
//! - [`gate`]: the connect webhook's decision on one CONNECT (or ephemeral-container) review;
//! - [`access`]: the decision table itself, as pure functions (which shell a pod is, who may
//!   connect, who may change a spec), the same table the `ValidatingAdmissionPolicy` in
//!   `config/policy/services_proxy.yaml` keeps for requests proxied through a Service;
//! - [`shell_index`]: what the webhook knows of every shell, kept by a watch;
//! - [`record`]: the record of connections (Events, `status.lastConnection`), aggregated.
//!
//! `gate` and `access` are pure; only `shell_index` (a watch) and `record` (its writes) do I/O.
//! This is the gate itself (its webhook configuration fails closed): it must not let a request
//! through for a pod it cannot place (before the first list of shells), and must not record
//! anything it did not decide.

pub mod access;
pub mod gate;
pub mod record;
pub mod shell_index;

pub use access::ShellAccess;
pub use shell_index::ShellIndex;
