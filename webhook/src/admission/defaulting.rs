//! The mutating webhook: fill unset spec fields with [`defaults`] and add the finalizer, as an
//! RFC 6902 JSON Patch of exactly the changes.
//!
//! The patch depends only on which of a handful of things the object lacks ([`Needs`]), so
//! each distinct patch is built once (with the `json-patch` types), encoded once (JSON, then
//! base64 as the AdmissionReview wants it) and reused for every request that needs it.

use std::sync::OnceLock;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use myownshell_api::{defaults, names};
use serde_json::{Value, json};

use super::request::{Object, Operation, Request};
use super::response::{EncodedPatch, Response};
use super::spec::SetFields;

/// What the finalizer list needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizerChange {
    /// Ours is there, or the object is being deleted.
    None,
    /// No `finalizers` list yet: add one holding ours.
    CreateList,
    /// A list without ours: append it.
    Append,
}

/// What an object lacks. Every field is one bit of the cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// No spec at all (absent or null): `/spec` is created first.
    pub spec: bool,
    /// `spec.size` is unset.
    pub size: bool,
    /// `spec.image` is unset.
    pub image: bool,
    /// `spec.command` is unset.
    pub command: bool,
    /// `spec.resources` is unset.
    pub resources: bool,
    /// What the finalizer list needs.
    pub finalizer: FinalizerChange,
}

impl Needs {
    /// What `object` (with the fields its spec sets) lacks.
    pub fn of(object: &Object<'_>, spec: Option<&SetFields>) -> Self {
        let finalizers = object.finalizers().map(|list| list.iter().map(|f| f.as_ref()));
        Self::from_parts(object.is_being_deleted(), finalizers, spec.map(|s| |field: &str| s.contains(field)))
    }

    /// What an object lacks, from whether it is being deleted, its finalizers (`None`: no
    /// list) and which spec fields are set (`None`: no spec at all).
    pub fn from_parts<'f>(
        deleting: bool,
        finalizers: Option<impl IntoIterator<Item = &'f str>>,
        is_set: Option<impl Fn(&str) -> bool>,
    ) -> Self {
        let finalizer = match finalizers {
            // Never add a finalizer to an object on its way out.
            _ if deleting => FinalizerChange::None,
            None => FinalizerChange::CreateList,
            Some(list) => match list.into_iter().any(|f| f == names::FINALIZER) {
                true => FinalizerChange::None,
                false => FinalizerChange::Append,
            },
        };
        let unset = |field: &str| is_set.as_ref().is_none_or(|set| !set(field));
        Self {
            spec: is_set.is_none(),
            size: unset("size"),
            image: unset("image"),
            command: unset("command"),
            resources: unset("resources"),
            finalizer,
        }
    }

    /// Whether the object lacks nothing (no patch).
    pub fn nothing(&self) -> bool {
        !(self.spec || self.size || self.image || self.command || self.resources)
            && self.finalizer == FinalizerChange::None
    }

    fn key(&self) -> usize {
        let finalizer = match self.finalizer {
            FinalizerChange::None => 0,
            FinalizerChange::CreateList => 1,
            FinalizerChange::Append => 2,
        };
        usize::from(self.spec)
            | usize::from(self.size) << 1
            | usize::from(self.image) << 2
            | usize::from(self.command) << 3
            | usize::from(self.resources) << 4
            | finalizer << 5
    }
}

/// 2^5 spec states × 3 finalizer changes.
const KEYS: usize = 3 << 5;

fn add(path: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(path.iter().copied()), value })
}

/// The operations for `needs`, parents before children, spec before metadata.
pub fn operations(needs: &Needs) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    if needs.spec {
        ops.push(add(&["spec"], json!({})));
    }
    if needs.size {
        ops.push(add(&["spec", "size"], json!(defaults::SIZE)));
    }
    if needs.image {
        ops.push(add(&["spec", "image"], json!(defaults::IMAGE)));
    }
    if needs.command {
        ops.push(add(&["spec", "command"], json!(defaults::command())));
    }
    if needs.resources {
        let resources = serde_json::to_value(defaults::resources()).unwrap_or_else(|_| json!({}));
        ops.push(add(&["spec", "resources"], resources));
    }
    match needs.finalizer {
        FinalizerChange::None => {}
        FinalizerChange::CreateList => ops.push(add(&["metadata", "finalizers"], json!([names::FINALIZER]))),
        FinalizerChange::Append => ops.push(add(&["metadata", "finalizers", "-"], json!(names::FINALIZER))),
    }
    ops
}

fn encode(needs: &Needs) -> EncodedPatch {
    // A Vec of plain JSON values always serializes.
    EncodedPatch::new(serde_json::to_vec(&Patch(operations(needs))).unwrap_or_default())
}

/// The encoded patch for `needs`, built on first use; `None` when nothing is needed.
pub fn patch_for(needs: &Needs) -> Option<&'static EncodedPatch> {
    static TABLE: [OnceLock<EncodedPatch>; KEYS] = [const { OnceLock::new() }; KEYS];
    if needs.nothing() {
        return None;
    }
    TABLE.get(needs.key()).map(|slot| slot.get_or_init(|| encode(needs)))
}

/// The mutating webhook: defaults and the finalizer, as a JSON Patch (or no patch). It reads
/// only which spec fields are set: a value of the wrong type is left for the schema check that
/// follows mutation (and for the validating webhook) to name.
pub fn mutate<'a>(request: &Request<'a>) -> Response<'a> {
    let allowed = Response::allow(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) || request.sub_resource.is_some() {
        return allowed;
    }
    let object = match request.shell_object() {
        Ok(object) => object,
        Err(reason) => return Response::invalid(request, reason),
    };
    let spec = match object.spec_fields() {
        Ok(spec) => spec,
        Err(reason) => return Response::invalid(request, reason),
    };
    match patch_for(&Needs::of(object, spec.as_ref())) {
        Some(patch) => allowed.with_patch(patch),
        None => allowed,
    }
}
