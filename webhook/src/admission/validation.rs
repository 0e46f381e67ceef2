//! The validating webhook: every rule a spec must meet, each denial naming the field, the rule
//! and the value; who may change a spec ([`super::ownership`]); warnings for values that pass but
//! are risky.

use std::borrow::Cow;

use k8s_openapi::jiff::Timestamp;
use myownshell_api::MyOwnShellSpec;

use super::approvals;
use super::home;
use super::lifetime;
use super::ownership;
use super::policy::Policy;
use super::problem::Problem;
use super::resources;
use super::sharing;
use crate::admission::image;
use crate::classes::ClassIndex;
use crate::classes::rules::ClassRules;
use crate::classes::usage::{self, UseCheck};
use crate::connect::shell_index::ShellIndex;
use crate::review::request::{Operation, Request};
use crate::review::response::Response;

/// The rule `size` breaks, if any.
pub fn check_size(size: i32, policy: &Policy) -> Option<Problem> {
    (!(0..=policy.max_size).contains(&size))
        .then(|| Problem::new("size", "spec.size", format!("must be between 0 and {}, got {size}", policy.max_size)))
}

fn check_image<'r>(reference: &'r str, policy: &Policy) -> Result<image::ImageRef<'r>, Problem> {
    match image::parse(reference) {
        Err(why) => Err(Problem::new(
            "image",
            "spec.image",
            format!("must be a valid image reference ({why}), got {reference:?}"),
        )),
        Ok(parsed) if !policy.allowed_registries.is_empty() && !parsed.allowed_by(&policy.allowed_registries) => {
            Err(Problem::new(
                "image",
                "spec.image",
                format!(
                    "must come from an allowed registry ({}), got {reference:?}",
                    policy.allowed_registries.join(", ")
                ),
            ))
        }
        Ok(parsed) => Ok(parsed),
    }
}

/// The warning for an image that passes but moves (no tag, or `latest` without a digest).
fn image_warning(reference: &str, parsed: &image::ImageRef<'_>) -> Option<String> {
    if parsed.tag == Some("latest") && parsed.digest.is_none() {
        Some(format!(
            "spec.image: {reference:?} uses the moving tag \"latest\"; pin a version tag or a digest so every shell runs the same image"
        ))
    } else if !parsed.is_pinned() {
        Some(format!(
            "spec.image: {reference:?} has no tag, which means \"latest\"; pin a version tag or a digest so every shell runs the same image"
        ))
    } else {
        None
    }
}

/// The longest argument the kernel passes to a program (`MAX_ARG_STRLEN`, 32 pages, less the
/// terminating NUL): `execve` refuses a longer one with "argument list too long".
pub const MAX_ARGUMENT_BYTES: usize = 131_071;
/// The most the arguments may take in all (each with its NUL and its 8-byte pointer). The kernel
/// allows a quarter of the stack limit (2 MiB by default) for the arguments and the environment
/// together, and the kubelet adds environment variables of its own (one set per Service in the
/// namespace): half of it is left to them.
pub const MAX_COMMAND_BYTES: usize = 1 << 20;

fn check_command(command: &[String], problems: &mut Vec<Problem>) {
    match command.first() {
        None => problems.push(Problem::new("command", "spec.command", "must not be empty, got []".into())),
        Some(first) if first.trim().is_empty() => problems.push(Problem::new(
            "command",
            "spec.command[0]",
            format!("the executable must not be empty, got {first:?}"),
        )),
        Some(_) => {}
    }
    for (i, argument) in command.iter().enumerate().filter(|(_, a)| a.len() > MAX_ARGUMENT_BYTES) {
        problems.push(Problem::new(
            "command",
            format!("spec.command[{i}]"),
            format!(
                "must be at most {MAX_ARGUMENT_BYTES} bytes (the kernel's limit for one argument), got {} bytes",
                argument.len()
            ),
        ));
    }
    let total: usize = command.iter().map(|a| a.len() + 1 + 8).sum();
    if total > MAX_COMMAND_BYTES {
        problems.push(Problem::new(
            "command",
            "spec.command",
            format!(
                "must take at most {MAX_COMMAND_BYTES} bytes in all (each argument with its NUL and pointer; the kernel \
                 refuses more with \"argument list too long\"), got {total} bytes in {} arguments",
                command.len()
            ),
        ));
    }
}

