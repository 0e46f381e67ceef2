//! The mutating webhook: fill unset spec fields with [`defaults`], add the finalizer, and stamp
//! the owner, as an RFC 6902 JSON Patch of exactly the changes.
//!
//! The defaults depend only on which of a handful of things the object lacks ([`Needs`]), so
//! each distinct patch of them is built once (with the `json-patch` types), encoded once (JSON,
//! then base64 as the AdmissionReview wants it) and reused for every request that needs it.
//! The owner ([`owner_changes`]) is the requester, so a patch that stamps it is encoded per
//! request, after the defaults.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use myownshell_api::{MyOwnShellClass, MyOwnShellSpec, defaults, names};
use serde_json::{Value, json};

use super::home;
use super::lifetime;
use super::policy::Policy;
use crate::classes::ClassIndex;
use crate::review::request::{Object, Operation, Request};
use crate::review::response::{EncodedPatch, Response};
use crate::review::spec::SetFields;

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

/// `spec.approvals` with the entries this request adds stamped with who made it, why they may
/// and when ([`super::approvals::stamped`]): what a request says there is replaced.
fn approval_operations(
    request: &Request<'_>,
    spec: Option<&MyOwnShellSpec>,
    classes: &ClassIndex,
) -> Vec<PatchOperation> {
    let Some(spec) = spec else { return Vec::new() };
    let old = request.old_object.as_ref().and_then(|o| o.spec().ok().flatten());
    let owner = match request.operation {
        Operation::Create => Some(request.user_info.username.to_string()),
        _ => old.as_ref().and_then(|o| o.owner.clone()),
    };
    let class = spec.class_name.as_deref().and_then(|name| classes.get(name));
    let rule = class.as_ref().and_then(|c| c.spec.approval.as_ref());
    let old_approvals = old.as_ref().and_then(|o| o.approvals.clone()).unwrap_or_default();
    let new_approvals = spec.approvals.clone().unwrap_or_default();
    let now = myownshell_runtime::time::now();
    match super::approvals::stamped(&old_approvals, &new_approvals, &request.user_info, rule, owner.as_deref(), &now) {
        Some(stamped) => vec![add(&["spec", "approvals"], json!(stamped))],
        None => Vec::new(),
    }
}

/// A change of an owner field: the field's path and its new value, `None` to remove it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerChange<'r> {
    /// `/spec/owner` or `/spec/ownerUID`.
    pub path: &'static str,
    /// The new value; `None`: the field is removed.
    pub value: Option<Cow<'r, str>>,
}

const OWNER_PATH: &str = "/spec/owner";
const OWNER_UID_PATH: &str = "/spec/ownerUID";

/// The changes that make the requester the owner (at most two: no list to allocate). On
/// CREATE, `spec.owner` becomes the requester's user name and `spec.ownerUID` their uid,
/// whatever the object said (a uid given for a requester without one is removed). On UPDATE, an
/// owner the new object lacks is put back from the old one: a `kubectl apply` whose manifest
/// never named the owner must not drop it (a different owner is the validating webhook's to
/// refuse). Runs after [`operations`], so `/spec` exists by then.
pub fn owner_changes<'r>(request: &'r Request<'_>, spec: Option<&SetFields>) -> [Option<OwnerChange<'r>>; 2] {
    let set = |field: &str| spec.is_some_and(|s| s.contains(field));
    let change = |path, value: Option<Cow<'r, str>>| Some(OwnerChange { path, value });
    match request.operation {
        Operation::Create => {
            let user = &request.user_info;
            if user.username.is_empty() {
                return [None, None];
            }
            let uid = match user.uid() {
                Some(uid) => change(OWNER_UID_PATH, Some(Cow::Borrowed(uid))),
                None if set("ownerUID") => change(OWNER_UID_PATH, None),
                None => None,
            };
            [change(OWNER_PATH, Some(Cow::Borrowed(user.username.as_ref()))), uid]
        }
        Operation::Update => {
            let old = request.old_object.as_ref().and_then(|o| o.spec().ok().flatten()).unwrap_or_default();
            [
                old.owner.filter(|_| !set("owner")).and_then(|owner| change(OWNER_PATH, Some(Cow::Owned(owner)))),
                old.owner_uid
                    .filter(|_| !set("ownerUID"))
                    .and_then(|uid| change(OWNER_UID_PATH, Some(Cow::Owned(uid)))),
            ]
        }
        Operation::Delete | Operation::Connect => [None, None],
    }
}

