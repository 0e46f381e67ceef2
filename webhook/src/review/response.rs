//! The answer to a review, and its AdmissionReview (`admission.k8s.io/v1`) JSON.

use std::borrow::Cow;

use base64::Engine;
use serde::Serialize;
use serde::ser::SerializeStruct;
use serde_json::value::RawValue;

use super::request::{REVIEW_API_VERSION, REVIEW_KIND, Request};

/// A JSON Patch encoded for an answer: the defaults are encoded once, base64 included, and reused
/// for every request that needs them; a patch that names the requester is encoded per request,
/// and its base64 written straight into the answer.
#[derive(Debug, Clone)]
pub struct EncodedPatch {
    /// The RFC 6902 JSON Patch.
    pub json: Vec<u8>,
    /// `json` in base64 as a JSON string, as `AdmissionResponse.patch` carries it, for a patch
    /// made once and reused: written into answers as it is (base64 needs no escaping, so the
    /// answer's encoder need not scan it). `None` for a patch made for one answer.
    pub base64_json: Option<Box<RawValue>>,
}

impl EncodedPatch {
    /// Encode the JSON Patch `json`, to be reused: its base64 is made now.
    pub fn new(json: Vec<u8>) -> Self {
        let base64 = base64::engine::general_purpose::STANDARD.encode(&json);
        // `"` + base64 + `"` is valid JSON; the fallback is never taken.
        let base64_json = RawValue::from_string(format!("\"{base64}\"")).ok();
        Self { json, base64_json }
    }

    /// The JSON Patch `json` of one answer: its base64 is written into the answer, never kept.
    pub fn once(json: Vec<u8>) -> Self {
        Self { json, base64_json: None }
    }

    /// The length of the patch in base64 as a JSON string.
    fn base64_json_len(&self) -> usize {
        match &self.base64_json {
            Some(raw) => raw.get().len(),
            None => base64::encoded_len(self.json.len(), true).unwrap_or(0) + 2,
        }
    }

    /// Append the patch in base64 as a JSON string to `out`.
    fn write_base64_json(&self, out: &mut Vec<u8>) {
        if let Some(raw) = &self.base64_json {
            out.extend_from_slice(raw.get().as_bytes());
            return;
        }
        out.push(b'"');
        let start = out.len();
        out.resize(start + self.base64_json_len() - 2, 0);
        // The room is exactly the encoded length, so this never fails.
        let written =
            base64::engine::general_purpose::STANDARD.encode_slice(&self.json, &mut out[start..]).unwrap_or(0);
        out.truncate(start + written);
        out.push(b'"');
    }
}

impl PartialEq for EncodedPatch {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
    }
}

/// Why a request is refused, as a `metav1.Status` (the apiserver shows `message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// 422 for a spec that breaks the rules, 400 for a request that cannot be read.
    pub code: u16,
    /// `Invalid` or `BadRequest`.
    pub reason: &'static str,
    /// What is wrong: the field, the rule and the value.
    pub message: String,
}

/// The answer to one review.
#[derive(Debug, Clone)]
pub struct Response<'a> {
    /// The request's uid, which the apiserver matches the answer with.
    pub uid: Cow<'a, str>,
    /// Whether the request may go on.
    pub allowed: bool,
    /// Set when the request is refused.
    pub status: Option<Status>,
    /// The JSON Patch to apply (mutating webhook only).
    pub patch: Option<Cow<'static, EncodedPatch>>,
    /// Shown by kubectl as `Warning: …`.
    pub warnings: Vec<String>,
}

impl<'a> Response<'a> {
    /// Allow `request`, unchanged.
    pub fn allow(request: &Request<'a>) -> Self {
        Self::allow_uid(request.uid.clone())
    }

    /// Allow the request with this uid, unchanged.
    pub fn allow_uid(uid: Cow<'a, str>) -> Self {
        Self { uid, allowed: true, status: None, patch: None, warnings: Vec::new() }
    }

    /// Refuse with `code`, `reason` and a message that names the field and the rule.
    pub fn deny(uid: Cow<'a, str>, code: u16, reason: &'static str, message: String) -> Self {
        Self { uid, allowed: false, status: Some(Status { code, reason, message }), patch: None, warnings: Vec::new() }
    }

    /// Deny `request` with code 400: it carries no `MyOwnShell` this webhook can read.
    pub fn invalid(request: &Request<'a>, reason: String) -> Self {
        Self::deny(request.uid.clone(), 400, "BadRequest", reason)
    }

    /// The same answer, carrying `patch`.
    pub fn with_patch(mut self, patch: Cow<'static, EncodedPatch>) -> Self {
        self.patch = Some(patch);
        self
    }

    /// The status message, or "" when allowed.
    pub fn message(&self) -> &str {
        self.status.as_ref().map_or("", |s| s.message.as_str())
    }

