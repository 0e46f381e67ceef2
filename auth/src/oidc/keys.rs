//! The issuer's signing keys (its JWK Set), and which one verifies a token.
//!
//! Only asymmetric signatures count: a token signed with HMAC (whose "key" would be public) or
//! with `none` is refused, whatever the key set holds. Keys the set holds that this cannot read
//! (an encryption key, a curve it does not know) are left out one by one, so an issuer that adds
//! a new kind of key does not lock everyone out. A token naming a key id the set does not have
//! makes the cache fetch the set again (the issuer rotated its keys), at most once per
//! [`REFRESH_AT_MOST_EVERY`], so a stream of tokens with made-up key ids cannot make the
//! gateway hammer the issuer.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use tokio::sync::RwLock;

use super::OidcError;
use super::fetch::Fetcher;

/// The largest key set read.
const KEYS_LIMIT: usize = 256 * 1024;
/// A key id the set does not know fetches the set again, but not more often than this.
pub const REFRESH_AT_MOST_EVERY: Duration = Duration::from_secs(10);
/// A set older than this is fetched again before it is used, key id known or not: a key the
/// issuer withdrew stops counting within this time.
pub const REFRESH_AFTER: Duration = Duration::from_secs(3600);

/// The algorithms a token may be signed with (kube-apiserver's list: RSA, RSA-PSS, ECDSA).
pub const ALGORITHMS: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// One usable key.
#[derive(Clone)]
pub struct Key {
    /// Its `kid`, if it has one.
    pub id: Option<String>,
    /// The algorithm its `alg` fixes, if it names one.
    pub algorithm: Option<Algorithm>,
    decoding: DecodingKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("id", &self.id).field("algorithm", &self.algorithm).finish()
    }
}

impl Key {
    /// The key's verifying half.
    pub fn decoding(&self) -> &DecodingKey {
        &self.decoding
    }
}

/// A JWK Set, as read.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    /// The keys that can verify a signature.
    pub keys: Vec<Key>,
}

impl KeySet {
    /// Read a JWK Set document, leaving out each key that is not a signing key this can use.
    pub fn parse(body: &[u8]) -> Result<Self, OidcError> {
        #[derive(serde::Deserialize)]
        struct Document {
            keys: Vec<serde_json::Value>,
        }
        let document: Document = serde_json::from_slice(body)
            .map_err(|e| OidcError::Provider(format!("the issuer's key set does not read: {e}")))?;
        let keys = document
            .keys
            .into_iter()
            .filter_map(|value| serde_json::from_value::<Jwk>(value).ok())
            .filter_map(usable)
            .collect();
        Ok(Self { keys })
    }

    /// The key that verifies a token signed with `algorithm` under key id `kid`: the one with
    /// that id, or, for a token without a `kid`, the only key the set has.
    pub fn find(&self, kid: Option<&str>, algorithm: Algorithm) -> Result<&Key, OidcError> {
        if !ALGORITHMS.contains(&algorithm) {
            return Err(OidcError::Token(format!("the token is signed with {algorithm:?}, which is not taken")));
        }
        let key = match kid {
            Some(kid) => self.keys.iter().find(|k| k.id.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .ok_or_else(|| OidcError::UnknownKey(kid.unwrap_or("(none)").to_owned()))?;
        match key.algorithm {
            Some(fixed) if fixed != algorithm => Err(OidcError::Token(format!(
                "the token says {algorithm:?} but its key {:?} is for {fixed:?}",
                key.id.as_deref().unwrap_or("")
            ))),
            _ => Ok(key),
        }
    }
}

/// A signing key with a verifying half, or nothing.
fn usable(jwk: Jwk) -> Option<Key> {
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let algorithm = match jwk.common.key_algorithm {
        Some(fixed) => Some(fixed.to_string().parse::<Algorithm>().ok().filter(|a| ALGORITHMS.contains(a))?),
        None => None,
    };
    // An HMAC "key" in a public set would let anyone sign: never.
    if matches!(jwk.algorithm, jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)) {
        return None;
    }
    let decoding = DecodingKey::from_jwk(&jwk).ok()?;
    Some(Key { id: jwk.common.key_id.clone(), algorithm, decoding })
}

/// The issuer's key set, fetched when first needed, again when it is old or a token names a
/// key it does not have.
#[derive(Debug)]
pub(crate) struct KeyCache {
    url: String,
    fetcher: Fetcher,
    /// [`REFRESH_AT_MOST_EVERY`], but for the tests of rotation, which must not wait for it.
    refresh_at_most_every: Duration,
    state: RwLock<Option<(KeySet, Instant)>>,
}

impl KeyCache {
    pub(crate) fn new(url: String, fetcher: Fetcher, refresh_at_most_every: Duration) -> Self {
        Self { url, fetcher, refresh_at_most_every, state: RwLock::new(None) }
    }

    /// The client it fetches with (the token endpoint's requests go through it too).
    pub(crate) fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// The key for a token's `kid` and `alg`, fetching the set again when it must.
    pub(crate) async fn key(&self, kid: Option<&str>, algorithm: Algorithm) -> Result<Key, OidcError> {
        {
            let state = self.state.read().await;
            if let Some((set, fetched)) = state.as_ref()
                && fetched.elapsed() < REFRESH_AFTER
            {
                match set.find(kid, algorithm) {
                    Ok(key) => return Ok(key.clone()),
                    Err(OidcError::UnknownKey(_)) if fetched.elapsed() >= self.refresh_at_most_every => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let mut state = self.state.write().await;
        // Another request may have fetched it while this one waited for the lock.
        let fresh = state.as_ref().is_some_and(|(_, fetched)| fetched.elapsed() < self.refresh_at_most_every);
        if !fresh {
            let body = self.fetcher.get(&self.url, "the issuer's keys", KEYS_LIMIT).await?;
            *state = Some((KeySet::parse(&body)?, Instant::now()));
        }
        let (set, _) = state.as_ref().ok_or_else(|| OidcError::Unreachable("the issuer's keys".into()))?;
        set.find(kid, algorithm).cloned()
    }
}
