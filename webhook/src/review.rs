//! The AdmissionReview on the wire, shared by every webhook: what is read of a request, decoded
//! by serde and borrowed from the body ([`request`]), the spec it carries read into
//! `myownshell_api::MyOwnShellSpec` with the field of one that does not decode named ([`spec`]),
//! who asks ([`user`]), and the answer and its JSON ([`response`]).
//!
//! Must not hold a rule: what a request may do is [`crate::admission`]'s and [`crate::connect`]'s,
//! which both read this vocabulary and so must not depend on each other for it.

pub mod request;
pub mod response;
pub mod spec;
pub mod user;

pub use request::{DecodeError, Object, Operation, Request, decode};
pub use response::{EncodedPatch, Response, Status};
pub use spec::{ScaleSpec, SetFields};
pub use user::UserInfo;
