//! A small certificate authority on rcgen: self-signed CAs and the leaf certificates issued by
//! them (serving and client). Everything is PEM in and out, the form Secrets, kubeconfigs and
//! webhook `caBundle`s use.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::OffsetDateTime;

/// Certificates start this long in the past, so small clock skew between machines does not
/// make a fresh certificate "not yet valid".
const BACKDATE: Duration = Duration::from_secs(60);

/// Why a key or certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen failed: key generation, signing, or PEM that does not parse as a CA certificate
    /// and key.
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    /// A name in [`LeafSpec::dns_names`] is not an RFC 1123 host name (see [`is_dns_name`]).
    #[error("invalid DNS name in subject alternative names: {0:?}")]
    InvalidDnsName(String),
}

/// A certificate and its private key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct CertifiedKeyPem {
    /// The certificate, `-----BEGIN CERTIFICATE-----`.
    pub cert_pem: String,
    /// Its private key (PKCS#8, `-----BEGIN PRIVATE KEY-----`, when made here). Never printed by
    /// `Debug`.
    pub key_pem: String,
}

impl std::fmt::Debug for CertifiedKeyPem {
    // Never print private keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertifiedKeyPem").field("cert_pem", &self.cert_pem).field("key_pem", &"<redacted>").finish()
    }
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// TLS server authentication (extended key usage `serverAuth`): an HTTPS endpoint.
    Server,
    /// TLS client authentication (`clientAuth`): a client certificate, e.g. a user of the
    /// apiserver whose name is the common name and whose groups are the organizations.
    Client,
}

/// Subject and names of a leaf certificate.
#[derive(Debug, Clone)]
pub struct LeafSpec {
    /// Subject common name (`CN=`); Kubernetes reads it as a client's user name.
    pub common_name: String,
    /// Organizations (`O=`); Kubernetes reads them as the client's groups.
    pub organizations: Vec<String>,
    /// DNS subject alternative names a server certificate is valid for (each must pass
    /// [`is_dns_name`]).
    pub dns_names: Vec<String>,
    /// IP subject alternative names a server certificate is valid for.
    pub ip_addresses: Vec<IpAddr>,
    /// Server or client certificate.
    pub usage: Usage,
    /// How long the certificate stays valid after it is issued (its window also opens a minute
    /// early, against clock skew).
    pub validity: Duration,
}

impl LeafSpec {
    /// A serving certificate for `dns_names` and `ip_addresses`, no organizations.
    pub fn server(
        common_name: impl Into<String>,
        dns_names: Vec<String>,
        ip_addresses: Vec<IpAddr>,
        validity: Duration,
    ) -> Self {
        Self {
            common_name: common_name.into(),
            organizations: Vec::new(),
            dns_names,
            ip_addresses,
            usage: Usage::Server,
            validity,
        }
    }

    /// A client certificate for user `common_name` in groups `organizations`, no SANs.
    pub fn client(common_name: impl Into<String>, organizations: Vec<String>, validity: Duration) -> Self {
        Self {
            common_name: common_name.into(),
            organizations,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            usage: Usage::Client,
            validity,
        }
    }
}

/// A CA that can issue leaf certificates.
pub struct CertificateAuthority {
    pem: CertifiedKeyPem,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority").field("cert_pem", &self.pem.cert_pem).finish_non_exhaustive()
    }
}

fn validity_window(params: &mut CertificateParams, validity: Duration, start: SystemTime) {
    let now = OffsetDateTime::from(start);
    params.not_before = now - BACKDATE;
    params.not_after = now + validity;
}

impl CertificateAuthority {
    /// A new self-signed CA with a fresh ECDSA P-256 key.
    pub fn generate(common_name: &str, validity: Duration) -> Result<Self, PkiError> {
        Self::generate_at(common_name, validity, SystemTime::now())
    }