/// Every rule the spec breaks at `now` (in field order), `old` being the spec before an update,
/// and the warning its image earns if it passes.
fn examine(
    spec: &MyOwnShellSpec,
    old: Option<&MyOwnShellSpec>,
    policy: &Policy,
    now: Timestamp,
) -> (Vec<Problem>, Option<String>) {
    let mut problems = Vec::new();
    let mut warning = None;
    if let Some(size) = spec.size {
        problems.extend(check_size(size, policy));
    }
    if let Some(reference) = &spec.image {
        match check_image(reference, policy) {
            Ok(parsed) => warning = image_warning(reference, &parsed),
            Err(p) => problems.push(p),
        }
    }
    if let Some(command) = &spec.command {
        check_command(command, &mut problems);
    }
    if let Some(resources) = &spec.resources {
        resources::check(resources.requests.as_ref(), resources.limits.as_ref(), &mut problems);
    }
    if let Some(shared) = &spec.shared_with {
        sharing::check(shared, &mut problems);
    }
    if let Some(l) = &spec.lifetime {
        lifetime::check(l, policy, now, &mut problems);
    }
    if let Some(asked) = &spec.update_requested_at {
        lifetime::check_not_ahead(asked, now, &mut problems);
    }
    home::check(spec, old, policy, &mut problems);
    (problems, warning)
}

/// Every rule the spec breaks, in field order. Unset fields are fine (defaults apply).
pub fn check_spec(spec: &MyOwnShellSpec, policy: &Policy) -> Vec<Problem> {
    examine(spec, None, policy, Timestamp::now()).0
}

/// Admission warnings for values that pass but are risky: a moving image tag, a share wider
/// than it seems (in `namespace`).
pub fn warnings(spec: &MyOwnShellSpec, namespace: &str) -> Vec<String> {
    let image = spec
        .image
        .as_ref()
        .and_then(|reference| image::parse(reference).ok().and_then(|parsed| image_warning(reference, &parsed)));
    let lifetime = spec.lifetime.as_ref().map(lifetime::warnings).unwrap_or_default();
    image.into_iter().chain(sharing::warnings(spec, namespace)).chain(lifetime).collect()
}

fn deny<'a>(request: &Request<'a>, problems: &[Problem]) -> Response<'a> {
    let message = problems.iter().map(Problem::to_string).collect::<Vec<_>>().join("; ");
    Response::deny(request.uid.clone(), 422, "Invalid", message)
}

/// An UPDATE of an object being deleted that leaves its spec as it was (removing finalizers,
/// changing labels): admitted whatever the spec holds, even one that no longer passes or
/// decodes, so that nothing can hold up a deletion. A changed spec is validated like any
/// update. (The validating configuration does not even send these requests, so they pass while
/// the webhook is down too; this answer is for callers configured otherwise.)
fn leaves_a_deleting_spec_alone(request: &Request<'_>) -> bool {
    let (Some(new), Some(old)) = (&request.object, &request.old_object) else { return false };
    old.is_being_deleted()
        && (new.raw_spec() == old.raw_spec() || matches!((new.spec(), old.spec()), (Ok(a), Ok(b)) if a == b))
}

/// The validating webhook: CREATE and UPDATE of `MyOwnShell`, and the `scale` subresource.
///
/// On UPDATE only fields that change are held to the rules ("ratcheting"): an object that
/// became invalid because the policy tightened (say `--max-size` lowered) can still get its
/// finalizer removed or its labels changed, and fixing one field is not blocked by another.
pub fn validate<'a>(request: &Request<'a>, policy: &Policy, shells: &ShellIndex) -> Response<'a> {
    validate_with_classes(request, policy, shells, ClassIndex::none()).0
}

