//! Admission logic as pure functions: an AdmissionReview body in, a response out. No I/O, no
//! clock, no state, so `dryRun` requests behave exactly like real ones and every rule is a table
//! test. The HTTP layer ([`crate::server`]) only moves bytes.
//!
//! - [`request`]: what is read of a review, borrowed from the body. `review_reader` and
//!   `spec_reader` read the apiserver's usual shape in one pass with `json_cursor`; serde
//!   reads everything else and stays the reference (differential tests hold them together);
//! - [`defaulting`]: the mutating webhook (defaults and the finalizer as a JSON Patch);
//! - [`validation`]: the validating webhook (rules, ratcheting on update, warnings), with
//!   `resources` and `resource_names` holding `spec.resources` to the apiserver's own rules;
//! - [`response`]: the answer and its JSON.

pub mod defaulting;
mod json_cursor;
pub mod request;
mod resource_names;
mod resources;
pub mod response;
mod review_reader;
mod spec_reader;
pub mod validation;

use std::borrow::Cow;

use myownshell_api::names;

pub use defaulting::mutate;
pub use request::{DecodeError, Object, Operation, Request, Spec, decode};
pub use response::{Response, Status};
pub use validation::{Problem, check_size, check_spec, validate, warnings};

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
    fn of(response: &Response<'_>) -> Self {
        match (response.allowed, response.patch.is_some(), response.status.as_ref().map(|s| s.code)) {
            (true, true, _) => Outcome::Patched,
            (true, false, _) => Outcome::Allowed,
            (false, _, Some(400)) => Outcome::Invalid,
            (false, _, _) => Outcome::Denied,
        }
    }
}

/// The result of one review, for the HTTP layer.
#[derive(Debug, Clone)]
pub enum Answer<'a> {
    /// HTTP 200 with this response in an AdmissionReview.
    Review { response: Response<'a>, operation: Option<Operation>, outcome: Outcome },
    /// HTTP 400 with this plain reason: the body is not an AdmissionReview the apiserver sends.
    BadRequest(String),
}

/// Decode, run `webhook`, and say what to answer. Never panics, whatever the bytes.
pub fn review<'a>(webhook: Webhook, body: &'a [u8], policy: &Policy) -> Answer<'a> {
    let request = match decode(body) {
        Ok(request) => request,
        Err(DecodeError::BadRequest(reason)) => return Answer::BadRequest(reason),
        Err(DecodeError::Undecodable { uid, reason }) => {
            let response = Response::deny(Cow::Owned(uid), 400, "BadRequest", reason);
            return Answer::Review { response, operation: None, outcome: Outcome::Invalid };
        }
    };
    let response = match webhook {
        Webhook::Mutate => mutate(&request),
        Webhook::Validate => validate(&request, policy),
    };
    Answer::Review { outcome: Outcome::of(&response), operation: Some(request.operation), response }
}

/// Deny with code 400: the object is not a `MyOwnShell` this webhook can read.
fn invalid<'a>(request: &Request<'a>, reason: String) -> Response<'a> {
    Response::deny(request.uid.clone(), 400, "BadRequest", reason)
}

/// The request's `MyOwnShell`, or why it carries none.
fn shell_object<'r, 'a>(request: &'r Request<'a>) -> Result<&'r Object<'a>, String> {
    if !is_myownshell(request) {
        return Err(format!("this webhook handles {} objects, got {}", names::KIND, describe_kind(request)));
    }
    request.object.as_ref().ok_or_else(|| "the request has no object".to_owned())
}

fn is_myownshell(request: &Request<'_>) -> bool {
    request.kind.group == names::GROUP && request.kind.kind == names::KIND && request.sub_resource.is_none()
}

fn is_scale(request: &Request<'_>) -> bool {
    request.sub_resource.as_deref() == Some("scale") && request.kind.kind == "Scale"
}

fn describe_kind(request: &Request<'_>) -> String {
    let k = &request.kind;
    let sub = request.sub_resource.as_deref().map(|s| format!(" (subresource {s})")).unwrap_or_default();
    format!("{}/{} {}{sub}", k.group, k.version, k.kind)
}

#[cfg(test)]
mod tests;
