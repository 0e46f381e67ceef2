//! Admission logic as pure functions: an AdmissionReview body in, a response out. No I/O, no
//! clock, no state, so `dryRun` requests behave exactly like real ones and every rule is a table
//! test. The HTTP layer ([`crate::server`]) only moves bytes.

use std::collections::BTreeMap;

use std::borrow::Cow;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, NamespaceResourceScope, Resource};
use myownshell_api::{MyOwnShellSpec, defaults, names};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::{image, quantity};

/// The AdmissionReview version served (`admissionReviewVersions: [v1]`).
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
pub const REVIEW_KIND: &str = "AdmissionReview";

/// What admission reads of an object (a `MyOwnShell`, or a `Scale` for the scale subresource):
/// the few metadata fields it needs and `spec` as JSON. Everything else (managedFields,
/// annotations, status, …) is skipped while parsing instead of being built and thrown away.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Admitted {
    #[serde(default, deserialize_with = "admission_metadata")]
    pub metadata: ObjectMeta,
    /// `None` when absent or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionMetadata {
    name: Option<String>,
    namespace: Option<String>,
    finalizers: Option<Vec<String>>,
    deletion_timestamp: Option<Time>,
}

fn admission_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = Option::<AdmissionMetadata>::deserialize(d)?;
    Ok(m.map(|m| ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        finalizers: m.finalizers,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    })
    .unwrap_or_default())
}

impl Resource for Admitted {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        names::KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        names::GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        names::VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        names::PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A decoded admission request.
pub type Request = AdmissionRequest<Admitted>;

/// Which endpoint a review came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Webhook {
    Mutate,
    Validate,
}

impl Webhook {
    pub fn as_str(self) -> &'static str {
        match self {
            Webhook::Mutate => "mutate",
            Webhook::Validate => "validate",
        }
    }
}

/// The operator's admission settings (`--max-size`, `--allowed-registries`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub max_size: i32,
    /// Registries or repository prefixes images may come from; empty means any.
    pub allowed_registries: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Self { max_size: 50, allowed_registries: Vec::new() }
    }
}

/// The result of one review, for the HTTP layer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// HTTP 200 with this AdmissionReview.
    Review { review: Box<AdmissionReview<DynamicObject>>, operation: &'static str, outcome: Outcome },
    /// HTTP 400 with this plain reason: the body is not an AdmissionReview the apiserver sends.
    BadRequest(String),
}

/// How a review ended (the `result` label of the request metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Allowed,
    Patched,
    Denied,
    /// A request that does not decode (denied with code 400).
    Invalid,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Patched => "patched",
            Outcome::Denied => "denied",
            Outcome::Invalid => "invalid",
        }
    }
}

pub fn operation_str(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// A body that is not a usable AdmissionReview.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    /// Answer HTTP 400 with this reason.
    BadRequest(String),
    /// The review and its uid are readable but the object is not: deny it (code 400).
    Undecodable { response: Box<AdmissionResponse>, reason: String },
}

fn check_type(api_version: &str, kind: &str) -> Result<(), String> {
    if api_version == REVIEW_API_VERSION && kind == REVIEW_KIND {
        Ok(())
    } else {
        Err(format!(
            "expected apiVersion {REVIEW_API_VERSION} and kind {REVIEW_KIND}, got {api_version:?} and {kind:?}"
        ))
    }
}

/// The review as sent. kube's `AdmissionReview` flattens its type fields, which makes serde
/// buffer the whole body before decoding it; reading the two fields directly is much cheaper.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request>,
}

/// Decode an AdmissionReview body.
pub fn decode(body: &[u8]) -> Result<Request, DecodeError> {
    match serde_json::from_slice::<IncomingReview>(body) {
        Ok(review) => {
            check_type(&review.api_version, &review.kind).map_err(DecodeError::BadRequest)?;
            let mut request =
                review.request.ok_or_else(|| DecodeError::BadRequest("the AdmissionReview has no request".into()))?;
            request.types = kube::core::TypeMeta { api_version: review.api_version, kind: review.kind };
            Ok(request)
        }
        Err(typed) => {
            // Find out how far it is from a review: not JSON, the wrong type, no request, or a
            // request whose object does not decode.
            let value: Value =
                serde_json::from_slice(body).map_err(|e| DecodeError::BadRequest(format!("malformed JSON: {e}")))?;
            let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            check_type(&text(&value, "apiVersion"), &text(&value, "kind")).map_err(DecodeError::BadRequest)?;
            let request = match value.get("request") {
                Some(r) if r.is_object() => r,
                _ => return Err(DecodeError::BadRequest("the AdmissionReview has no request".into())),
            };
            let uid = text(request, "uid");
            if uid.is_empty() {
                return Err(DecodeError::BadRequest(format!("invalid AdmissionReview: {typed}")));
            }
            let reason = format!("the request does not decode: {typed}");
            let mut response = AdmissionResponse::invalid(&reason);
            response.uid = uid;
            response.result.code = 400;
            response.result.reason = "BadRequest".into();
            Err(DecodeError::Undecodable { response: Box::new(response), reason })
        }
    }
}