/// The problems the shell's class finds, the `use` of it to be asked, and whether the request
/// takes the class up (creates, changes or starts the shell): a class
/// it names that does not exist is a problem where the request would take it up (creation, a
/// new class, a start); where it would not, the shell keeps running on the operator's rules.
fn class_problems<'a>(
    request: &Request<'a>,
    spec: &MyOwnShellSpec,
    old: Option<&MyOwnShellSpec>,
    classes: &ClassIndex,
    (policy, now): (&Policy, Timestamp),
) -> (Vec<Problem>, Option<UseCheck<'a>>, bool) {
    let Some(name) = spec.class_name.as_deref() else { return (Vec::new(), None, false) };
    let asked = usage::asks_use(request.operation, spec, old);
    let Some(class) = classes.get(name) else {
        if asked.is_none() {
            return (Vec::new(), None, false);
        }
        let rule = format!("no MyOwnShellClass is named {name:?} (kubectl get myownshellclasses lists them)");
        // A class's rule like any other: it holds again at every start, so a shell whose class
        // was deleted is not started on the operator's rules alone.
        return (vec![Problem::new("className", "spec.className", rule).of_class()], None, true);
    };
    let rules = ClassRules { name, spec: &class.spec };
    let mut problems = rules.check(spec, now);
    // The class's default image is held to the operator's rules as a spec's own would be.
    if spec.image.is_none()
        && let Err(mut problem) = check_image(rules.image_of(spec), policy)
    {
        problem.message = format!("{} (MyOwnShellClass {name:?}'s spec.images.default)", problem.message);
        problems.push(problem.of_class());
    }
    // The default class is open to whoever may create shells.
    let check = asked.filter(|class| !classes.is_default(class)).map(|class| UseCheck {
        class: Cow::Owned(class.to_owned()),
        approve: false,
        namespace: request.namespace.clone(),
        user: request.user_info.clone(),
    });
    (problems, check, asked.is_some())
}

/// [`validate`] with the shells' classes: their rules beside the operator's, and the class whose
/// `use` the requester still needs for the answer to stand (asked by the HTTP layer).
pub fn validate_with_classes<'a>(
    request: &Request<'a>,
    policy: &Policy,
    shells: &ShellIndex,
    classes: &ClassIndex,
) -> (Response<'a>, Option<UseCheck<'a>>) {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return (Response::allow(request), None);
    }
    if request.is_scale() {
        return validate_scale(request, policy, shells, classes);
    }
    let object = match request.shell_object() {
        Ok(object) => object,
        Err(reason) => return (Response::invalid(request, reason), None),
    };
    if request.operation == Operation::Update && leaves_a_deleting_spec_alone(request) {
        return (Response::allow(request), None);
    }
    let spec = match object.spec() {
        Ok(spec) => spec.unwrap_or_default(),
        Err(reason) => return (Response::invalid(request, reason), None),
    };
    let old = match request.operation {
        Operation::Update => request.old_object.as_ref().and_then(|o| o.spec().ok()).map(Option::unwrap_or_default),
        _ => None,
    };
    if let Some(old) = &old
        && let Some(message) = ownership::refusal(old, &spec, &request.user_info, &policy.admin_groups)
    {
        return (ownership::forbid(request, message), None);
    }
    match approvals_answer(request, &spec, old.as_ref(), policy, classes) {
        Some(answer) => answer,
        None => judge(request, &spec, old.as_ref(), policy, classes),
    }
}

/// A change of `spec.approvals`: refused, or, for an approver's change of nothing else, allowed
/// on condition that RBAC lets them `approve` the shell. `None`: approvals untouched, or
/// changed along with the rest by someone who may change the rest (judged as a whole).
fn approvals_answer<'a>(
    request: &Request<'a>,
    spec: &MyOwnShellSpec,
    old: Option<&MyOwnShellSpec>,
    policy: &Policy,
    classes: &ClassIndex,
) -> Option<(Response<'a>, Option<UseCheck<'a>>)> {
    let before = old.and_then(|o| o.approvals.as_deref()).unwrap_or_default();
    let after = spec.approvals.as_deref().unwrap_or_default();
    if before == after {
        return None;
    }
    let owner = match old {
        Some(old) => old.owner.clone(),
        None => Some(request.user_info.username.to_string()),
    };
    let class = spec.class_name.as_deref().and_then(|name| classes.get(name));
    let rule = class.as_ref().and_then(|c| c.spec.approval.as_ref());
    let admin = policy.admin_groups.iter().any(|g| request.user_info.in_group(g));
    if let Some(message) = approvals::refusal(before, after, &request.user_info, admin, rule, owner.as_deref()) {
        return Some((ownership::forbid(request, message), None));
    }
    let added = after.iter().any(|a| !before.contains(a));
    let rest_unchanged = old.is_some_and(|old| {
        MyOwnShellSpec { approvals: None, ..old.clone() } == MyOwnShellSpec { approvals: None, ..spec.clone() }
    });
    match (added, rest_unchanged) {
        (true, true) => Some((Response::allow(request), Some(UseCheck::approve(request)))),
        (true, false) => {
            let message = "spec.approvals: an approval is added on its own, not with other changes".to_owned();
            Some((ownership::forbid(request, message), None))
        }
        (false, _) => None,
    }
}

