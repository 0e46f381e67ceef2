//! The test harness: a real etcd + kube-apiserver per test binary (envtest-like), clients for
//! the admin and for any identity, real `kubectl`, and polling helpers. `cargo xtask dev` uses
//! the same code to run the operator locally.

pub mod assets;
pub mod control_plane;
pub mod controller_helpers;
pub mod controller_test;
pub mod gate;
pub mod http;
pub mod kubectl;
pub mod kustomize;
pub mod namespace;
pub mod ports;
pub mod process;
pub mod rbac;
pub mod readme;
pub mod scrape;
pub mod wait;
pub mod webhooks;

pub use control_plane::{ControlPlane, HarnessError, shared};
pub use kubectl::Kubectl;
pub use myownshell_api::names::METRICS_PATH;
pub use namespace::{create_namespace, service_account_token, service_account_user};
pub use wait::eventually;
