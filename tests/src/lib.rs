//! Test-only helpers for the integration tests in `tests/`, on top of the `myownshell-envtest`
//! cluster: the controller and webhook binaries as processes ([`controller_helpers`],
//! [`controller_test`], [`webhooks`]), an admission gate that holds writes ([`gate`]), and
//! authenticated metrics scrapes ([`scrape`]).

#![warn(missing_docs)]

pub mod controller_helpers;
pub mod controller_test;
pub mod gate;
pub mod scrape;
pub mod webhooks;