/// Every rule of `spec` (an update from `old`, ratcheted) by the operator's flags and the
/// shell's class, once who may change it has been settled: the answer, and the class whose
/// `use` the requester still needs.
fn judge<'a>(
    request: &Request<'a>,
    spec: &MyOwnShellSpec,
    old: Option<&MyOwnShellSpec>,
    policy: &Policy,
    classes: &ClassIndex,
) -> (Response<'a>, Option<UseCheck<'a>>) {
    let now = Timestamp::now();
    let (mut problems, image_warning) = examine(spec, old, policy, now);
    problems.extend(home::check_name(&request.name, spec));
    let (class_problems, use_check, takes_class_up) = class_problems(request, spec, old, classes, (policy, now));
    problems.extend(class_problems);
    if let Some(old) = old.filter(|_| !problems.is_empty()) {
        let unchanged = |top: &str| unchanged(top, spec, old);
        // A start takes the shell's class up again: its rules hold for every field then, so a
        // shell that no longer fits its class is not started into what the class forbids.
        problems.retain(|p| !unchanged(p.top) || (takes_class_up && p.of_class));
    }
    if !problems.is_empty() {
        return (deny(request, &problems), None);
    }
    let mut response = Response::allow(request);
    response.warnings.extend(image_warning);
    response.warnings.extend(sharing::warnings(spec, &request.namespace));
    response.warnings.extend(spec.lifetime.as_ref().map(lifetime::warnings).unwrap_or_default());
    (response, use_check)
}

/// Whether the top-level spec field `top` is the same in `spec` and `old` (a problem of an
/// unchanged field does not hold an update up).
fn unchanged(top: &str, spec: &MyOwnShellSpec, old: &MyOwnShellSpec) -> bool {
    match top {
        "size" => spec.size == old.size,
        "image" => spec.image == old.image,
        "command" => spec.command == old.command,
        "resources" => spec.resources == old.resources,
        "sharedWith" => spec.shared_with == old.shared_with,
        "lifetime" => spec.lifetime == old.lifetime,
        "updateRequestedAt" => spec.update_requested_at == old.update_requested_at,
        "home" => spec.home == old.home && spec.size == old.size,
        "className" => spec.class_name == old.class_name,
        "recordSessions" => spec.record_sessions == old.record_sessions,
        _ => false,
    }
}

/// `kubectl scale`: an `autoscaling/v1` `Scale` whose `spec.replicas` becomes `spec.size`, by
/// the shell's owner (the `Scale` does not say whose it is: `shells` does). A shell with a class
/// is judged as the same change of its spec would be: the class's `maxSize`, and at a start
/// (from no pods) everything the class says and its `use`.
fn validate_scale<'a>(
    request: &Request<'a>,
    policy: &Policy,
    shells: &ShellIndex,
    classes: &ClassIndex,
) -> (Response<'a>, Option<UseCheck<'a>>) {
    let Some(object) = &request.object else {
        return (Response::invalid(request, "the request has no object".into()), None);
    };
    let shell = shells.get(&request.namespace, &request.name);
    if let Some(message) = ownership::scale_refusal(shell.as_deref(), &request.user_info, &policy.admin_groups) {
        return (ownership::forbid(request, message), None);
    }
    let size = match replicas(object) {
        Ok(size) => size,
        Err(reason) => return (Response::invalid(request, reason), None),
    };
    if let Some(p) = check_size(size, policy) {
        return (deny(request, &[p]), None);
    }
    let Some(spec) = shell.as_ref().and_then(|s| s.classed.as_ref()).map(|c| c.0.as_ref()) else {
        return (Response::allow(request), None);
    };
    // The size it had is the old Scale's (the stored spec's), not the index's, which may lag.
    let mut old = spec.clone();
    if let Some(was) = request.old_object.as_ref().and_then(|o| replicas(o).ok()) {
        old.size = Some(was);
    }
    let new = MyOwnShellSpec { size: Some(size), ..old.clone() };
    judge(request, &new, Some(&old), policy, classes)
}

/// A `Scale`'s `spec.replicas` (none: 0), or why it is not a size.
fn replicas(object: &crate::review::request::Object<'_>) -> Result<i32, String> {
    match object.scale_spec()?.replicas {
        None => Ok(0),
        Some(n) => match n.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(n) => Ok(n),
            None => Err(format!("spec.replicas must be a 32-bit integer, got {n}")),
        },
    }
}
