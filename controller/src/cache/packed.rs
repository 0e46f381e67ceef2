//! [`Packed`]: an object's JSON as the packed caches keep it ([`super::cached_shell`],
//! [`super::cached_deployment`]): LZ4-compressed against a dictionary of reference objects of the
//! same kind, shared between clones and across a relist that brings the same version back.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

/// JSON text LZ4-compressed against a dictionary, its length first. Cloning copies none of it
/// (the reflector clones every object it stores).
#[derive(Clone, Debug)]
pub struct Packed(pub(crate) Arc<[u8]>);

impl Packed {
    /// `json`, compressed against `dictionary`.
    pub fn new(json: &[u8], dictionary: &[u8]) -> Self {
        Self(lz4_flex::block::compress_prepend_size_with_dict(json, dictionary).into())
    }

    /// The object the text holds, decompressed against the `dictionary` it was packed with;
    /// `None` if it does not decompress or decode.
    pub fn unpack<T: DeserializeOwned>(&self, dictionary: &[u8]) -> Option<T> {
        let json = lz4_flex::block::decompress_size_prepended_with_dict(&self.0, dictionary).ok()?;
        serde_json::from_slice(&json).ok()
    }

    /// Bytes the packed text takes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no text at all (never for a packed object: the length comes first).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Take `cached`'s text if `mine` and `theirs` identify the very same version of the same
    /// object (same uid and resourceVersion: the apiserver never changes a version once
    /// written), dropping this copy.
    pub fn share_unchanged(&mut self, mine: &ObjectMeta, cached: &Packed, theirs: &ObjectMeta) {
        if mine.resource_version.is_some() && mine.uid == theirs.uid && mine.resource_version == theirs.resource_version
        {
            self.0 = cached.0.clone();
        }
    }
}
