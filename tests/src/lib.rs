//! Test-only helpers for the integration tests in `tests/`, on top of the `myownshell-envtest`
//! cluster: who may get into a shell ([`access`]), the controller and webhook binaries as processes ([`controller`], [`webhooks`]), an admission gate that holds writes ([`gate`]),
//! authenticated metrics scrapes ([`scrape`]), TLS clients ([`tls_client`]), and what the
//! `rbac_proxy*` tests share ([`rbac_proxy`]).

#![warn(missing_docs)]

pub mod access;
pub mod controller;
pub mod gate;
pub mod rbac_proxy;
pub mod scrape;
pub mod tls_client;
pub mod webhooks;