    /// Like [`CertificateAuthority::generate`], valid from `start` (rotation plans with a clock
    /// of its own, so its decisions can be tested across simulated months).
    pub fn generate_at(common_name: &str, validity: Duration, start: SystemTime) -> Result<Self, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        validity_window(&mut params, validity, start);
        let cert = params.self_signed(&key)?;
        let pem = CertifiedKeyPem { cert_pem: cert.pem(), key_pem: key.serialize_pem() };
        Ok(Self { pem, issuer: Issuer::new(params, key) })
    }

    /// Load a CA from its PEM certificate and key (as stored in a Secret).
    pub fn from_pem(pem: CertifiedKeyPem) -> Result<Self, PkiError> {
        let key = KeyPair::from_pem(&pem.key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&pem.cert_pem, key)?;
        Ok(Self { pem, issuer })
    }

    /// The CA's certificate and private key, to store it (e.g. in a Secret) and reload it with
    /// [`CertificateAuthority::from_pem`].
    pub fn pem(&self) -> &CertifiedKeyPem {
        &self.pem
    }

    /// The CA's certificate alone: what clients put in their trust store (a `caBundle`, a
    /// kubeconfig's `certificate-authority-data`).
    pub fn cert_pem(&self) -> &str {
        &self.pem.cert_pem
    }

    /// Issue a leaf certificate with a fresh key.
    pub fn issue(&self, spec: &LeafSpec) -> Result<CertifiedKeyPem, PkiError> {
        self.issue_at(spec, SystemTime::now())
    }

    /// Like [`CertificateAuthority::issue`], valid from `start`.
    pub fn issue_at(&self, spec: &LeafSpec, start: SystemTime) -> Result<CertifiedKeyPem, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, spec.common_name.as_str());
        for org in &spec.organizations {
            params.distinguished_name.push(DnType::OrganizationName, org.as_str());
        }
        for name in &spec.dns_names {
            if !is_dns_name(name) {
                return Err(PkiError::InvalidDnsName(name.clone()));
            }
            let dns = name.clone().try_into().map_err(|_| PkiError::InvalidDnsName(name.clone()))?;
            params.subject_alt_names.push(SanType::DnsName(dns));
        }
        params.subject_alt_names.extend(spec.ip_addresses.iter().copied().map(SanType::IpAddress));
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = match spec.usage {
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
        };
        validity_window(&mut params, spec.validity, start);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKeyPem { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

/// RFC 1123 host names (optionally with a leading `*.` wildcard label): what a TLS client can
/// match a SAN against. rcgen accepts any ASCII, so a typo would silently yield a useless cert.
pub fn is_dns_name(name: &str) -> bool {
    let host = name.strip_prefix("*.").unwrap_or(name);
    !host.is_empty()
        && name.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A bare key pair in PEM (PKCS#8 private, SPKI public), e.g. for service-account token signing.
pub fn generate_signing_key() -> Result<(String, String), PkiError> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn ca_round_trips_through_pem_and_still_issues() -> Result<(), PkiError> {
        let ca = CertificateAuthority::generate("test-ca", DAY)?;
        let reloaded = CertificateAuthority::from_pem(ca.pem().clone())?;
        let leaf = reloaded.issue(&LeafSpec::server("svc", vec!["svc.ns.svc".into()], vec![], DAY))?;
        assert!(leaf.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(leaf.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        Ok(())
    }

    #[test]
    fn invalid_dns_names_are_an_error_not_a_panic() -> Result<(), PkiError> {
        let ca = CertificateAuthority::generate("test-ca", DAY)?;
        let bad = LeafSpec::server("svc", vec!["not a dns name".into()], vec![], DAY);
        assert!(matches!(ca.issue(&bad), Err(PkiError::InvalidDnsName(_))));
        Ok(())
    }

    #[test]
    fn dns_names_follow_rfc_1123() {
        let cases = [
            ("svc.ns.svc", true),
            ("svc.ns.svc.cluster.local", true),
            ("localhost", true),
            ("*.example.com", true),
            ("", false),
            ("not a dns name", false),
            ("-leading.dash", false),
            ("trailing-.dash", false),
            ("double..dot", false),
            ("under_score.io", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_dns_name(name), want, "{name:?}");
        }
    }

    #[test]
    fn debug_output_never_contains_the_key() -> Result<(), PkiError> {
        let ca = CertificateAuthority::generate("test-ca", DAY)?;
        let leaf = ca.issue(&LeafSpec::client("user", vec!["group".into()], DAY))?;
        assert!(!format!("{leaf:?}").contains("PRIVATE KEY"));
        Ok(())
    }
}
