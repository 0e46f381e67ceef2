//! What admission reads of an AdmissionReview (`admission.k8s.io/v1`), borrowed from the body.
//!
//! A review carries much more than admission needs (userInfo, options, request kinds,
//! labels, annotations, managedFields, status). Decoding all of it into owned values, as
//! kube's generic `AdmissionRequest` does, costs more than the rules themselves; here only what
//! is named below is read, strings borrow from the body, and `spec` stays raw JSON until the
//! webhook that needs it reads it as a [`Spec`] or a [`ScaleSpec`].
//!
//! Two readers produce the same [`Request`]: [`super::review_reader`] for the shape the
//! apiserver sends (fast, partial), and the serde derives below for everything else; serde's
//! answer, error message included, is the reference.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The AdmissionReview version served (`admissionReviewVersions: [v1]`).
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
pub const REVIEW_KIND: &str = "AdmissionReview";

/// The operation a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    const ALL: [Operation; 4] = [Operation::Create, Operation::Update, Operation::Delete, Operation::Connect];

    /// The operation named `name` as the apiserver writes it (`CREATE`, …).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// `request.kind`: the kind of the object in the request (`Scale` for the scale subresource).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Kind<'a> {
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// The part of `request` admission reads.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Kind<'a>,
    #[serde(default, borrow)]
    pub sub_resource: Option<Cow<'a, str>>,
    pub operation: Operation,
    #[serde(default, borrow)]
    pub object: Option<Object<'a>>,
    #[serde(default, borrow)]
    pub old_object: Option<Object<'a>>,
}

/// An object in a request: a `MyOwnShell`, or a `Scale` for the scale subresource.
#[derive(Debug, PartialEq, Deserialize)]
pub struct Object<'a> {
    /// `None` when absent or null.
    #[serde(default, borrow)]
    pub metadata: Option<Metadata<'a>>,
    /// `None` when absent or null; read with [`Object::spec`] or [`Object::scale_spec`].
    #[serde(default, borrow)]
    pub spec: Option<RawJson<'a>>,
}

/// The JSON text of a value, borrowed from the body (already checked to be JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawJson<'a>(pub &'a str);

impl<'de: 'a, 'a> Deserialize<'de> for RawJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(d).map(|raw| RawJson(raw.get()))
    }
}

/// The metadata admission reads.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata<'a> {
    #[serde(default, borrow)]
    pub finalizers: Option<Vec<Cow<'a, str>>>,
    /// Only whether it is set (present and not null) matters.
    #[serde(default, deserialize_with = "is_set")]
    pub deletion_timestamp: bool,
}

impl<'a> Object<'a> {
    pub fn finalizers(&self) -> Option<&[Cow<'a, str>]> {
        self.metadata.as_ref()?.finalizers.as_deref()
    }

    pub fn is_being_deleted(&self) -> bool {
        self.metadata.as_ref().is_some_and(|m| m.deletion_timestamp)
    }

    /// The `MyOwnShell` spec; a missing or null spec is `None`. The error is the reason the
    /// spec does not decode.
    pub fn spec(&self) -> Result<Option<Spec<'a>>, String> {
        self.read_spec(super::spec_reader::spec)
    }

    /// Which spec fields are set, without reading their values (the mutating webhook fills
    /// only the others; whether the values are well typed is for the schema to say, which the
    /// apiserver checks right after mutation, and for the validating webhook). `None` when
    /// there is no spec.
    pub fn spec_fields(&self) -> Result<Option<SpecFields>, String> {
        self.read_spec(super::spec_reader::spec_fields)
    }

    /// The spec object as `T`, by the `fast` reader when it answers, else by serde (the
    /// reference reading, and the one that explains errors); `None` when absent or null.
    fn read_spec<T: Deserialize<'a>>(
        &self,
        fast: fn(&'a str) -> super::json_cursor::Result<T>,
    ) -> Result<Option<T>, String> {
        let Some(RawJson(raw)) = self.spec else { return Ok(None) };
        if let Ok(read) = fast(raw) {
            return Ok(Some(read));
        }
        // serde reads a struct from a JSON array too; a spec must be an object.
        if !raw.starts_with('{') {
            return Err(format!("spec does not decode: expected an object, got {}", json_type(raw)));
        }
        serde_json::from_str(raw).map(Some).map_err(|e| format!("spec does not decode: {e}"))
    }

    /// The `Scale` spec of the scale subresource.
    pub fn scale_spec(&self) -> Result<ScaleSpec, String> {
        match self.spec {
            None => Ok(ScaleSpec::default()),
            Some(RawJson(raw)) => serde_json::from_str(raw).map_err(|e| format!("spec does not decode: {e}")),
        }
    }

    /// The spec exactly as sent (both objects of an UPDATE come from the same encoder).
    pub fn raw_spec(&self) -> Option<&'a str> {
        self.spec.map(|RawJson(raw)| raw)
    }
}

/// "an array", "a string", …: what a JSON value is, from its first character.
fn json_type(raw: &str) -> &'static str {
    match raw.bytes().next() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// `MyOwnShell.spec` as admission reads it: the fields of `myownshell_api::MyOwnShellSpec`,
/// borrowed. A test keeps the two field lists equal.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec<'a> {
    #[serde(default)]
    pub size: Option<i32>,
    #[serde(default, borrow)]
    pub image: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub command: Option<Vec<Cow<'a, str>>>,
    #[serde(default, borrow)]
    pub resources: Option<Resources<'a>>,
}

