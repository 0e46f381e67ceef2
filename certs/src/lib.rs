//! Certificates and TLS serving for the operator's HTTPS endpoints: a small rcgen CA
//! ([`pki`]), a rustls resolver that swaps certificates live ([`tls`]), and an HTTP/1.1-over-TLS
//! server with graceful shutdown ([`server`]).

pub mod pki;
pub mod server;
pub mod tls;
