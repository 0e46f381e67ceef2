//! Admission logic as pure functions: an AdmissionReview body in, a response out. No I/O, no
//! clock, no state, so `dryRun` requests behave exactly like real ones and every rule is a table
//! test. The HTTP layer ([`crate::server`]) only moves bytes.
//!
//! - [`request`]: what is read of a review, decoded by serde and borrowed from the body; `spec`
//!   reads its spec into `myownshell_api::MyOwnShellSpec` and names the field of one that does
//!   not decode;
//! - [`defaulting`]: the mutating webhook (defaults and the finalizer as a JSON Patch);
//! - [`validation`]: the validating webhook (rules, ratcheting on update, warnings), with
//!   `resources` and `resource_names` holding `spec.resources` to the apiserver's own rules;
//! - [`response`]: the answer and its JSON.

pub mod defaulting;
mod problem;
pub mod request;
mod resource_names;
mod resources;
pub mod response;
mod spec;
pub mod validation;

use std::borrow::Cow;

pub use defaulting::mutate;
pub use problem::Problem;
pub use request::{DecodeError, Object, Operation, Request, decode};
pub use response::{EncodedPatch, Response, Status};
pub use spec::{ScaleSpec, SetFields};
pub use validation::{Policy, check_size, check_spec, validate, warnings};

/// Which endpoint a review came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Webhook {
    /// The mutating webhook (defaults and the finalizer).
    Mutate,
    /// The validating webhook (the rules).
    Validate,
}

impl Webhook {
    /// The `webhook` label value: `mutate` or `validate`.
    pub fn as_str(self) -> &'static str {
        match self {
            Webhook::Mutate => "mutate",
            Webhook::Validate => "validate",
        }
    }
}

/// How a review ended (the `result` label of the request metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Allowed unchanged.
    Allowed,
    /// Allowed with a patch.
    Patched,
    /// Denied: the spec breaks a rule.
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
    Review {
        /// The answer.
        response: Response<'a>,
        /// The request's operation, when it decoded.
        operation: Option<Operation>,
        /// How the review ended.
        outcome: Outcome,
    },
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

#[cfg(test)]
mod tests;