/// Which fields of a spec are set (present and not null).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct SpecFields {
    #[serde(default, deserialize_with = "is_set")]
    pub size: bool,
    #[serde(default, deserialize_with = "is_set")]
    pub image: bool,
    #[serde(default, deserialize_with = "is_set")]
    pub command: bool,
    #[serde(default, deserialize_with = "is_set")]
    pub resources: bool,
}

fn is_set<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(d)?.is_some())
}

/// Names of the `spec` fields [`Spec`] reads, in declaration order.
pub const SPEC_FIELDS: [&str; 4] = ["size", "image", "command", "resources"];

/// `spec.resources`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Resources<'a> {
    #[serde(default, borrow)]
    pub requests: Option<ResourceList<'a>>,
    #[serde(default, borrow)]
    pub limits: Option<ResourceList<'a>>,
}

/// A resource list (`{cpu: 250m, memory: 64Mi}`), sorted by name; a repeated name keeps its
/// last value, as the apiserver's decoder does. A few entries in a Vec: cheaper to build and
/// search than a map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceList<'a>(Vec<(Cow<'a, str>, QuantityText<'a>)>);

impl<'a> ResourceList<'a> {
    /// The list of `entries` in the order written.
    pub fn from_entries(mut entries: Vec<(Cow<'a, str>, QuantityText<'a>)>) -> Self {
        // Reversed, then sorted stably: of equal names the last written comes first, and dedup
        // keeps the first of a run.
        entries.reverse();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|next, kept| next.0 == kept.0);
        ResourceList(entries)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &QuantityText<'a>)> {
        self.0.iter().map(|(name, q)| (name.as_ref(), q))
    }

    pub fn get(&self, name: &str) -> Option<&QuantityText<'a>> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, q)| q)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ResourceList<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = ResourceList<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of resource names to quantities")
            }
            fn visit_map<M: de::MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut entries: Vec<(Cow<'de, str>, QuantityText<'de>)> = Vec::with_capacity(4);
                while let Some(entry) = map.next_entry::<Cow<'de, str>, QuantityText<'de>>()? {
                    entries.push(entry);
                }
                Ok(ResourceList::from_entries(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// A quantity as written: a string (`"250m"`), or a number (`1`), which the schema allows
/// (`x-kubernetes-int-or-string`) and which reads as its decimal text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityText<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for QuantityText<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = QuantityText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity such as \"250m\" or 1")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(QuantityText(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(QuantityText(Cow::Owned(v.to_owned())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(QuantityText(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(QuantityText(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(QuantityText(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(Text)
    }
}

/// `Scale.spec` (`autoscaling/v1`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ScaleSpec {
    /// Kept as JSON so that a value out of `int32` range is reported, not a parse error.
    #[serde(default)]
    pub replicas: Option<serde_json::Number>,
}

/// The review as sent.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct IncomingReview<'a> {
    #[serde(default, borrow)]
    pub api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub request: Option<Request<'a>>,
}

/// A body that is not a usable AdmissionReview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Answer HTTP 400 with this reason: the body is not an AdmissionReview the apiserver sends.
    BadRequest(String),
    /// The review and its uid are readable but the request is not: deny it (code 400).
    Undecodable { uid: String, reason: String },
}

fn check_type(api_version: &str, kind: &str) -> Result<(), DecodeError> {
    if api_version == REVIEW_API_VERSION && kind == REVIEW_KIND {
        Ok(())
    } else {
        Err(DecodeError::BadRequest(format!(
            "expected apiVersion {REVIEW_API_VERSION} and kind {REVIEW_KIND}, got {api_version:?} and {kind:?}"
        )))
    }
}

/// Decode an AdmissionReview body.
pub fn decode(body: &[u8]) -> Result<Request<'_>, DecodeError> {
    // Checking UTF-8 once for the whole body is cheaper than serde_json checking each string.
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(match serde_json::from_slice::<IncomingReview>(body) {
            Err(e) => explain(body, &e),
            Ok(_) => DecodeError::BadRequest("the body is not UTF-8".into()),
        });
    };
    let review = match super::review_reader::read(text) {
        Ok(review) => review,
        // Not the apiserver's usual shape: serde decides, and says why when it fails.
        Err(_) => serde_json::from_str::<IncomingReview>(text).map_err(|typed| explain(body, &typed))?,
    };
    check_type(&review.api_version, &review.kind)?;
    review.request.ok_or_else(|| DecodeError::BadRequest("the AdmissionReview has no request".into()))
}

/// The review as serde reads it: the reference the fast reader is tested against.
#[cfg(test)]
pub(super) fn decode_with_serde(text: &str) -> Option<IncomingReview<'_>> {
    serde_json::from_str(text).ok()
}

/// Why a body that failed to decode did: not JSON, the wrong type, no request, or a request
/// that is readable enough to carry a uid (then it is denied rather than refused). Only bad
/// input comes here, so it may take its time.
fn explain(body: &[u8], typed: &serde_json::Error) -> DecodeError {
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => return DecodeError::BadRequest(format!("malformed JSON: {e}")),
    };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    if let Err(e) = check_type(&text(&value, "apiVersion"), &text(&value, "kind")) {
        return e;
    }
    let request = match value.get("request") {
        Some(r) if r.is_object() => r,
        _ => return DecodeError::BadRequest("the AdmissionReview has no request".into()),
    };
    let uid = text(request, "uid");
    if uid.is_empty() {
        return DecodeError::BadRequest(format!("invalid AdmissionReview: {typed}"));
    }
    DecodeError::Undecodable { uid, reason: format!("the request does not decode: {typed}") }
}