/// Decode, run `webhook`, and say what to answer. Never panics, whatever the bytes.
pub fn review(webhook: Webhook, body: &[u8], policy: &Policy) -> Answer {
    let request = match decode(body) {
        Ok(request) => request,
        Err(DecodeError::BadRequest(reason)) => return Answer::BadRequest(reason),
        Err(DecodeError::Undecodable { response, .. }) => {
            return Answer::Review {
                review: Box::new(response.into_review()),
                operation: "",
                outcome: Outcome::Invalid,
            };
        }
    };
    let response = match webhook {
        Webhook::Mutate => mutate(&request),
        Webhook::Validate => validate(&request, policy),
    };
    let outcome = match (response.allowed, response.patch.is_some(), response.result.code) {
        (true, true, _) => Outcome::Patched,
        (true, false, _) => Outcome::Allowed,
        (false, _, 400) => Outcome::Invalid,
        (false, _, _) => Outcome::Denied,
    };
    Answer::Review { review: Box::new(response.into_review()), operation: operation_str(&request.operation), outcome }
}

/// Deny with code 400: the object is not a `MyOwnShell` this webhook can read.
fn invalid(request: &Request, reason: String) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request).deny(reason);
    response.result.code = 400;
    response.result.reason = "BadRequest".into();
    response
}

/// The request's `MyOwnShell`, or why it carries none.
fn shell_object(request: &Request) -> Result<&Admitted, String> {
    if !is_myownshell(request) {
        return Err(format!("this webhook handles {} objects, got {}", names::KIND, describe_kind(request)));
    }
    request.object.as_ref().ok_or_else(|| "the request has no object".to_owned())
}

fn is_myownshell(request: &Request) -> bool {
    request.kind.group == names::GROUP && request.kind.kind == names::KIND && request.sub_resource.is_none()
}

fn is_scale(request: &Request) -> bool {
    request.sub_resource.as_deref() == Some("scale") && request.kind.kind == "Scale"
}

fn describe_kind(request: &Request) -> String {
    let k = &request.kind;
    let sub = request.sub_resource.as_deref().map(|s| format!(" (subresource {s})")).unwrap_or_default();
    format!("{}/{} {}{sub}", k.group, k.version, k.kind)
}

/// The object's `spec` as typed, or why it is not one. A missing or null spec is an empty one.
pub fn spec_of(object: &Admitted) -> Result<MyOwnShellSpec, String> {
    match &object.spec {
        None => Ok(MyOwnShellSpec::default()),
        Some(spec) => MyOwnShellSpec::deserialize(spec).map_err(|e| format!("spec does not decode: {e}")),
    }
}

fn add(path: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(path.iter().copied()), value })
}

fn missing(map: Option<&serde_json::Map<String, Value>>, key: &str) -> bool {
    map.and_then(|m| m.get(key)).is_none_or(Value::is_null)
}

/// The JSON Patch that fills unset spec fields with [`defaults`] and adds the finalizer
/// (unless the object is being deleted). Exactly the changes; empty when nothing is missing.
pub fn default_patch(object: &Admitted) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    let spec = object.spec.as_ref().and_then(Value::as_object);
    if spec.is_none() {
        ops.push(add(&["spec"], json!({})));
    }
    type Default = fn() -> Value;
    let fields: [(&str, Default); 4] = [
        ("size", || json!(defaults::SIZE)),
        ("image", || json!(defaults::IMAGE)),
        ("command", || json!(defaults::command())),
        ("resources", || serde_json::to_value(defaults::resources()).unwrap_or_else(|_| json!({}))),
    ];
    for (field, value) in fields {
        if missing(spec, field) {
            ops.push(add(&["spec", field], value()));
        }
    }
    let meta = &object.metadata;
    if meta.deletion_timestamp.is_none() {
        match &meta.finalizers {
            None => ops.push(add(&["metadata", "finalizers"], json!([names::FINALIZER]))),
            Some(list) if !list.iter().any(|f| f == names::FINALIZER) => {
                ops.push(add(&["metadata", "finalizers", "-"], json!(names::FINALIZER)));
            }
            Some(_) => {}
        }
    }
    ops
}

