//! The Secret that holds the self-managed certificates, shared by every replica.
//!
//! Type `kubernetes.io/tls` (`tls.crt`, `tls.key`, `ca.crt` as cert-manager lays them out) plus
//! the CA keys and rotation timestamps. Writes use optimistic concurrency: create only if absent,
//! replace only at the read `resourceVersion`; a conflict means another replica wrote first, so
//! the caller re-reads and decides again.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use crate::pki::CertifiedKeyPem;
use crate::rotation::CertState;

/// Data key of the serving certificate (PEM), the name a `kubernetes.io/tls` Secret requires.
pub const TLS_CRT: &str = "tls.crt";
/// Data key of the serving certificate's private key (PEM).
pub const TLS_KEY: &str = "tls.key";
/// The trust bundle (every CA clients should trust), injected as `caBundle`.
pub const CA_CRT: &str = "ca.crt";
/// Data key of the CA certificate that signs serving certificates now ([`CertState::signer`]).
pub const SIGNER_CRT: &str = "signer-ca.crt";
/// Data key of the signing CA's private key: every replica can issue with it.
pub const SIGNER_KEY: &str = "signer-ca.key";
/// Data key of the next CA's certificate, present only during a CA rotation
/// ([`CertState::next`]).
pub const NEXT_CRT: &str = "next-ca.crt";
/// Data key of the next CA's private key, present only with [`NEXT_CRT`].
pub const NEXT_KEY: &str = "next-ca.key";
/// Annotations with the rotation timestamps, in Unix milliseconds.
pub const NEXT_SINCE: &str = "myownshell.io/next-ca-since-ms";
/// Annotation with [`CertState::signer_since`]: when the signer became the signer, in Unix
/// milliseconds (old CAs leave the bundle a propagation wait after it).
pub const SIGNER_SINCE: &str = "myownshell.io/signer-ca-since-ms";
/// Secret `type`: the standard TLS Secret (the apiserver then insists on `tls.crt` and
/// `tls.key`), laid out as cert-manager's are.
pub const SECRET_TYPE: &str = "kubernetes.io/tls";
/// Label on the Secret so it can be found (and RBAC'd) as the operator's.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "myownshell-webhook");

/// Why a read or write of the Secret failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The write lost a race (409): another replica created or changed the Secret since it was
    /// read. Not a failure: read again and plan again.
    #[error("someone else changed the Secret first")]
    Conflict,
    /// Any other API error (unreachable apiserver, missing RBAC, invalid object, …).
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
}

/// The Secret as stored, with the version a replace must name.
#[derive(Debug, Clone)]
pub struct Stored {
    /// `None` when the Secret exists but does not hold a usable state (the planner replaces it).
    pub state: Option<CertState>,
    /// The Secret's `metadata.resourceVersion` when it was read.
    pub resource_version: Option<String>,
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> Option<String> {
    data.get(key).and_then(|b| String::from_utf8(b.0.clone()).ok()).filter(|s| !s.trim().is_empty())
}

/// Read a [`CertState`] out of a Secret's data and annotations (`None` if pieces are missing).
pub fn decode(secret: &Secret) -> Option<CertState> {
    let data = secret.data.as_ref()?;
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let since = |key: &str| annotations.get(key).and_then(|v| v.parse::<i64>().ok());
    let next = match (text(data, NEXT_CRT), text(data, NEXT_KEY)) {
        (Some(cert_pem), Some(key_pem)) => Some(CertifiedKeyPem { cert_pem, key_pem }),
        _ => None,
    };
    Some(CertState {
        serving: CertifiedKeyPem { cert_pem: text(data, TLS_CRT)?, key_pem: text(data, TLS_KEY)? },
        signer: CertifiedKeyPem { cert_pem: text(data, SIGNER_CRT)?, key_pem: text(data, SIGNER_KEY)? },
        trust_bundle: text(data, CA_CRT)?,
        next_since: next.as_ref().and(since(NEXT_SINCE)),
        next,
        signer_since: since(SIGNER_SINCE),
    })
}

/// Write a [`CertState`] into a Secret named `name` (keeping unrelated metadata of `base`).
pub fn encode(state: &CertState, name: &str, base: Option<&Secret>) -> Secret {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let mut data = BTreeMap::from([
        (TLS_CRT.to_owned(), bytes(&state.serving.cert_pem)),
        (TLS_KEY.to_owned(), bytes(&state.serving.key_pem)),
        (CA_CRT.to_owned(), bytes(&state.trust_bundle)),
        (SIGNER_CRT.to_owned(), bytes(&state.signer.cert_pem)),
        (SIGNER_KEY.to_owned(), bytes(&state.signer.key_pem)),
    ]);
    if let Some(next) = &state.next {
        data.insert(NEXT_CRT.to_owned(), bytes(&next.cert_pem));
        data.insert(NEXT_KEY.to_owned(), bytes(&next.key_pem));
    }
    let mut metadata = base.map(|s| s.metadata.clone()).unwrap_or_default();
    metadata.name = Some(name.to_owned());
    let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.remove(NEXT_SINCE);
    annotations.remove(SIGNER_SINCE);
    if let Some(t) = state.next_since {
        annotations.insert(NEXT_SINCE.to_owned(), t.to_string());
    }
    if let Some(t) = state.signer_since {
        annotations.insert(SIGNER_SINCE.to_owned(), t.to_string());
    }
    metadata.labels.get_or_insert_with(BTreeMap::new).insert(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned());
    Secret { metadata, data: Some(data), type_: Some(SECRET_TYPE.to_owned()), ..Secret::default() }
}

/// The Secret in one namespace, by name.
#[derive(Clone)]
pub struct SecretStore {
    api: Api<Secret>,
    name: String,
}

impl SecretStore {
    /// The Secret `namespace/name`. Nothing is read until asked.
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self { api: Api::namespaced(client, namespace), name: name.to_owned() }
    }

