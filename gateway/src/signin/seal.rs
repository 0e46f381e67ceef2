//! A browser session sealed into its own cookie, so that any replica of the gateway can take it:
//! AES-256-GCM (ring) under a key every replica shares ([`super::key`]), over the session's id,
//! CSRF token, user, token and end. Sealed, not signed: the token inside is a credential, and
//! the cookie travels with every request of the page. A cookie that does not open (another key,
//! a changed byte, another kind of cookie) is no session.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use myownshell_auth::AuthenticatedUser;

/// What is bound to every sealed session cookie besides its contents: a cookie of another
/// format or purpose never opens as a session.
const AAD: &[u8] = b"myownshell-gateway-session-v1";
/// The same for the cookie an OpenID Connect sign-in keeps its secrets in until the person comes
/// back ([`crate::signin::oidc`]): it never opens as a session, nor a session as it.
const SIGN_IN_AAD: &[u8] = b"myownshell-gateway-oidc-sign-in-v1";
/// The longest cookie the gateway reads (browsers keep 4 KiB per cookie).
pub const MAX_SEALED: usize = 4096;

/// A session as its cookie carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// The session's id (what a sign-out names).
    pub id: String,
    /// The CSRF token of its requests that change something.
    pub csrf: String,
    /// The user, as the cluster authenticated them.
    pub user: SealedUser,
    /// The token they signed in with (asked of TokenReview again): for a sign-in through the
    /// identity provider, its latest ID token.
    pub token: Option<String>,
    /// The identity provider's refresh token, for a sign-in through it that got one: the
    /// session then lasts --session-max-age, its ID token renewed before it expires. Absent in
    /// cookies sealed before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<String>,
    /// When it ends, in seconds since the epoch.
    pub expires: u64,
}

/// The user inside a sealed session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedUser {
    /// The name.
    pub name: String,
    /// The uid.
    pub uid: Option<String>,
    /// The groups.
    pub groups: Vec<String>,
    /// The extras.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl SealedUser {
    /// `user` as sealed.
    pub fn of(user: &AuthenticatedUser) -> Self {
        Self { name: user.name.clone(), uid: user.uid.clone(), groups: user.groups.clone(), extra: user.extra.clone() }
    }

    /// The user again (authenticated by a token, as a session always is).
    pub fn user(&self) -> AuthenticatedUser {
        let mut user =
            AuthenticatedUser::new(&self.name, self.groups.clone(), myownshell_auth::AuthMethod::BearerToken);
        user.uid = self.uid.clone();
        user.extra = self.extra.clone();
        user
    }
}

/// Seals and opens cookies of one purpose under one key.
pub struct Sealer {
    key: LessSafeKey,
    random: SystemRandom,
    purpose: &'static [u8],
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer")
    }
}

impl Sealer {
    /// Sessions, under `key` (32 bytes).
    pub fn new(key: &[u8; 32]) -> Result<Self, String> {
        Self::with_purpose(key, AAD)
    }

    /// OpenID Connect sign-ins under way, under `key` (32 bytes).
    pub fn for_sign_ins(key: &[u8; 32]) -> Result<Self, String> {
        Self::with_purpose(key, SIGN_IN_AAD)
    }

    fn with_purpose(key: &[u8; 32], purpose: &'static [u8]) -> Result<Self, String> {
        let unbound = UnboundKey::new(&AES_256_GCM, key).map_err(|_| "not an AES-256 key".to_owned())?;
        Ok(Self { key: LessSafeKey::new(unbound), random: SystemRandom::new(), purpose })
    }

    /// `session` as a cookie's value.
    pub fn seal<T: Serialize>(&self, session: &T) -> Result<String, String> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).map_err(|_| "no randomness for a nonce".to_owned())?;
        let mut data = serde_json::to_vec(session).map_err(|e| e.to_string())?;
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(self.purpose), &mut data)
            .map_err(|_| "sealing failed".to_owned())?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(B64.encode(out))
    }

    /// What a cookie's value holds, if it opens under this key for this purpose.
    pub fn open<T: serde::de::DeserializeOwned>(&self, cookie: &str) -> Option<T> {
        if cookie.len() > MAX_SEALED {
            return None;
        }
        let bytes = B64.decode(cookie).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut sealed = sealed.to_vec();
        let plain = self.key.open_in_place(nonce, Aad::from(self.purpose), &mut sealed).ok()?;
        serde_json::from_slice(plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Sealed {
        Sealed {
            id: "id-1".into(),
            csrf: "c".repeat(64),
            user: SealedUser {
                name: "alice".into(),
                uid: Some("u-1".into()),
                groups: vec!["devs".into()],
                extra: Default::default(),
            },
            token: Some("a-token".into()),
            refresh: None,
            expires: 1_800_000_000,
        }
    }

    #[test]
    fn a_sealed_session_opens_under_its_key_only_and_hides_its_token() {
        let sealer = Sealer::new(&[7; 32]).expect("a key");
        let cookie = sealer.seal(&session()).expect("sealed");
        assert_eq!(sealer.open(&cookie), Some(session()));
        assert!(!cookie.contains("a-token") && !B64.decode(&cookie).unwrap().windows(7).any(|w| w == b"a-token"));
        assert_ne!(sealer.seal(&session()).unwrap(), cookie, "a fresh nonce each time");
        let other = Sealer::new(&[8; 32]).expect("a key");
        assert_eq!(other.open::<Sealed>(&cookie), None, "another key");
        let sign_ins = Sealer::for_sign_ins(&[7; 32]).expect("a key");
        assert_eq!(sign_ins.open::<Sealed>(&cookie), None, "the same key for another purpose");
        let mut bytes = B64.decode(&cookie).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(sealer.open::<Sealed>(&B64.encode(&bytes)), None, "a changed byte");
        for junk in ["", "abc", "%%%", &"A".repeat(MAX_SEALED + 1)] {
            assert_eq!(sealer.open::<Sealed>(junk), None, "{junk:.8}");
        }
    }
}
