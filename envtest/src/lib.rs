//! The test cluster as a library, like controller-runtime's envtest: a real etcd and
//! kube-apiserver per process ([`control_plane`], binaries found by [`assets`]), clients for
//! the admin and for any identity ([`namespace`], [`rbac`]), real `kubectl` ([`kubectl`]) and
//! `kustomize` rendering ([`kustomize`]), child processes that die with the test ([`process`]),
//! loopback ports ([`ports`]), a plain-HTTP probe client ([`http`]), throwaway TLS for servers
//! under test ([`tls`]) and polling with a deadline
//! ([`wait`]); and a real cluster of one or more nodes ([`node`]): containerd, kubelet and
//! kube-proxy per node, kube-controller-manager and kube-scheduler, with locally built images;
//! nodes a test can kill and start again. The integration tests, the benchmarks and
//! `cargo xtask dev` all run on it.
//! For load at scale, a cluster of fake nodes ([`kwok`]) runs pods with no kubelet at all; both
//! start kube-controller-manager and kube-scheduler through [`components`].
//! For sign-in, a real OpenID Connect provider ([`oidc`]: Ory Hydra with a login page of our
//! own and test users) and a control plane whose apiserver trusts it.

#![warn(missing_docs)]

pub mod assets;
pub mod components;
pub mod control_plane;
pub mod http;
pub mod kubectl;
pub mod kustomize;
pub mod kwok;
pub mod namespace;
pub mod node;
pub mod oidc;
pub mod ports;
pub mod process;
pub mod rbac;
pub mod tls;
pub mod wait;
pub mod web;

pub use control_plane::{ControlPlane, HarnessError, shared, shared_with};
pub use kubectl::Kubectl;
pub use namespace::{create_namespace, create_shell_namespace, service_account_token, service_account_user};
pub use wait::eventually;
