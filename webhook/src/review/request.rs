//! What admission reads of an AdmissionReview (`admission.k8s.io/v1`), decoded by serde and
//! borrowed from the body.
//!
//! A review carries much more than admission needs (userInfo, options, request kinds,
//! labels, annotations, managedFields, status). Only what is named below is read; strings
//! borrow from the body, and `spec` stays raw JSON until the webhook that needs it reads it
//! ([`super::spec`]) into `myownshell_api::MyOwnShellSpec` or a [`ScaleSpec`].

use std::borrow::Cow;

use myownshell_api::{MyOwnShellSpec, names};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

use serde_json::Value;
use serde_json::value::RawValue;

use super::spec::{self, ScaleSpec, SetFields};

pub use super::user::UserInfo;

/// The AdmissionReview version served (`admissionReviewVersions: [v1]`).
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of the review object, in requests and answers.
pub const REVIEW_KIND: &str = "AdmissionReview";

/// The operation a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE` (including the `scale` subresource).
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT`.
    Connect,
}

impl Operation {
    /// The operation as the apiserver writes it (`CREATE`, …).
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
    /// API group (empty for the core group).
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    /// API version.
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    /// Kind.
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// The part of `request` admission reads.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    /// The uid the answer must carry.
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    /// The kind of `object`.
    #[serde(borrow)]
    pub kind: Kind<'a>,
    /// `scale` for `kubectl scale`; `None` for the object itself.
    #[serde(default, borrow)]
    pub sub_resource: Option<Cow<'a, str>>,
    /// What the request does.
    pub operation: Operation,
    /// The object's name (for CONNECT, the pod's; empty on a CREATE with `generateName`).
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    /// The object's namespace.
    #[serde(default, borrow)]
    pub namespace: Cow<'a, str>,
    /// Who is asking, as the apiserver authenticated them.
    #[serde(default, borrow)]
    pub user_info: UserInfo<'a>,
    /// Whether the request is a dry run (nothing it leads to may be recorded).
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// The object as it will be (absent for DELETE).
    #[serde(default, borrow)]
    pub object: Option<Object<'a>>,
    /// The object as it was (UPDATE and DELETE).
    #[serde(default, borrow)]
    pub old_object: Option<Object<'a>>,
}

impl<'a> Request<'a> {
    /// The request's `MyOwnShell`, or why it carries none.
    pub fn shell_object(&self) -> Result<&Object<'a>, String> {
        if !self.is_myownshell() {
            return Err(format!("this webhook handles {} objects, got {}", names::KIND, self.describe_kind()));
        }
        self.object.as_ref().ok_or_else(|| "the request has no object".to_owned())
    }

    fn is_myownshell(&self) -> bool {
        self.kind.group == names::GROUP && self.kind.kind == names::KIND && self.sub_resource.is_none()
    }

    /// Whether this is `kubectl scale` (the `scale` subresource with its `Scale` object).
    pub fn is_scale(&self) -> bool {
        self.sub_resource.as_deref() == Some("scale") && self.kind.kind == "Scale"
    }

    /// `group/version Kind (subresource s)`, for messages.
    pub(crate) fn describe_kind(&self) -> String {
        let k = &self.kind;
        let sub = self.sub_resource.as_deref().map(|s| format!(" (subresource {s})")).unwrap_or_default();
        format!("{}/{} {}{sub}", k.group, k.version, k.kind)
    }
}

/// An object in a request: a `MyOwnShell`, or a `Scale` for the scale subresource.
#[derive(Debug, PartialEq, Deserialize)]
pub struct Object<'a> {
    /// `None` when absent or null.
    #[serde(default, borrow)]
    pub metadata: Option<Metadata<'a>>,
    /// `None` when absent or null; read with [`Object::spec`], [`Object::spec_fields`] or
    /// [`Object::scale_spec`].
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
    /// `metadata.finalizers`.
    #[serde(default, borrow, deserialize_with = "super::user::borrowed_optional_list")]
    pub finalizers: Option<Vec<Cow<'a, str>>>,
    /// Whether `metadata.deletionTimestamp` is set (present and not null); its value does not
    /// matter.
    #[serde(default, deserialize_with = "is_set")]
    pub deletion_timestamp: bool,
}

fn is_set<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(d)?.is_some())
}

impl<'a> Object<'a> {
    /// `metadata.finalizers`, if the list is there.
    pub fn finalizers(&self) -> Option<&[Cow<'a, str>]> {
        self.metadata.as_ref()?.finalizers.as_deref()
    }

    /// Whether the object is on its way out (`deletionTimestamp` set).
    pub fn is_being_deleted(&self) -> bool {
        self.metadata.as_ref().is_some_and(|m| m.deletion_timestamp)
    }

    /// The `MyOwnShell` spec; a missing or null spec is `None`. The error names the field that
    /// does not decode and what it must be.
    pub fn spec(&self) -> Result<Option<MyOwnShellSpec>, String> {
        self.spec.map(|RawJson(raw)| spec::shell_spec(raw)).transpose()
    }

    /// Which spec fields are set, without reading their values (the mutating webhook fills
    /// only the others; whether the values are well typed is for the schema to say, which the
    /// apiserver checks right after mutation, and for the validating webhook). `None` when
    /// there is no spec.
    pub fn spec_fields(&self) -> Result<Option<SetFields>, String> {
        self.spec.map(|RawJson(raw)| spec::set_fields(raw)).transpose()
    }

    /// `spec.className`, the spec's other fields not read; `None` when there is no spec or it
    /// names no class.
    pub fn class_name(&self) -> Result<Option<Cow<'a, str>>, String> {
        Ok(self.spec.map(|RawJson(raw)| spec::class_name(raw)).transpose()?.flatten())
    }

    /// The `Scale` spec of the scale subresource.
    pub fn scale_spec(&self) -> Result<ScaleSpec, String> {
        self.spec.map_or_else(|| Ok(ScaleSpec::default()), |RawJson(raw)| spec::scale_spec(raw))
    }

    /// The spec exactly as sent (both objects of an UPDATE come from the same encoder).
    pub fn raw_spec(&self) -> Option<&'a str> {
        self.spec.map(|RawJson(raw)| raw)
    }
}

/// The review as sent.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview<'a> {
    #[serde(default, borrow)]
    api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    request: Option<Request<'a>>,
}

/// A body that is not a usable AdmissionReview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Answer HTTP 400 with this reason: the body is not an AdmissionReview the apiserver sends.
    BadRequest(String),
    /// The review and its uid are readable but the request is not: deny it (code 400).
    Undecodable {
        /// The request's uid.
        uid: String,
        /// Why the request does not decode.
        reason: String,
    },
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
    // Checking UTF-8 once for the whole body is cheaper than serde_json checking each string
    // (and it skips unread ones unchecked).
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(match serde_json::from_slice::<IncomingReview>(body) {
            Err(e) => explain(body, &e),
            Ok(_) => DecodeError::BadRequest("the body is not UTF-8".into()),
        });
    };
    let review = serde_json::from_str::<IncomingReview>(text).map_err(|typed| explain(body, &typed))?;
    check_type(&review.api_version, &review.kind)?;
    review.request.ok_or_else(|| DecodeError::BadRequest("the AdmissionReview has no request".into()))
}

/// The largest undecodable body explained value by value ([`explain`]); a larger one is
/// explained from its envelope alone ([`explain_large`]), whose every other value is skipped
/// unread: a `serde_json::Value` of an 8 MiB array takes several times its size.
const EXPLAINED_WHOLE: usize = 64 * 1024;

/// Why a body that failed to decode did: not JSON, the wrong type, no request, or a request
/// that is readable enough to carry a uid (then it is denied rather than refused). Only bad
/// input comes here, so it may take its time, but never much more memory than the body's size.
fn explain(body: &[u8], typed: &serde_json::Error) -> DecodeError {
    if body.len() > EXPLAINED_WHOLE {
        return explain_large(body, typed);
    }
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

/// The envelope of a large body: its type and its request's uid, nothing else kept.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    request: Option<EnvelopeRequest>,
}

#[derive(Deserialize)]
struct EnvelopeRequest {
    #[serde(default)]
    uid: Option<String>,
}

/// [`explain`] for a body over [`EXPLAINED_WHOLE`]: from its envelope, read without keeping
/// anything else.
fn explain_large(body: &[u8], typed: &serde_json::Error) -> DecodeError {
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(e) if e.is_data() => return DecodeError::BadRequest(format!("invalid AdmissionReview: {e}")),
        Err(e) => return DecodeError::BadRequest(format!("malformed JSON: {e}")),
    };
    if let Err(e) = check_type(&envelope.api_version.unwrap_or_default(), &envelope.kind.unwrap_or_default()) {
        return e;
    }
    match envelope.request.and_then(|r| r.uid).filter(|uid| !uid.is_empty()) {
        None => DecodeError::BadRequest(format!("invalid AdmissionReview: {typed}")),
        Some(uid) => DecodeError::Undecodable { uid, reason: format!("the request does not decode: {typed}") },
    }
}