    /// Name of the Secret (for logs and the watch on it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Secrets API of the Secret's namespace.
    pub fn api(&self) -> &Api<Secret> {
        &self.api
    }

    /// `None` if there is no Secret yet.
    pub async fn read(&self) -> Result<Option<(Stored, Secret)>, StoreError> {
        let Some(secret) = self.api.get_opt(&self.name).await? else { return Ok(None) };
        let stored = Stored { state: decode(&secret), resource_version: secret.metadata.resource_version.clone() };
        Ok(Some((stored, secret)))
    }

    /// Store `state`: create the Secret if `base` is `None`, else replace `base` at its
    /// resourceVersion. [`StoreError::Conflict`] if another writer got there first.
    pub async fn write(&self, state: &CertState, base: Option<&Secret>) -> Result<Secret, StoreError> {
        let secret = encode(state, &self.name, base);
        let result = match base {
            None => self.api.create(&PostParams::default(), &secret).await,
            Some(_) => self.api.replace(&self.name, &PostParams::default(), &secret).await,
        };
        match result {
            Ok(written) => Ok(written),
            Err(kube::Error::Api(status)) if status.code == 409 => Err(StoreError::Conflict),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::rotation::{Policy, fresh};

    fn state() -> CertState {
        let policy = Policy {
            ca_name: "ca".into(),
            dns_names: vec!["svc.ns.svc".into()],
            ip_addresses: vec![],
            cert_validity: Duration::from_secs(100),
            ca_validity: Duration::from_secs(1000),
            renew_before: Duration::from_secs(10),
            propagation: Duration::from_secs(1),
        };
        fresh(&policy, SystemTime::now()).unwrap()
    }

    #[test]
    fn state_round_trips_through_a_secret() {
        let mut s = state();
        assert_eq!(decode(&encode(&s, "x", None)), Some(s.clone()));
        s.next = Some(s.signer.clone());
        s.next_since = Some(42);
        let secret = encode(&s, "x", None);
        assert_eq!(secret.type_.as_deref(), Some(SECRET_TYPE));
        assert_eq!(secret.metadata.annotations.as_ref().unwrap()[NEXT_SINCE], "42");
        assert_eq!(decode(&secret), Some(s.clone()));
        // Clearing `next` clears its keys' meaning and its timestamp.
        s.next = None;
        s.next_since = None;
        let again = encode(&s, "x", Some(&secret));
        assert!(!again.metadata.annotations.as_ref().unwrap().contains_key(NEXT_SINCE));
        assert_eq!(decode(&again), Some(s));
    }

    #[test]
    fn incomplete_secrets_decode_to_none() {
        let s = encode(&state(), "x", None);
        for key in [TLS_CRT, TLS_KEY, CA_CRT, SIGNER_CRT, SIGNER_KEY] {
            let mut partial = s.clone();
            partial.data.as_mut().unwrap().remove(key);
            assert_eq!(decode(&partial), None, "{key}");
        }
        assert_eq!(decode(&Secret::default()), None);
    }
}
