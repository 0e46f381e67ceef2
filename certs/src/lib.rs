//! Certificates for the operator: a small rcgen CA ([`pki`]) today; the live-swapping rustls
//! resolver, Secret storage, caBundle injection and rotation build on it.

pub mod pki;