/// `defaults`, then the owner's `changes`, then `more`, as one patch; `None` when all are empty.
///
/// Written as JSON text into one buffer, the defaults copied from their encoding and the owner
/// (on nearly every request) written directly: building `json_patch` values for it, encoding
/// them, joining the lists and encoding the base64 apart took eleven allocations per review.
fn combined(
    defaults: Option<&'static EncodedPatch>,
    changes: &[Option<OwnerChange<'_>>],
    more: &[PatchOperation],
) -> Option<Cow<'static, EncodedPatch>> {
    let changes = changes.iter().flatten();
    if changes.clone().next().is_none() && more.is_empty() {
        return defaults.map(Cow::Borrowed);
    }
    let room = changes.clone().map(|c| 48 + c.value.as_ref().map_or(0, |v| v.len() + 2)).sum::<usize>();
    let mut json = Vec::with_capacity(defaults.map_or(1, |d| d.json.len()) + room + 128 * more.len() + 1);
    // `[a,b]` and `c` make `[a,b,c]`.
    match defaults.and_then(|d| d.json.split_last()) {
        Some((_, open)) => json.extend_from_slice(open),
        None => json.push(b'['),
    }
    for change in changes {
        if json.len() > 1 {
            json.push(b',');
        }
        let (op, value) = match &change.value {
            Some(value) => ("add", Some(value)),
            None => ("remove", None),
        };
        json.extend_from_slice(b"{\"op\":\"");
        json.extend_from_slice(op.as_bytes());
        json.extend_from_slice(b"\",\"path\":\"");
        json.extend_from_slice(change.path.as_bytes());
        json.push(b'"');
        if let Some(value) = value {
            json.extend_from_slice(b",\"value\":");
            // A string always serializes (escaped as JSON wants it).
            let _ = serde_json::to_writer(&mut json, value.as_ref());
        }
        json.push(b'}');
    }
    for op in more {
        if json.len() > 1 {
            json.push(b',');
        }
        // Plain JSON values always serialize.
        let _ = serde_json::to_writer(&mut json, op);
    }
    json.push(b']');
    Some(Cow::Owned(EncodedPatch::once(json)))
}

/// The mutating webhook: defaults, the finalizer, the owner and the lifetime `policy` asks for,
/// and the webhook's clock on the times a user asks for "now" (`lifetime::stamp_operations`), as
/// a JSON Patch (or no patch). It reads only which spec fields are set (the whole spec only when
/// `policy` defaults the lifetime or the spec has a lifetime or an update request): a value of the wrong type is left for the schema check
/// that follows mutation (and for the validating webhook) to name.
pub fn mutate<'a>(request: &Request<'a>, policy: &Policy) -> Response<'a> {
    mutate_with_classes(request, policy, ClassIndex::none())
}

/// The class a new shell gets: the one it names, or else the default.
struct NewShellClass {
    /// The class, if it exists.
    class: Option<Arc<MyOwnShellClass>>,
    /// The default's name, when the shell named none and gets the default.
    assigned: Option<String>,
    /// A warning when several classes say they are the default.
    warning: Option<String>,
}

impl NewShellClass {
    fn of(named: Option<&str>, classes: &ClassIndex) -> Self {
        if let Some(name) = named {
            return Self { class: classes.get(name), assigned: None, warning: None };
        }
        let Some(default) = classes.default_class() else {
            return Self { class: None, assigned: None, warning: None };
        };
        let name = default.class.metadata.name.clone().unwrap_or_default();
        let warning = (!default.also.is_empty()).then(|| {
            format!(
                "spec.className: several MyOwnShellClasses are marked {}: \"true\" ({name}, {}); the newest, {name:?}, was taken",
                names::DEFAULT_CLASS_ANNOTATION,
                default.also.join(", "),
            )
        });
        Self { class: Some(default.class), assigned: Some(name), warning }
    }

    /// The operation that names the default, if the shell gets it.
    fn naming(&self) -> Option<PatchOperation> {
        self.assigned.as_ref().map(|name| add(&["spec", "className"], json!(name)))
    }
}

