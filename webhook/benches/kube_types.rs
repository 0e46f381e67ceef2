//! The same admission answers made with kube's own types (`kube::core::admission`), for the
//! row of `cargo xtask bench webhook` that decides whether the webhook's hand-written review
//! types (`webhook/src/review/request.rs`, `response.rs`) are worth keeping.
//!
//! The decisions are the webhook's own (`defaulting::operations`, `validation::check_spec`,
//! `warnings`); only the decoding of the review and the encoding of the answer differ:
//! `AdmissionReview<DynamicObject>` in, `AdmissionResponse::into_review` out, as a webhook built
//! on kube's types would do it.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use myownshell_api::{MyOwnShellSpec, names};
use myownshell_runtime::server::RequestBody;
use myownshell_webhook::admission::defaulting::{Needs, operations};
use myownshell_webhook::admission::{Policy, check_spec, warnings};
use serde_json::Value;

/// The mutating webhook on kube's types.
fn mutate(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return response;
    }
    let Some(object) = &request.object else { return AdmissionResponse::invalid("no object") };
    let spec = object.data.get("spec").and_then(Value::as_object);
    let finalizers = object.metadata.finalizers.as_ref().map(|list| list.iter().map(String::as_str));
    let is_set = spec.map(|s| |field: &str| s.get(field).is_some_and(|v| !v.is_null()));
    let needs = Needs::from_parts(object.metadata.deletion_timestamp.is_some(), finalizers, is_set);
    let mut ops = if needs.nothing() { Vec::new() } else { operations(&needs) };
    ops.extend(owner_operations(request, spec));
    if ops.is_empty() {
        return response;
    }
    match response.with_patch(json_patch::Patch(ops)) {
        Ok(patched) => patched,
        Err(e) => AdmissionResponse::invalid(e),
    }
}

/// The owner stamping of `defaulting::owner_operations`, on kube's types.
fn owner_operations(
    request: &AdmissionRequest<DynamicObject>,
    spec: Option<&serde_json::Map<String, Value>>,
) -> Vec<json_patch::PatchOperation> {
    use json_patch::jsonptr::PointerBuf;
    use json_patch::{AddOperation, PatchOperation, RemoveOperation};
    let add = |field: &str, value: &str| {
        PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["spec", field]),
            value: Value::String(value.to_owned()),
        })
    };
    let set = |field: &str| spec.is_some_and(|s| s.get(field).is_some_and(|v| !v.is_null()));
    let user = &request.user_info;
    let mut ops = Vec::new();
    match request.operation {
        Operation::Create => {
            let Some(name) = user.username.as_deref().filter(|n| !n.is_empty()) else { return ops };
            ops.push(add("owner", name));
            match user.uid.as_deref().filter(|u| !u.is_empty()) {
                Some(uid) => ops.push(add("ownerUID", uid)),
                None if set("ownerUID") => ops.push(PatchOperation::Remove(RemoveOperation {
                    path: PointerBuf::from_tokens(["spec", "ownerUID"]),
                })),
                None => {}
            }
        }
        Operation::Update => {
            let old = request.old_object.as_ref().and_then(|o| o.data.get("spec")).and_then(Value::as_object);
            for field in ["owner", "ownerUID"] {
                if let Some(value) = old.and_then(|o| o.get(field)).and_then(Value::as_str).filter(|_| !set(field)) {
                    ops.push(add(field, value));
                }
            }
        }
        _ => {}
    }
    ops
}

/// The validating webhook on kube's types.
fn validate(request: &AdmissionRequest<DynamicObject>, policy: &Policy) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    let Some(object) = &request.object else { return AdmissionResponse::invalid("no object") };
    let spec: MyOwnShellSpec = match object.data.get("spec").map(|s| serde_json::from_value(s.clone())) {
        None => MyOwnShellSpec::default(),
        Some(Ok(spec)) => spec,
        Some(Err(e)) => return response.deny(format!("spec does not decode: {e}")),
    };
    let problems = check_spec(&spec, policy);
    if !problems.is_empty() {
        let message = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        return response.deny(message);
    }
    let warned = warnings(&spec, request.namespace.as_deref().unwrap_or_default());
    if !warned.is_empty() {
        response.warnings = Some(warned);
    }
    response
}

/// One review body in, the answer's JSON out.
pub fn answer(path: &str, body: &[u8], policy: &Policy) -> Result<Vec<u8>, String> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let request: AdmissionRequest<DynamicObject> = review.try_into().map_err(|e| format!("{e}"))?;
    let response = if path == names::MUTATE_PATH { mutate(&request) } else { validate(&request, policy) };
    serde_json::to_vec(&response.into_review()).map_err(|e| e.to_string())
}

/// A connection's service answering with [`answer`], as `server::admission_service` does with
/// the webhook's own types.
pub fn service(
    policy: Policy,
) -> impl hyper::service::Service<
    http::Request<RequestBody>,
    Response = http::Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<http::Response<Full<Bytes>>, Infallible>> + Send + 'static,
> + Send
+ 'static {
    let policy = Arc::new(policy);
    hyper::service::service_fn(move |request: http::Request<RequestBody>| {
        let policy = policy.clone();
        async move {
            let path = request.uri().path().to_owned();
            let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let (status, body) = match answer(&path, &body, &policy) {
                Ok(json) => (200, Bytes::from(json)),
                Err(reason) => (400, Bytes::from(reason)),
            };
            let mut response = http::Response::new(Full::new(body));
            *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
            Ok::<_, Infallible>(response)
        }
    })
}