/// The mutating webhook: defaults and the finalizer, as a JSON Patch (or no patch).
pub fn mutate(request: &Request) -> AdmissionResponse {
    let allowed = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) || request.sub_resource.is_some() {
        return allowed;
    }
    let object = match shell_object(request) {
        Ok(object) => object,
        Err(reason) => return invalid(request, reason),
    };
    if let Err(reason) = spec_of(object) {
        return invalid(request, reason);
    }
    let ops = default_patch(object);
    if ops.is_empty() {
        return allowed;
    }
    match allowed.with_patch(Patch(ops)) {
        Ok(patched) => patched,
        Err(e) => invalid(request, format!("cannot encode the patch: {e}")),
    }
}

/// One rule a spec breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `spec.size`, `spec.resources.limits.cpu`, …
    pub field: String,
    /// Which spec field it belongs to (for update ratcheting): `size`, `image`, `command`,
    /// `resources`.
    pub top: &'static str,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn problem(top: &'static str, field: impl Into<String>, message: String) -> Problem {
    Problem { field: field.into(), top, message }
}

fn is_standard_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-") || name.contains('/')
}

/// Every rule `size` breaks.
pub fn check_size(size: i32, policy: &Policy) -> Option<Problem> {
    (!(0..=policy.max_size).contains(&size))
        .then(|| problem("size", "spec.size", format!("must be between 0 and {}, got {size}", policy.max_size)))
}

/// Every rule the spec breaks, in field order. Unset fields are fine (defaults apply).
pub fn check_spec(spec: &MyOwnShellSpec, policy: &Policy) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(size) = spec.size {
        problems.extend(check_size(size, policy));
    }
    if let Some(reference) = &spec.image {
        match image::parse(reference) {
            Err(why) => problems.push(problem(
                "image",
                "spec.image",
                format!("must be a valid image reference ({why}), got {reference:?}"),
            )),
            Ok(parsed) if !policy.allowed_registries.is_empty() && !parsed.allowed_by(&policy.allowed_registries) => {
                problems.push(problem(
                    "image",
                    "spec.image",
                    format!(
                        "must come from an allowed registry ({}), got {reference:?}",
                        policy.allowed_registries.join(", ")
                    ),
                ));
            }
            Ok(_) => {}
        }
    }
    if let Some(command) = &spec.command {
        match command.first() {
            None => problems.push(problem("command", "spec.command", "must not be empty, got []".into())),
            Some(first) if first.trim().is_empty() => problems.push(problem(
                "command",
                "spec.command[0]",
                format!("the executable must not be empty, got {first:?}"),
            )),
            Some(_) => {}
        }
    }
    if let Some(resources) = &spec.resources {
        let empty = BTreeMap::new();
        let requests = resources.requests.as_ref().unwrap_or(&empty);
        let limits = resources.limits.as_ref().unwrap_or(&empty);
        let mut parsed: BTreeMap<(&str, &str), quantity::Quantity> = BTreeMap::new();
        for (kind, list) in [("requests", requests), ("limits", limits)] {
            for (name, q) in list {
                let field = format!("spec.resources.{kind}.{name}");
                if !is_standard_resource(name) {
                    problems.push(problem(
                        "resources",
                        field,
                        format!("must be cpu, memory, ephemeral-storage, hugepages-* or a domain-qualified name, got {name:?}"),
                    ));
                    continue;
                }
                match quantity::parse(&q.0) {
                    Err(why) => problems.push(problem(
                        "resources",
                        field,
                        format!("must be a valid quantity such as 250m or 64Mi ({why}), got {:?}", q.0),
                    )),
                    Ok(v) if v.is_negative() => {
                        problems.push(problem("resources", field, format!("must not be negative, got {:?}", q.0)));
                    }
                    Ok(v) => {
                        parsed.insert((kind, name.as_str()), v);
                    }
                }
            }
        }
        for (name, q) in requests {
            if let (Some(request), Some(limit)) =
                (parsed.get(&("requests", name.as_str())), parsed.get(&("limits", name.as_str())))
                && request > limit
            {
                let limit_text = limits.get(name).map(|l| l.0.as_str()).unwrap_or_default();
                problems.push(problem(
                    "resources",
                    format!("spec.resources.requests.{name}"),
                    format!("must be less than or equal to the limit {limit_text:?}, got {:?}", q.0),
                ));
            }
        }
    }
    problems
}

