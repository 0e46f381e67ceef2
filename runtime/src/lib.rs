//! What every MyOwnShell binary does the same way, in one place: the skeleton of `main`
//! ([`process`]: logging, the crypto provider, the tokio runtime, exit codes), logging ([`log`]),
//! shutdown on SIGTERM/SIGINT ([`shutdown`]), the Kubernetes client from `--kubeconfig`
//! ([`client`], on a pool that closes idle connections: [`client_pool`]), the `/healthz` +
//! `/readyz` probes and the plain-HTTP server they run on
//! ([`probes`]), the `/metrics` route ([`metrics`]), their [`paths`], shared flags ([`flags`]),
//! durations and times as Kubernetes writes them ([`time`]), and the HTTPS server every
//! TLS endpoint runs on: rustls with live certificate swaps ([`tls`]), HTTP/1.1 with graceful
//! shutdown and a connection limit ([`server`]), and a guard per connection that closes the
//! ones doing nothing useful ([`guard`]).
//!
//! Linkerd's `kubert` is the model; it is not used itself because its newest release (0.25)
//! is built on kube 1.1 and k8s-openapi 0.25, and this workspace is on kube 5 / k8s-openapi 0.29.

#![warn(missing_docs)]

pub mod client;
pub mod client_pool;
pub mod drain;
pub mod events;
pub mod flags;
pub mod guard;
pub mod log;
pub mod metrics;
pub mod paths;
pub mod pod;
pub mod probes;
pub mod process;
pub mod server;
pub mod shutdown;
pub mod time;
pub mod tls;
