//! Certificates and TLS serving for the operator's HTTPS endpoints: a small rcgen CA
//! ([`pki`]), a rustls resolver that swaps certificates live ([`tls`]), an HTTP/1.1-over-TLS
//! server with graceful shutdown ([`server`]), and self-managed webhook certificates: trust
//! checks ([`trust`]), the rotation state machine ([`rotation`]), its Secret ([`secret`]),
//! `caBundle` injection ([`inject`]) and the loop that runs them ([`manager`]); or certificates
//! from files ([`certdir`], cert-manager).

pub mod certdir;
pub mod guard;
pub mod inject;
pub mod manager;
pub mod pki;
pub mod rotation;
pub mod secret;
pub mod server;
pub mod tls;
pub mod trust;
