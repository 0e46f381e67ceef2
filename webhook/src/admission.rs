//! Admission logic as pure functions: an AdmissionReview body in, a response out. No I/O, no
//! state, so `dryRun` requests behave exactly like real ones and every rule is a table test. The
//! one reading of the clock (how far `spec.lifetime.extendedUntil` may reach) is taken in
//! `validation::validate` and handed to the pure rule (`lifetime::check`), which the tests call
//! at a fixed time. The HTTP layer ([`crate::server`]) only moves bytes.
//!
//! - [`request`]: what is read of a review, decoded by serde and borrowed from the body; `spec`
//!   reads its spec into `myownshell_api::MyOwnShellSpec` and names the field of one that does
//!   not decode;
//! - [`defaulting`]: the mutating webhook (defaults, the finalizer and the owner as a JSON Patch);
//! - [`validation`]: the validating webhook (rules, ratcheting on update, warnings), with
//!   `resources` and `resource_names` holding `spec.resources` to the apiserver's own rules,
//!   `sharing` holding `spec.sharedWith` to its, `lifetime` holding `spec.lifetime` to its (and
//!   defaulting it from the flags), and `ownership` saying who may change a spec;
//! - [`connect`]: the connect webhook (who may exec, attach, port-forward, debug into a shell);
//! - [`response`]: the answer and its JSON.

pub mod connect;
pub mod defaulting;
mod lifetime;
mod ownership;
mod problem;
pub mod request;
mod resource_names;
mod resources;
pub mod response;
mod sharing;
mod spec;
pub mod validation;

use std::borrow::Cow;

pub use defaulting::mutate;
pub use problem::Problem;
pub use request::{DecodeError, Object, Operation, Request, decode};
pub use response::{EncodedPatch, Response, Status};
pub use spec::{ScaleSpec, SetFields};
pub use validation::{Policy, check_size, check_spec, validate, warnings};

use crate::shell_index::ShellIndex;

/// Which endpoint a review came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Webhook {
    /// The mutating webhook (defaults, the finalizer, the owner).
    Mutate = 0,
    /// The validating webhook (the rules).
    Validate = 1,
    /// The connect webhook (who may connect to a shell's pods).
    Connect = 2,
}

impl Webhook {
    /// Each webhook, in discriminant order.
    pub const ALL: [Webhook; 3] = [Webhook::Mutate, Webhook::Validate, Webhook::Connect];

    /// The `webhook` label value: `mutate`, `validate` or `connect`.
    pub fn as_str(self) -> &'static str {
        match self {
            Webhook::Mutate => "mutate",
            Webhook::Validate => "validate",
            Webhook::Connect => "connect",
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
        /// The connections into shells it decided on (connect webhook only), to be recorded.
        connections: Vec<connect::Connection>,
    },
    /// HTTP 400 with this plain reason: the body is not an AdmissionReview the apiserver sends.
    BadRequest(String),
}

/// Decode, run `webhook`, and say what to answer. Never panics, whatever the bytes. `shells` is
/// what the webhook knows of every shell (who may connect, whose it is).
pub fn review<'a>(webhook: Webhook, body: &'a [u8], policy: &Policy, shells: &ShellIndex) -> Answer<'a> {
    let request = match decode(body) {
        Ok(request) => request,
        Err(DecodeError::BadRequest(reason)) => return Answer::BadRequest(reason),
        Err(DecodeError::Undecodable { uid, reason }) => {
            let response = Response::deny(Cow::Owned(uid), 400, "BadRequest", reason);
            return Answer::Review { response, operation: None, outcome: Outcome::Invalid, connections: Vec::new() };
        }
    };
    let (response, connections) = match webhook {
        Webhook::Mutate => (mutate(&request, policy), Vec::new()),
        Webhook::Validate => (validate(&request, policy, shells), Vec::new()),
        Webhook::Connect => connect::connect(&request, shells),
    };
    Answer::Review { outcome: Outcome::of(&response), operation: Some(request.operation), response, connections }
}

#[cfg(test)]
mod tests;
