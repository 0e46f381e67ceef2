//! One review from bytes to answer: decode the body ([`crate::review`]), run the webhook it came
//! to (the spec rules of [`crate::admission`], or the connect gate of [`crate::connect`]) and say
//! how it ended. Pure: the HTTP layer ([`crate::server`]) moves the bytes, counts the outcome
//! and hands the connections to the record.

use std::borrow::Cow;

use crate::admission::Policy;
use crate::admission::defaulting::mutate_with_classes;
use crate::admission::validation::validate_with_classes;
use crate::classes::ClassIndex;
use crate::classes::usage::UseCheck;
use crate::connect::ShellIndex;
use crate::connect::gate::{self, Connection};
use crate::review::{DecodeError, Operation, Response, decode};

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
    /// How `response` ends the review.
    pub fn of(response: &Response<'_>) -> Self {
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
#[expect(
    clippy::large_enum_variant,
    reason = "made once per review and moved once: boxing the review would add an allocation to every answer, where the bad request it is compared with is rare"
)]
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
        connections: Vec<Connection>,
        /// A shell whose creation the validating webhook allowed: it still must inherit no pod
        /// ([`crate::earlier_pods`]), which the HTTP layer asks the apiserver about.
        new_shell: Option<NewShell<'a>>,
        /// The class the requester must be allowed to `use` for the answer to stand, which the
        /// HTTP layer asks the apiserver about ([`crate::classes::usage`]).
        class_use: Option<UseCheck<'a>>,
    },
    /// HTTP 400 with this plain reason: the body is not an AdmissionReview the apiserver sends.
    BadRequest(String),
}

/// A shell about to be created: where, and its name (borrowed from the review's body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewShell<'a> {
    /// Its namespace.
    pub namespace: Cow<'a, str>,
    /// Its name.
    pub name: Cow<'a, str>,
}

/// Decode, run `webhook`, and say what to answer. Never panics, whatever the bytes. `shells` is
/// what the webhook knows of every shell (who may connect, whose it is).
pub fn review<'a>(webhook: Webhook, body: &'a [u8], policy: &Policy, shells: &ShellIndex) -> Answer<'a> {
    review_with_classes(webhook, body, policy, shells, ClassIndex::none())
}

/// [`review`] with the shells' classes (`classes`).
pub fn review_with_classes<'a>(
    webhook: Webhook,
    body: &'a [u8],
    policy: &Policy,
    shells: &ShellIndex,
    classes: &ClassIndex,
) -> Answer<'a> {
    let request = match decode(body) {
        Ok(request) => request,
        Err(DecodeError::BadRequest(reason)) => return Answer::BadRequest(reason),
        Err(DecodeError::Undecodable { uid, reason }) => {
            let response = Response::deny(Cow::Owned(uid), 400, "BadRequest", reason);
            let (outcome, connections, new_shell) = (Outcome::Invalid, Vec::new(), None);
            return Answer::Review { response, operation: None, outcome, connections, new_shell, class_use: None };
        }
    };
    let (response, connections, class_use) = match webhook {
        Webhook::Mutate => (mutate_with_classes(&request, policy, classes), Vec::new(), None),
        Webhook::Validate => {
            let (response, class_use) = validate_with_classes(&request, policy, shells, classes);
            (response, Vec::new(), class_use)
        }
        Webhook::Connect => {
            let (response, connections) = gate::connect(&request, shells, &policy.admin_groups);
            (response, connections, None)
        }
    };
    let creates = webhook == Webhook::Validate
        && request.operation == Operation::Create
        && request.sub_resource.is_none()
        && response.allowed
        && !request.name.is_empty();
    let new_shell = creates.then(|| NewShell { namespace: request.namespace.clone(), name: request.name.clone() });
    Answer::Review {
        outcome: Outcome::of(&response),
        operation: Some(request.operation),
        response,
        connections,
        new_shell,
        class_use,
    }
}
