//! The certificate lifecycle of the operator's HTTPS endpoints: a small rcgen CA ([`pki`]),
//! self-managed webhook certificates (trust checks in [`trust`], the rotation state machine in
//! [`rotation`], its Secret in [`secret`], `caBundle` injection in [`inject`] and the loop that
//! runs them in [`manager`]), or certificates from files ([`certdir`], cert-manager). Serving
//! them is `myownshell_runtime`'s job.

#![warn(missing_docs)]

pub mod certdir;
pub mod inject;
pub mod manager;
pub mod pki;
pub mod rotation;
pub mod secret;
pub mod trust;