    /// The whole AdmissionReview body.
    pub fn to_review_json(&self) -> Vec<u8> {
        if self.allowed && self.status.is_none() && self.warnings.is_empty() && needs_no_escaping(&self.uid) {
            // Nearly every answer: an allow, perhaps with a patch, for a UUID. Written directly
            // into a buffer of exactly its size (so it becomes the response body without another
            // allocation); a test holds it byte for byte to what the serializer writes.
            let patch_len = self.patch.as_ref().map_or(0, |p| PATCH_FIELDS.len() + p.base64_json_len());
            let mut out = Vec::with_capacity(ALLOW_PREFIX.len() + self.uid.len() + ALLOWED.len() + patch_len + 2);
            out.extend_from_slice(ALLOW_PREFIX);
            out.extend_from_slice(self.uid.as_bytes());
            out.extend_from_slice(ALLOWED);
            if let Some(patch) = &self.patch {
                out.extend_from_slice(PATCH_FIELDS);
                patch.write_base64_json(&mut out);
            }
            out.extend_from_slice(b"}}");
            return out;
        }
        let mut out = Vec::with_capacity(256 + self.uid.len() + self.message().len());
        self.write_with_serde(&mut out);
        out
    }

    fn write_with_serde(&self, out: &mut Vec<u8>) {
        // Serializing plain strings, bools and numbers into a Vec cannot fail.
        let _ = serde_json::to_writer(out, &Review { response: self });
    }
}

const ALLOW_PREFIX: &[u8] =
    b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"";

const ALLOWED: &[u8] = b"\",\"allowed\":true";
const PATCH_FIELDS: &[u8] = b",\"patchType\":\"JSONPatch\",\"patch\":";

/// Whether `text` goes into a JSON string as it is (a UUID does).
fn needs_no_escaping(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'))
}

struct Review<'r, 'a> {
    response: &'r Response<'a>,
}

impl Serialize for Review<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut review = s.serialize_struct("AdmissionReview", 3)?;
        review.serialize_field("apiVersion", REVIEW_API_VERSION)?;
        review.serialize_field("kind", REVIEW_KIND)?;
        review.serialize_field("response", self.response)?;
        review.end()
    }
}

impl Serialize for Response<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut r = s.serialize_struct("AdmissionResponse", 5)?;
        r.serialize_field("uid", &self.uid)?;
        r.serialize_field("allowed", &self.allowed)?;
        match &self.status {
            Some(status) => r.serialize_field("status", &WireStatus(status))?,
            None => r.skip_field("status")?,
        }
        match &self.patch {
            Some(patch) => {
                r.serialize_field("patchType", "JSONPatch")?;
                r.serialize_field("patch", &Base64Json(patch))?;
            }
            None => {
                r.skip_field("patchType")?;
                r.skip_field("patch")?;
            }
        }
        if self.warnings.is_empty() {
            r.skip_field("warnings")?;
        } else {
            r.serialize_field("warnings", &self.warnings)?;
        }
        r.end()
    }
}

/// A patch in base64, as a JSON string.
struct Base64Json<'p>(&'p EncodedPatch);

impl Serialize for Base64Json<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0.base64_json {
            Some(raw) => raw.serialize(s),
            None => s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0.json)),
        }
    }
}

/// `metav1.Status` of a refusal.
struct WireStatus<'s>(&'s Status);

impl Serialize for WireStatus<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Status", 4)?;
        st.serialize_field("status", "Failure")?;
        st.serialize_field("code", &self.0.code)?;
        st.serialize_field("reason", self.0.reason)?;
        st.serialize_field("message", &self.0.message)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_writing_matches_the_serializer_byte_for_byte() {
        let json = br#"[{"op":"add","path":"/spec/size","value":1},{"op":"add","path":"/metadata/finalizers/-","value":"myownshell.io/finalizer"}]"#;
        let reused: &'static EncodedPatch = Box::leak(Box::new(EncodedPatch::new(json.to_vec())));
        // Of every length modulo 3 (base64's padding).
        let once = (0..3).map(|cut| Cow::Owned(EncodedPatch::once(json[cut..].to_vec())));
        for uid in ["705ab4f5-6393-11e8-b7cc-42010a800002", "", "a.b_c:d"] {
            for patch in [None, Some(Cow::Borrowed(reused))].into_iter().chain(once.clone().map(Some)) {
                let response = Response { patch: patch.clone(), ..Response::allow_uid(uid.into()) };
                let mut via_serde = Vec::new();
                response.write_with_serde(&mut via_serde);
                let direct = response.to_review_json();
                assert_eq!(direct.len(), direct.capacity(), "sized exactly");
                assert_eq!(
                    String::from_utf8(direct).unwrap(),
                    String::from_utf8(via_serde).unwrap(),
                    "{uid:?} {patch:?}"
                );
            }
        }
    }
}
