//! The key every replica of the gateway seals browser sessions with ([`super::seal`]): the
//! Secret `--session-key-secret` (in the gateway's namespace), made with a random key by the
//! first replica that finds none, read by the others, so that a page whose replica goes away
//! (a rollout, a node drain) is still signed in on the next. Rotating it (deleting the Secret
//! and restarting the gateway) signs everyone out.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use ring::rand::{SecureRandom, SystemRandom};

/// The Secret's data key holding the 32 bytes.
const DATA_KEY: &str = "session.key";

/// The shared key: the Secret's, made if there is none.
pub async fn shared(client: &Client, namespace: &str, name: &str) -> Result<[u8; 32], String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for _ in 0..3 {
        if let Some(found) =
            secrets.get_opt(name).await.map_err(|e| format!("reading Secret {namespace}/{name}: {e}"))?
        {
            return key_of(&found).ok_or_else(|| format!("Secret {namespace}/{name} holds no 32-byte {DATA_KEY}"));
        }
        let key = random()?;
        let secret = Secret {
            metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
            data: Some(BTreeMap::from([(DATA_KEY.to_owned(), ByteString(key.to_vec()))])),
            ..Secret::default()
        };
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => return Ok(key),
            // Another replica made it first: read theirs.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(format!("creating Secret {namespace}/{name}: {e}")),
        }
    }
    Err(format!("Secret {namespace}/{name} kept changing"))
}

/// A key of this replica's own (sessions then do not outlive it).
pub fn random() -> Result<[u8; 32], String> {
    let mut key = [0u8; 32];
    SystemRandom::new().fill(&mut key).map_err(|_| "no randomness for a session key".to_owned())?;
    Ok(key)
}

fn key_of(secret: &Secret) -> Option<[u8; 32]> {
    let bytes = &secret.data.as_ref()?.get(DATA_KEY)?.0;
    bytes.as_slice().try_into().ok()
}
