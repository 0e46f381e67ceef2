//! Questions about certificates that rotation and readiness ask: does this CA bundle trust this
//! serving certificate (the same chain check a TLS client such as kube-apiserver makes), and when
//! does a certificate expire.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use myownshell_runtime::tls::certs_from_pem;

/// Validity window of a certificate, as Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// Start of the window (`notBefore`), inclusive.
    pub not_before: i64,
    /// End of the window (`notAfter`): the certificate expires then.
    pub not_after: i64,
}

impl Validity {
    /// [`Validity::not_after`] as a `SystemTime` (the Unix epoch if it lies before that).
    pub fn not_after_time(&self) -> SystemTime {
        unix_time(self.not_after)
    }

    /// Time left until `not_after` (zero once expired).
    pub fn remaining(&self, now: SystemTime) -> Duration {
        self.not_after_time().duration_since(now).unwrap_or(Duration::ZERO)
    }

    /// Seconds until expiry, negative once expired (for metrics).
    pub fn seconds_left(&self, now: SystemTime) -> f64 {
        let now = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        self.not_after as f64 - now
    }
}

fn unix_time(secs: i64) -> SystemTime {
    if secs >= 0 { UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs()) } else { UNIX_EPOCH }
}

/// The validity window of a DER certificate.
pub fn validity(der: &CertificateDer<'_>) -> Result<Validity, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| format!("bad certificate: {e}"))?;
    let v = cert.validity();
    Ok(Validity { not_before: v.not_before.timestamp(), not_after: v.not_after.timestamp() })
}

/// The validity window of the first certificate in a PEM chain.
pub fn validity_pem(pem: &str) -> Result<Validity, String> {
    let first = certs_from_pem(pem).map_err(|e| e.to_string())?.into_iter().next().ok_or("no certificate")?;
    validity(&first)
}

/// Every certificate of a PEM bundle, in order. Unparseable PEM gives an error.
pub fn bundle_certs(bundle_pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    certs_from_pem(bundle_pem).map_err(|e| e.to_string())
}

/// Whether a TLS client trusting exactly the CAs in `bundle_pem` accepts `leaf` for `server_name`
/// at `now`: the same path building, signature, validity and name checks it would make.
pub fn verify_leaf(
    leaf: &CertificateDer<'_>,
    bundle_pem: &str,
    server_name: &str,
    now: SystemTime,
) -> Result<(), String> {
    let mut roots = RootCertStore::empty();
    for ca in bundle_certs(bundle_pem)? {
        roots.add(ca).map_err(|e| format!("unusable CA certificate in the bundle: {e}"))?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| format!("verifier: {e}"))?;
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| format!("bad server name: {e}"))?;
    let now = UnixTime::since_unix_epoch(now.duration_since(UNIX_EPOCH).unwrap_or_default());
    verifier.verify_server_cert(leaf, &[], &name, &[], now).map(|_| ()).map_err(|e| e.to_string())
}

/// PEM bundles compared as sets of certificates (order and whitespace do not matter).
pub fn same_certificates(a: &str, b: &str) -> bool {
    match (bundle_certs(a), bundle_certs(b)) {
        (Ok(x), Ok(y)) => {
            let set = |v: Vec<CertificateDer<'static>>| {
                v.into_iter().map(|c| c.to_vec()).collect::<std::collections::BTreeSet<_>>()
            };
            set(x) == set(y)
        }
        _ => false,
    }
}

/// Whether `bundle_pem` holds the certificate `cert_pem`.
pub fn bundle_contains(bundle_pem: &str, cert_pem: &str) -> bool {
    match (bundle_certs(bundle_pem), certs_from_pem(cert_pem)) {
        (Ok(all), Ok(one)) => one.first().is_some_and(|c| all.contains(c)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{CertificateAuthority, LeafSpec};

    const HOUR: Duration = Duration::from_secs(3600);

    fn leaf_of(ca: &CertificateAuthority, name: &str) -> CertificateDer<'static> {
        let pem = ca.issue(&LeafSpec::server("svc", vec![name.into()], vec![], HOUR)).unwrap();
        certs_from_pem(&pem.cert_pem).unwrap().remove(0)
    }

    #[test]
    fn a_bundle_trusts_what_its_cas_signed_and_nothing_else() {
        let (a, b) =
            (CertificateAuthority::generate("a", HOUR).unwrap(), CertificateAuthority::generate("b", HOUR).unwrap());
        let leaf = leaf_of(&a, "svc.ns.svc");
        let now = SystemTime::now();
        assert!(verify_leaf(&leaf, a.cert_pem(), "svc.ns.svc", now).is_ok());
        assert!(verify_leaf(&leaf, b.cert_pem(), "svc.ns.svc", now).is_err());
        let both = format!("{}{}", b.cert_pem(), a.cert_pem());
        assert!(verify_leaf(&leaf, &both, "svc.ns.svc", now).is_ok());
        assert!(verify_leaf(&leaf, a.cert_pem(), "other.ns.svc", now).is_err(), "name is checked");
        assert!(verify_leaf(&leaf, a.cert_pem(), "svc.ns.svc", now + 2 * HOUR).is_err(), "expiry is checked");
        assert!(verify_leaf(&leaf, "", "svc.ns.svc", now).is_err());
    }

    #[test]
    fn validity_and_bundle_helpers() {
        let a = CertificateAuthority::generate("a", HOUR).unwrap();
        let b = CertificateAuthority::generate("b", HOUR).unwrap();
        let v = validity_pem(a.cert_pem()).unwrap();
        let left = v.remaining(SystemTime::now());
        assert!(left > HOUR - Duration::from_secs(10) && left <= HOUR, "{left:?}");
        assert!(v.seconds_left(SystemTime::now()) > 3500.0);
        let ab = format!("{}{}", a.cert_pem(), b.cert_pem());
        let ba = format!("{}\n{}", b.cert_pem(), a.cert_pem());
        assert!(same_certificates(&ab, &ba));
        assert!(!same_certificates(&ab, a.cert_pem()));
        assert!(bundle_contains(&ab, b.cert_pem()));
        assert!(!bundle_contains(a.cert_pem(), b.cert_pem()));
    }
}
