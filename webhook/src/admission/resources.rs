//! `spec.resources` held to the rules kube-apiserver applies to a container's resources
//! (k8s.io/kubernetes pkg/apis/core/validation `ValidateContainerResourceRequirements`), with
//! quantities read as it reads them ([`myownshell_api::quantity`]): a `MyOwnShell` admitted here
//! never yields a Deployment the apiserver refuses (which would leave it Degraded until someone
//! edits it). One rule is the operator's own: no value above 2⁶³−1, which the apiserver would cap
//! (binary) or hold beyond its 64-bit arithmetic (decimal) instead of storing what was written.

use myownshell_api::ResourceList;
use myownshell_api::quantity::{self, MAX_UNITS, Quantity};

use super::problem::Problem;
use super::resource_names;

const TOP: &str = "resources";

fn field(kind: &str, name: &str) -> String {
    format!("spec.resources.{kind}[{name}]")
}

/// The valid entries of one list, with their values; a problem for each invalid one.
fn entries<'l>(kind: &str, list: Option<&'l ResourceList>, problems: &mut Vec<Problem>) -> Vec<(&'l str, Quantity)> {
    let mut valid = Vec::new();
    for (name, text) in list.into_iter().flatten() {
        match entry(name, &text.0) {
            Ok(value) => valid.push((name.as_str(), value)),
            Err(message) => problems.push(Problem::new(TOP, field(kind, name), message)),
        }
    }
    valid
}

/// The value of one entry, or what is wrong with its name or its quantity.
fn entry(name: &str, text: &str) -> Result<Quantity, String> {
    resource_names::check(name)?;
    let value = quantity::parse(text)
        .map_err(|why| format!("must be a valid quantity such as 250m or 64Mi ({why}), got {text:?}"))?;
    if value.is_negative() {
        return Err(format!("must not be negative, got {text:?}"));
    }
    if value.exceeds_max() {
        let why = if value.is_capped() {
            format!("{text} would be capped by the API server")
        } else {
            "Kubernetes counts resources in 64-bit integers".to_owned()
        };
        return Err(format!("must be at most {MAX_UNITS} ({why}), got {text:?}"));
    }
    if resource_names::is_extended(name) && !value.is_whole() {
        return Err(format!("must be a whole number (extended resources are counted in units), got {text:?}"));
    }
    if let Some(size) = resource_names::page_size(name) {
        // A page size is a positive whole quantity (`2Mi`, `1Gi`), whatever its notation.
        let page = quantity::parse(size).ok().filter(|p| p.millis() > 0 && p.is_whole() && !p.exceeds_max());
        match page.map(|p| p.whole_units()) {
            None => {
                return Err(format!(
                    "must be a multiple of the page size, but {size:?} is not a page size (such as 2Mi or 1Gi), got {text:?}"
                ));
            }
            Some(page) if value.whole_units() % page != 0 => {
                return Err(format!("must be a multiple of the page size {size} ({page}), got {text:?}"));
            }
            Some(_) => {}
        }
    }
    Ok(value)
}

/// The text of entry `name` of `list`, as written.
fn written<'l>(list: Option<&'l ResourceList>, name: &str) -> Option<&'l str> {
    list.and_then(|l| l.get(name)).map(|q| q.0.as_str())
}

/// Problems of `spec.resources`, in field order: each entry of the requests and then of the
/// limits, then each request against its limit, then the list as a whole.
pub fn check(requests: Option<&ResourceList>, limits: Option<&ResourceList>, problems: &mut Vec<Problem>) {
    let requested = entries("requests", requests, problems);
    let limited = entries("limits", limits, problems);
    for (name, request) in &requested {
        let request_text = written(requests, name).unwrap_or_default();
        let overcommit = resource_names::may_overcommit(name);
        let message = match (written(limits, name), limited.iter().find(|(n, _)| n == name)) {
            (None, _) if !overcommit => {
                format!("needs an equal limit ({name} cannot be overcommitted), got {request_text:?} and no limit")
            }
            // A limit that is itself invalid was reported with the limits.
            (None, _) | (Some(_), None) => continue,
            (Some(limit_text), Some((_, limit))) if !overcommit && request.millis() != limit.millis() => {
                format!("must equal the limit {limit_text:?} ({name} cannot be overcommitted), got {request_text:?}")
            }
            (Some(limit_text), Some((_, limit))) if request.millis() > limit.millis() => {
                format!("must be less than or equal to the limit {limit_text:?}, got {request_text:?}")
            }
            (Some(_), Some(_)) => continue,
        };
        problems.push(Problem::new(TOP, field("requests", name), message));
    }
    // Hugepages alone are refused: the apiserver wants cpu or memory beside them.
    let names = || requests.into_iter().chain(limits).flat_map(ResourceList::keys).map(String::as_str);
    if names().any(resource_names::is_hugepages) && !names().any(|n| n == "cpu" || n == "memory") {
        problems.push(Problem::new(
            TOP,
            "spec.resources",
            "hugepages need a cpu or memory request or limit too (the API server refuses hugepages alone)".to_owned(),
        ));
    }
}