/// Admission warnings for values that pass but are risky.
pub fn warnings(spec: &MyOwnShellSpec) -> Vec<String> {
    let Some(reference) = &spec.image else { return Vec::new() };
    match image::parse(reference) {
        Ok(parsed) if parsed.tag.as_deref() == Some("latest") && parsed.digest.is_none() => vec![format!(
            "spec.image: {reference:?} uses the moving tag \"latest\"; pin a version tag or a digest so every shell runs the same image"
        )],
        Ok(parsed) if !parsed.is_pinned() => vec![format!(
            "spec.image: {reference:?} has no tag, which means \"latest\"; pin a version tag or a digest so every shell runs the same image"
        )],
        _ => Vec::new(),
    }
}

fn deny(request: &Request, problems: &[Problem]) -> AdmissionResponse {
    let message = problems.iter().map(Problem::to_string).collect::<Vec<_>>().join("; ");
    let mut response = AdmissionResponse::from(request).deny(message);
    response.result.code = 422;
    response.result.reason = "Invalid".into();
    response
}

/// An UPDATE of an object being deleted that only removes finalizers.
fn only_removes_finalizers(request: &Request) -> bool {
    let (Some(new), Some(old)) = (&request.object, &request.old_object) else { return false };
    if old.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let old_finalizers = old.metadata.finalizers.clone().unwrap_or_default();
    let new_finalizers = new.metadata.finalizers.clone().unwrap_or_default();
    new_finalizers.len() < old_finalizers.len()
        && new_finalizers.iter().all(|f| old_finalizers.contains(f))
        && new.spec == old.spec
}

/// The validating webhook: CREATE and UPDATE of `MyOwnShell`, and the `scale` subresource.
///
/// On UPDATE only fields that change are held to the rules ("ratcheting"): an object that
/// became invalid because the policy tightened (say `--max-size` lowered) can still get its
/// finalizer removed or its labels changed, and fixing one field is not blocked by another.
pub fn validate(request: &Request, policy: &Policy) -> AdmissionResponse {
    let allowed = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return allowed;
    }
    if is_scale(request) {
        return validate_scale(request, policy);
    }
    let object = match shell_object(request) {
        Ok(object) => object,
        Err(reason) => return invalid(request, reason),
    };
    if request.operation == Operation::Update && only_removes_finalizers(request) {
        return allowed;
    }
    let spec = match spec_of(object) {
        Ok(spec) => spec,
        Err(reason) => return invalid(request, reason),
    };
    let mut problems = check_spec(&spec, policy);
    if request.operation == Operation::Update
        && let Some(old) = request.old_object.as_ref().and_then(|o| spec_of(o).ok())
    {
        let unchanged = |top: &str| match top {
            "size" => spec.size == old.size,
            "image" => spec.image == old.image,
            "command" => spec.command == old.command,
            "resources" => spec.resources == old.resources,
            _ => false,
        };
        problems.retain(|p| !unchanged(p.top));
    }
    if !problems.is_empty() {
        return deny(request, &problems);
    }
    let warnings = warnings(&spec);
    let mut response = allowed;
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}

/// `kubectl scale`: an `autoscaling/v1` `Scale` whose `spec.replicas` becomes `spec.size`.
fn validate_scale(request: &Request, policy: &Policy) -> AdmissionResponse {
    let Some(object) = &request.object else {
        return invalid(request, "the request has no object".into());
    };
    let replicas = object.spec.as_ref().and_then(|s| s.get("replicas"));
    let size = match replicas {
        None | Some(Value::Null) => 0,
        Some(v) => match v.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(n) => n,
            None => return invalid(request, format!("spec.replicas must be a 32-bit integer, got {v}")),
        },
    };
    match check_size(size, policy) {
        Some(p) => deny(request, &[p]),
        None => AdmissionResponse::from(request),
    }
}

#[cfg(test)]
mod tests;