/// A new shell's class (the one it names, or the default) and what it fills in: the class's
/// operations, and a warning when several classes say they are the default.
fn class_defaults(spec: Option<&mut MyOwnShellSpec>, classes: &ClassIndex) -> (Vec<PatchOperation>, Option<String>) {
    let Some(spec) = spec else { return (Vec::new(), None) };
    let chosen = NewShellClass::of(spec.class_name.as_deref(), classes);
    let mut ops: Vec<PatchOperation> = chosen.naming().into_iter().collect();
    if let Some(name) = &chosen.assigned {
        spec.class_name = Some(name.clone());
    }
    if let Some(class) = &chosen.class {
        ops.extend(crate::classes::defaults::operations(spec, &class.spec));
    }
    (ops, chosen.warning)
}

/// A new shell's class found by `spec.className` alone, when that is all its class needs: the
/// spec is not read in full (19 allocations of a review against 7, `tests/allocations.rs`) for
/// a class that fills nothing from it ([`crate::classes::defaults::fills_anything`]), which is
/// most classes. `None` when the class does fill something, or `className` does not read.
fn class_by_name(object: &Object<'_>, classes: &ClassIndex) -> Option<(bool, NewShellClass)> {
    let named = object.class_name().ok()?;
    let chosen = NewShellClass::of(named.as_deref(), classes);
    match &chosen.class {
        Some(class) if crate::classes::defaults::fills_anything(&class.spec) => None,
        _ => Some((named.is_some(), chosen)),
    }
}

/// [`mutate`] with the shells' classes: a new shell without `spec.className` gets the default
/// class, and its class fills what the spec leaves unset before the operator's defaults do
/// (but its pods' image, command and resources, which the controller takes from the class).
pub fn mutate_with_classes<'a>(request: &Request<'a>, policy: &Policy, classes: &ClassIndex) -> Response<'a> {
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
    let owner = owner_changes(request, spec.as_ref());
    let mut more = Vec::new();
    if spec.as_ref().is_some_and(|s| s.contains("approvals")) {
        more.extend(approval_operations(request, object.spec().ok().flatten().as_ref(), classes));
    }
    let mut needs = Needs::of(object, spec.as_ref());
    let mut warning = None;
    let defaults_lifetime = policy.max_run_time.is_some() || policy.default_idle_timeout.is_some();
    let asks_for_now = spec.as_ref().is_some_and(|s| s.contains("lifetime") || s.contains("updateRequestedAt"));
    let has_home = spec.as_ref().is_some_and(|s| s.contains("home"));
    let may_have_class = request.operation == Operation::Create && classes.is_populated();
    // A shell of a class leaves its image, command and resources unset unless it sets them: the
    // controller takes them from the class when it builds the pods, so that a class's new
    // default reaches its running shells (at a quiet moment), which a value written here would
    // not.
    let mut has_class = spec.as_ref().is_some_and(|s| s.contains("className"));
    let reads_spec = defaults_lifetime || asks_for_now || has_home;
    let by_name = match may_have_class && !reads_spec {
        true => class_by_name(object, classes),
        false => None,
    };
    if let Some((named, chosen)) = by_name {
        has_class |= named || chosen.assigned.is_some();
        more.extend(chosen.naming());
        warning = chosen.warning;
    } else if reads_spec || may_have_class {
        // A spec that does not decode gets no lifetime default and no stamp; validation names
        // its fault.
        let mut decoded = object.spec().ok().map(Option::unwrap_or_default);
        if may_have_class {
            let (ops, several) = class_defaults(decoded.as_mut(), classes);
            has_class |= decoded.as_ref().is_some_and(|s| s.class_name.is_some());
            more.extend(ops);
            warning = several;
        }
        more.extend(lifetime::default_operations(decoded.as_ref(), policy));
        more.extend(home::default_operations(decoded.as_ref(), policy));
        if asks_for_now {
            let old = request.old_object.as_ref().and_then(|o| o.spec().ok().flatten());
            more.extend(lifetime::stamp_operations(decoded.as_ref(), old.as_ref(), &myownshell_runtime::time::now()));
        }
    }
    if has_class {
        (needs.image, needs.command, needs.resources) = (false, false, false);
    }
    let mut response = match combined(patch_for(&needs), &owner, &more) {
        Some(patch) => allowed.with_patch(patch),
        None => allowed,
    };
    response.warnings.extend(warning);
    response
}
