//! Test-only helpers for the integration tests in `tests/`, on top of the `myownshell-envtest`
//! cluster: who may get into a shell ([`access`]) through every door of `docs/doors.yaml` ([`doors`]), a real browser ([`browser`]), the controller and webhook binaries as processes ([`controller`], [`webhooks`]), an admission gate that holds writes ([`gate`]),
//! authenticated metrics scrapes ([`scrape`]), server-sent events as a page reads them ([`events`]), TLS clients ([`tls_client`]), what the
//! `rbac_proxy*` tests share ([`rbac_proxy`]), the `kubectl myownshell` plugin as users run it
//! ([`plugin`]), and shell pods with the statuses a kubelet would write ([`shell_pods`]).

#![warn(missing_docs)]

pub mod access;
pub mod browser;
pub mod controller;
pub mod doors;
pub mod events;
pub mod gate;
pub mod gateway;
pub mod plugin;
pub mod rbac_proxy;
pub mod scrape;
pub mod shell_pods;
pub mod tls_client;
pub mod tokens;
pub mod webhooks;
